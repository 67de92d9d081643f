"""Moved: what a model computed on a text (Run, Attention, Words, log_scores) is attnviz.models.result. This name
still works until 0.4, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz.models import result as _home

__getattr__ = moved("attnviz.models.run", _home)
