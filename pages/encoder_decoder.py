"""Encoder–decoder views: encoder self-attention, causal decoder self-attention and cross-attention."""

import streamlit as st

from attnviz.encdec import alignment, encoder_decoder, pad_batch
from attnviz.embeddings import embed, tokenize
from attnviz.figures import attention_heatmap
from attnviz.urlstate import Param, bounded_text, choice, int_range
from pages._common import stop, glove, load_url_state, save_url_state

MAX_TOKENS, SENTENCE_CHARS = 64, 2000
SCHEMA = {
    "src": Param("the black cat sat on the mat", bounded_text(SENTENCE_CHARS)),
    "tgt": Param("a cat sat on a black mat", bounded_text(SENTENCE_CHARS)),
    "scoring": Param("dot", choice(["scaled_dot", "dot", "cosine"])),
    "k": Param(3, int_range(1, 10)),
}

st.title("Encoder–decoder attention")
st.write("The encoder reads the source sentence; the decoder reads the target sentence so far, one word "
         "seeing only earlier words (causal), and then looks at the encoder's output, its **memory**, "
         "through cross-attention. Projections are the identity, so the weights come from GloVe alone.")
load_url_state(SCHEMA)
kv = glove()
source_text = st.text_input("Source sentence (encoder)", key="src", max_chars=SENTENCE_CHARS)
target_text = st.text_input("Target sentence (decoder)", key="tgt", max_chars=SENTENCE_CHARS)
scoring = st.sidebar.selectbox("Scoring", ["scaled_dot", "dot", "cosine"], key="scoring",
                               help="dot gives the sharpest alignment on raw GloVe vectors; cosine scores lie in [-1, 1] and give flat weights.")
k = st.sidebar.slider("Top-k source words per target word", 1, 10, key="k")
source, target = tokenize(source_text), tokenize(target_text)
if not source or not target:
    stop("Type both a source and a target sentence.", SCHEMA)
if max(len(source), len(target)) > MAX_TOKENS:
    stop(f"Each sentence may have at most {MAX_TOKENS} tokens here; shorten it.", SCHEMA, error=True)
src, tgt = embed(source, kv), embed(target, kv)
if all(src.oov) or all(tgt.oov):
    stop("None of the words of one sentence are in the vocabulary, so it has nothing to attend with.", SCHEMA, error=True)
x_in, valid_in = pad_batch([src.vectors])
x_out, valid_out = pad_batch([tgt.vectors])
views = encoder_decoder(x_in, valid_in, x_out, valid_out, scoring=scoring)
t_in, t_out = len(source), len(target)

enc, dec, cross = st.columns(3)
with enc:
    st.subheader("Encoder self-attention")
    st.caption("mask (B, 1, T_in, T_in) = (1, 1, %d, %d)" % (t_in, t_in))
    st.plotly_chart(attention_heatmap(views.encoder[0, 0].numpy(), source, row_oov=src.oov), key="encoder", width="stretch")
with dec:
    st.subheader("Decoder causal self-attention")
    st.caption("mask (B, 1, T_out, T_out) = (1, 1, %d, %d)" % (t_out, t_out))
    st.plotly_chart(attention_heatmap(views.decoder[0, 0].numpy(), target, row_oov=tgt.oov), key="decoder", width="stretch")
    st.caption("Above the diagonal is the future: blocked, weight exactly 0.")
with cross:
    st.subheader("Cross-attention")
    st.caption("mask (B, 1, T_out, T_in) = (1, 1, %d, %d)" % (t_out, t_in))
    st.plotly_chart(attention_heatmap(views.cross[0, 0].numpy(), target, source, row_oov=tgt.oov, col_oov=src.oov),
                    key="cross", width="stretch")
    st.caption("Rows: target words (queries). Columns: source words (keys and values from the memory).")

st.subheader("Alignment: which source words each target word reads")
rows = alignment(views.cross[0, 0].numpy(), source, k)
st.dataframe({"target word": target,
              "top source words": [", ".join(f"{w} ({p:.2f})" for w, p in r["top"]) for r in rows],
              "entropy (nats)": [round(r["entropy"], 3) for r in rows]}, hide_index=True)
save_url_state(SCHEMA)
