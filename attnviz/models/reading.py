"""Moved: a run's head summaries and rollout live in attnviz.models.summaries, one head's formula and walk in
attnviz.models.walk, the logit lens's table in attnviz.models.lens (attnviz.models offers each name too). This name
still works for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz.models import lens as _lens, summaries as _summaries, walk as _walk

__getattr__ = moved("attnviz.models.reading", _summaries, _walk, _lens)
