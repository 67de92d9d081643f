"""GloVe for a page's run, below both the pages' helpers (appkit/common) and the warm-up (appkit/warm), which builds
it as the server starts: the one place that knows whether the KeyedVectors are built yet. Light: gensim and the
vectors load inside the functions."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

    from attnviz.embeddings import GloveMatrix

KEYED = threading.Event()  # set once GloVe's KeyedVectors are built (or failed to be)
_matrix = None  # GloVe's memory-mapped matrix, from the warm-up's start until the KeyedVectors are built


def glove() -> KeyedVectors | GloveMatrix:
    """GloVe for a page's run: gensim's KeyedVectors, which the server builds behind the first heatmap
    (appkit/warm.py). Until they are built, the matrix memory-mapped from the package's file, which answers the same
    lookups with the same numbers."""
    early = early_glove()
    return early if early is not None else keyed_glove()


@st.cache_resource(show_spinner=False)  # built as the server starts (appkit/warm.py), under its own loading title
def keyed_glove() -> KeyedVectors:
    from attnviz.embeddings import load_glove

    return load_glove()


def early_glove() -> GloveMatrix | None:
    """GloVe's memory-mapped matrix (attnviz.embeddings.GloveMatrix) while the KeyedVectors are still being built;
    None once they are, and where no warm-up runs (AppTest, a page run alone)."""
    return None if KEYED.is_set() else _matrix


def map_early() -> None:
    """The warm-up's start: the mapped matrix answers until the KeyedVectors are built."""
    global _matrix
    from attnviz.embeddings import GloveMatrix

    _matrix = GloveMatrix.load()


def keyed_built() -> None:
    """The KeyedVectors are built (or failed to be): the mapped matrix's pages go back; runs still holding it keep it
    until they end."""
    global _matrix
    KEYED.set()
    _matrix = None
