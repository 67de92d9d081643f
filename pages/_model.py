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


@st.cache_resource(show_spinner="Loading SmolLM2-135M (its float weights from the cache, or de-quantized once from the GGUF file)…")
def decoder_model():
    from attnviz import decoder

    return decoder.load_model()


def decode(text: str):
    """The decoder's Result for `text`, shared by every session (same budget as the encoder's results)."""
    from attnviz import decoder

    return _results().get(("decoder", text), lambda: decoder.run(decoder_model(), text))


def decode_one_more(text: str, token: int) -> str:
    """The text with `token` appended; its Result comes from the K/V cache of `text`'s (decoder.extend, one new row)
    where the longer text reads as the same pieces plus `token`, else from a whole forward when it is next drawn."""
    from attnviz import decoder

    model = decoder_model()
    result = decode(text)
    longer = text + model.tokenizer.decode([token])
    if model.tokenizer.encode(longer).ids == [*result.tokens.ids, token]:
        _results().get(("decoder", longer), lambda: decoder.extend(model, result, token))
    return longer
