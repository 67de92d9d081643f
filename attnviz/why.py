"""Moved: "Why here?" lives in attnviz.effects.why (attnviz.effects offers its functions too). This name still works
for one minor version, and warns (CHANGELOG.md)."""

from attnviz._deprecated import warn
from attnviz.effects import why as _why


def __getattr__(name: str):
    value = getattr(_why, name)
    warn(f"attnviz.why.{name}", f"attnviz.effects.why.{name}")
    return value
