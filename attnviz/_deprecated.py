"""Names that earlier versions' docs promised and that have moved: each still works for one minor version, and warns
with the call that replaces it (CHANGELOG.md says when each goes)."""

from __future__ import annotations

import warnings

REMOVED_IN = "0.4"


def warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in attnviz {REMOVED_IN}; use {new}.", DeprecationWarning,
                  stacklevel=3)


def moved(old: str, *homes):
    """A module's `__getattr__` for an old module name whose names now live in the modules `homes`: each name still
    works, taken from the first home that has it, and warns with its new name."""
    def __getattr__(name: str):
        for home in homes:
            if hasattr(home, name):
                warn(f"{old}.{name}", f"{home.__name__}.{name}")
                return getattr(home, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    return __getattr__
