"""Moved: "Why here?" lives in attnviz.effects.why (attnviz.effects offers its functions too). This name still works
for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz.effects import why as _why

__getattr__ = moved("attnviz.why", _why)
