"""Streamlit helpers the pages share: cached word vectors, the vector-source picker, URL mirroring."""

from __future__ import annotations

import hashlib
import os
import re
import sys

import streamlit as st


def _leave_legacy_page_mode() -> None:
    """Run every page through app.py's st.navigation, also on a fresh server's first deep link.

    Streamlit runs the very first session of a server in its legacy pages/ mode when a pages/ folder
    exists, until some run calls st.navigation. A link straight to /kv_database on a fresh server
    would then run the page without app.py (no menu, no page config). Switching the flag off and
    rerunning sends that run through app.py, which picks the same page.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without this internal: nothing to fix
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_page_mode()


def _draw_plotly_while_importing():
    """On a cold server the imports below (torch, gensim) take seconds, and only then would the first
    chart ask the browser for plotly.js (4.7 MB to fetch and compile). An empty chart drawn first makes
    the browser do that meanwhile. Returns its slot, to clear, or None on a warm server."""
    if "torch" in sys.modules:
        return None
    slot = st.empty()
    slot.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"title": {"text": "Loading GloVe and the attention engine…"}, "height": 80,
                                              "xaxis": {"visible": False}, "yaxis": {"visible": False}}},
                      config={"staticPlot": True})
    return slot


_loading = _draw_plotly_while_importing()

# These imports come after the chart above on purpose (see _draw_plotly_while_importing).
import torch  # noqa: E402, F401  every page computes with it
from gensim.models import KeyedVectors  # noqa: E402

from attnviz.embeddings import (  # noqa: E402
    MAX_UPLOAD_BYTES, VECTOR_FORMATS, VectorFileError, load_glove, load_uploaded, load_vectors, vectors_from_settings,
)
from attnviz.urlstate import Param, encode_params, parse_params  # noqa: E402

if _loading is not None:
    _loading.empty()

GLOVE_LABEL = "GloVe 6B 50-d (built in, 400,000 words)"
URL_TEXT_LIMIT = 2000  # characters; longer text is not put in the URL


@st.cache_resource(show_spinner="Loading GloVe 6B 50-d (400,000 words)…")
def glove() -> KeyedVectors:
    return load_glove()


@st.cache_resource(show_spinner="Loading vectors from the configured file…")
def _vectors_at(path: str, fmt: str | None) -> KeyedVectors:
    return load_vectors(path, fmt)


@st.cache_resource(max_entries=4, show_spinner="Reading the uploaded vectors…")
def _uploaded(digest: str, _data: bytes, filename: str, fmt: str | None) -> KeyedVectors:
    return load_uploaded(_data, filename, fmt)


def word_vectors() -> tuple[KeyedVectors, str] | None:
    """The sidebar's vector source; (vectors, an id for caches), or None after showing why not."""
    path, fmt = vectors_from_settings(sys.argv, dict(os.environ))
    sources = [GLOVE_LABEL] + ([f"File from settings: {os.path.basename(path)}"] if path else []) + ["Upload a file"]
    source = st.sidebar.radio(
        "Word vectors", sources, key="vectors",
        help="GloVe ships with the app. You can also upload GloVe text (no header) or word2vec text/binary.",
    )
    if source == GLOVE_LABEL:
        return glove(), "glove"
    try:
        if source.startswith("File from settings"):
            return _vectors_at(path, fmt), f"path:{path}:{fmt}"
        return _upload_picker()
    except VectorFileError as error:
        st.sidebar.error(md_escape(str(error)))
        return None


def _upload_picker() -> tuple[KeyedVectors, str] | None:
    upload = st.sidebar.file_uploader(
        f"Vector file (at most {MAX_UPLOAD_BYTES // 2**20} MiB)", type=["txt", "vec", "bin"], key="vector_file",
        help="One word per line followed by its numbers (GloVe), the same with a 'count dim' first line "
        "(word2vec text), or word2vec binary (.bin). Files are parsed, never unpickled.",
    )
    fmt = st.sidebar.selectbox("Format", ["auto", *VECTOR_FORMATS], key="vector_format")
    if upload is None:
        st.sidebar.info("Choose a file to use your own vectors.")
        return None
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    return _uploaded(digest, data, upload.name, None if fmt == "auto" else fmt), f"upload:{digest}:{fmt}"


def load_url_state(schema: dict[str, Param]) -> None:
    """Fill session state from the URL once per session and page, before the widgets are drawn."""
    marker = "_url_loaded_" + ",".join(schema)
    if marker in st.session_state:
        return
    st.session_state[marker] = True
    for name, value in parse_params(st.query_params.to_dict(), schema).items():
        st.session_state[name] = value


def save_url_state(schema: dict[str, Param]) -> None:
    """Mirror every control into the URL, so a copied link reproduces this view."""
    values = {name: st.session_state.get(name, param.default) for name, param in schema.items()}
    params = encode_params(values, schema)
    if len(params.get("text", "")) > URL_TEXT_LIMIT:
        params.pop("text")
        st.caption(f"The text is over {URL_TEXT_LIMIT} characters, so the link does not include it.")
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)


def stop(message: str, schema: dict[str, Param], *, error: bool = False) -> None:
    """End this run with a calm message (st.info), or st.error for input that cannot be used; the URL
    still mirrors the controls, so the link reproduces what the person sees."""
    (st.error if error else st.info)(md_escape(message))  # messages may quote the user's own text
    save_url_state(schema)
    st.stop()


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&])")


def md_escape(text: str) -> str:
    """User text made safe to place inside Markdown: every special character is backslash-escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)
