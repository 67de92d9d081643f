"""The trained model and its results, cached for every session: the Trained model page and the lesson share them."""

import numpy as np
import streamlit as st

from attnviz import trained
from attnviz.cache import ByteBudgetCache

RESULT_CACHE_BYTES = 256 * 2**20  # a 512-piece result is ~155 MB


@st.cache_resource(show_spinner="Loading all-MiniLM-L6-v2 (90 MB of trained weights)…")
def model() -> trained.Model:
    return trained.default_model()


@st.cache_resource
def _results() -> ByteBudgetCache:
    """Results and their word-level weights, both measured by .nbytes."""
    return ByteBudgetCache(RESULT_CACHE_BYTES, lambda value: value.nbytes)


def forward(text: str) -> trained.Result:
    return _results().get(text, lambda: trained.run(model(), text))


def word_weights(text: str, result: trained.Result) -> np.ndarray:
    """(L, H, m, m): every head read as words, computed once per text rather than on every rerun (0.17 s at 512 pieces)."""
    return _results().get((text, "words"), lambda: trained.merge_pieces(result.weights, result.words.groups))
