"""Moved: the needle lab lives in attnviz.needle, and reading an uploaded text file (read_text, MAX_UPLOAD_BYTES) in
attnviz.models.pieces. This name still works for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import warn
from attnviz import needle as _needle
from attnviz.models import pieces as _pieces

_TEXT_FILES = ("read_text", "MAX_UPLOAD_BYTES")


def __getattr__(name: str):
    home, where = (_pieces, "attnviz.models.pieces") if name in _TEXT_FILES else (_needle, "attnviz.needle")
    value = getattr(home, name)
    warn(f"attnviz.long.{name}", f"{where}.{name}")
    return value
