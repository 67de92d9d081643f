"""Encoder–decoder views: encoder self-attention, causal decoder self-attention and cross-attention."""

import streamlit as st

from attnviz.encdec import alignment, encoder_decoder, pad_batch
from attnviz.embeddings import embed, tokenize
from attnviz.functional import causal_mask
from attnviz.figures import SCALES, attention_heatmap
from attnviz.urlstate import Param, bounded_text, choice, int_range
from appkit.common import glove, load_url_state, save_url_state, scale_select, stop
from attnviz.export import Matrix
from appkit.present import chart

MAX_TOKENS, SENTENCE_CHARS = 64, 2000
SCHEMA = {
    "src": Param("the black cat sat on the mat", bounded_text(SENTENCE_CHARS)),
    "tgt": Param("a cat sat on a black mat", bounded_text(SENTENCE_CHARS)),
    "scoring": Param("dot", choice(["scaled_dot", "dot", "cosine"])),
    "k": Param(3, int_range(1, 10)),
    "scale": Param("row", choice(SCALES)),
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
scale_select()
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

scale = st.session_state.scale
st.caption("Mask shapes (B, 1, T_q, T_k): B sentences in the batch (here 1), 1 mask shared by every head, "
           "T_q query positions, T_k key positions. 1 = may attend.")
PANELS = [
    ("Encoder", r"H = \mathrm{softmax}\big(a(X_s, X_s)\big)\,X_s", (t_in, t_in), "encoder",
     views.encoder, source, source, src.oov, src.oov, "source × source"),
    ("Decoder, causal", r"D = \mathrm{softmax}_{j \le i}\big(a(X_t, X_t)\big)\,X_t", (t_out, t_out), "decoder",
     views.decoder, target, target, tgt.oov, tgt.oov, "target × target"),
    ("Cross-attention", r"\alpha = \mathrm{softmax}\big(a(D, H)\big),\ \alpha H", (t_out, t_in), "cross",
     views.cross, target, source, tgt.oov, src.oov, "target × source"),
]
for column, (name, formula, (t_q, t_k), key, weights, rows_tokens, cols_tokens, row_oov, col_oov, axes) in zip(st.columns(3), PANELS):
    with column:
        st.subheader(name)
        st.latex(formula)
        st.caption(f"mask (B, 1, T_q, T_k) = (1, 1, {t_q}, {t_k})")
        allowed = causal_mask(t_q, t_k).numpy() if key == "decoder" else None  # the causal mask: j ≤ i
        chart(st, attention_heatmap(weights[0, 0].numpy(), rows_tokens, cols_tokens, row_oov=row_oov, col_oov=col_oov,
                                    title=axes, scale=scale, width="third", allowed=allowed), key=key,
              matrix=Matrix(weights[0, 0].numpy(), rows_tokens, cols_tokens))
st.caption("Encoder: every source word sees every source word. Decoder: above the diagonal is the future, blocked, "
           "weight exactly 0. Cross-attention: rows are target words (queries), columns source words; keys and values "
           "are the encoder's output H, the memory. X_s, X_t: the sentences' GloVe rows; a: the chosen scoring function.")

st.subheader("Alignment: which source words each target word reads")
rows = alignment(views.cross[0, 0].numpy(), source, k)
st.dataframe({"target word": [f"#{i} {w}" for i, w in enumerate(target)],
              "top source words": [", ".join(f"#{j} {w} ({p:.2f})" for j, w, p in r["top"]) for r in rows],
              "entropy (nats)": [round(r["entropy"], 3) for r in rows]}, hide_index=True)
st.caption("Entropy in nats (natural logarithm): 0 = the word reads one source word; ln T_in = it reads all evenly.")
save_url_state(SCHEMA)
