"""Moved: a loaded model (Model, EngineModel, max_pieces) is attnviz.models.loaded. This name still works until 0.4,
and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz.models import loaded as _home

__getattr__ = moved("attnviz.models.model", _home)
