"""Names that earlier versions' docs promised and that have moved: each still works for one minor version, and warns
with the call that replaces it (CHANGELOG.md says when each goes)."""

from __future__ import annotations

import warnings

REMOVED_IN = "0.4"


def warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in attnviz {REMOVED_IN}; use {new}.", DeprecationWarning,
                  stacklevel=3)


def moved(old: str, home):
    """A module's `__getattr__` for an old module name whose every name now lives in module `home`: each still works,
    and warns with the new name."""
    def __getattr__(name: str):
        value = getattr(home, name)
        warn(f"{old}.{name}", f"{home.__name__}.{name}")
        return value
    return __getattr__
