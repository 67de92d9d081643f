"""Moved: a run's head summaries and rollout live in attnviz.models.summaries, one head's formula and walk in
attnviz.models.walk, the logit lens's table in attnviz.models.lens (attnviz.models offers each name too). This name
still works for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import warn
from attnviz.models import lens as _lens, summaries as _summaries, walk as _walk


def __getattr__(name: str):
    for home in (_summaries, _walk, _lens):
        if hasattr(home, name):
            warn(f"attnviz.models.reading.{name}", f"{home.__name__}.{name}")
            return getattr(home, name)
    raise AttributeError(f"module 'attnviz.models.reading' has no attribute {name!r}")
