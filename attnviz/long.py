"""Moved: the needle lab lives in attnviz.needle, and reading an uploaded text file (read_text, MAX_UPLOAD_BYTES) in
attnviz.models.pieces. This name still works for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz import needle as _needle
from attnviz.models import pieces as _pieces

__getattr__ = moved("attnviz.long", _needle, _pieces)
