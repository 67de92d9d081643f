"""Moved: self-attention over one sentence (the explorer's matrices and steps) is attnviz.sentence. This name still
works until 0.4, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz import sentence as _home

__getattr__ = moved("attnviz.selfattention", _home)
