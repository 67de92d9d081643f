"""attnviz: see and understand the attention mechanism. The core library; it never imports streamlit."""

import os

# torch reads this once, at its first allocation, so it is set before torch is imported. Tensors of 2 MB
# and more then sit on transparent huge pages: the first touch of a fresh n×n weight matrix (64 MB at
# n = 4,096) costs a fifth of what 4 KB pages cost, which made up half of the engine's time at that size.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


from attnviz.attention import AttentionResult, attend, make_projections, make_scorer, multi_head, pick_device
from attnviz.embeddings import embed, load_glove, load_vectors, tokenize

__all__ = [
    "AttentionResult", "attend", "embed", "load_glove", "load_vectors", "make_projections", "make_scorer",
    "multi_head", "pick_device", "tokenize",
]
