"""attnviz: see and understand the attention mechanism. The core library; it never imports streamlit."""

from attnviz.attention import AttentionResult, attend, make_projections, make_scorer, multi_head, pick_device
from attnviz.embeddings import embed, load_glove, load_vectors, tokenize

__all__ = [
    "AttentionResult", "attend", "embed", "load_glove", "load_vectors", "make_projections", "make_scorer",
    "multi_head", "pick_device", "tokenize",
]
