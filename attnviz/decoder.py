"""Kept for code written against earlier docs, which promised these names here: they live in attnviz.models now."""

from attnviz._deprecated import warn
from attnviz.models.generate import next_distribution, top_pieces

__all__ = ["next_distribution", "top_pieces", "load_model", "run", "extend", "logit_lens"]


def load_model():
    """Deprecated: the built-in decoder, as `attnviz.models.load("smollm2")` gives it."""
    from attnviz import models

    warn("attnviz.decoder.load_model()", 'attnviz.models.load("smollm2")')
    return models.load("smollm2")


def run(model, text: str):
    """Deprecated: `model.run(text)`."""
    warn("attnviz.decoder.run(model, text)", "model.run(text)")
    return model.run(text)


def extend(model, result, token: int):
    """Deprecated: `model.extend(result, token)`."""
    warn("attnviz.decoder.extend(model, result, token)", "model.extend(result, token)")
    return model.extend(result, token)


def logit_lens(model, hidden, top: int = 1):
    """Deprecated: `model.logit_lens(hidden, top)`."""
    warn("attnviz.decoder.logit_lens(model, hidden)", "model.logit_lens(hidden)")
    return model.logit_lens(hidden, top)
