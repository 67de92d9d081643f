"""attnviz: see and understand the attention mechanism. The core library; it never imports streamlit."""

import importlib
import os

from attnviz import _deprecated

__version__ = "0.3.0"  # pyproject.toml's version; CHANGELOG.md says what each version changed

# torch reads this once, at its first allocation, so it is set before torch is imported. Tensors of 2 MB
# and more then sit on transparent huge pages: the first touch of a fresh n×n weight matrix (64 MB at
# n = 4,096) costs a fifth of what 4 KB pages cost, which made up half of the engine's time at that size.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

_EXPORTS = {
    "AttentionResult": "functional", "attend": "functional", "make_projections": "functional",
    "make_scorer": "functional", "multi_head": "functional", "pick_device": "functional",
    "embed": "embeddings", "load_glove": "embeddings", "load_vectors": "embeddings", "tokenize": "embeddings",
}
__all__ = sorted(_EXPORTS)
_deprecated.install()  # the old modules' names (attnviz.attention, attnviz.models.run, …), until 0.4


def __getattr__(name: str):
    """Exports load on first use, so `import attnviz.figures` does not wait for torch and gensim."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'attnviz' has no attribute {name!r}")
    return getattr(importlib.import_module(f"attnviz.{_EXPORTS[name]}"), name)
