"""Moved: the attention functions (scorers, masks, attend, grouped_attend, heads) are in attnviz.functional. This
name still works until 0.4, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz import functional as _home

__getattr__ = moved("attnviz.attention", _home)
