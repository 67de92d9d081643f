"""Kept for code written against earlier docs, which promised these names here: they live in attnviz.models now."""

from attnviz._deprecated import warn
from attnviz.models.summaries import head_summaries, rollout
from attnviz.models.walk import head_steps

__all__ = ["head_summaries", "rollout", "head_steps", "attention"]


def attention(text: str):
    """Deprecated: MiniLM's run on `text`, as `attnviz.models.load("minilm").run(text)` gives it."""
    from attnviz import models

    warn("attnviz.trained.attention(text)", 'attnviz.models.load("minilm").run(text)')
    return models.load("minilm").run(text)
