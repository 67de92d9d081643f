"""Batches: sentences of different lengths padded into one batch, the padding mask, and BMM step by step."""

import streamlit as st
import torch

from attnviz.functional import attend
from attnviz.encdec import bmm_items, pad_batch, padding_mask
from attnviz.embeddings import embed, tokenize
from attnviz.figures import SCALES, attention_heatmap, dims, matrix_heatmap
from attnviz.urlstate import Param, bounded_text, choice, int_range
from appkit.common import clamp, glove, held, load_url_state, save_url_state, scale_select, stop
from attnviz.export import Matrix
from appkit.present import chart

MAX_SENTENCES, MAX_TOKENS, BATCH_CHARS = 8, 64, 5000
SCHEMA = {
    "batch": Param("the dog wagged its tail\na cat sat\nwhen he saw his owner the dog was happy", bounded_text(BATCH_CHARS)),
    "item": Param(0, int_range(0, MAX_SENTENCES - 1)),
    "scale": Param("row", choice(SCALES)),
}

st.title("Batches and padding")
st.write("Sentences of different lengths are padded with zeros to the longest one and stacked into one "
         "batch. The padding mask hides the padding keys, so they receive exactly zero weight.")
load_url_state(SCHEMA)
scale_select()
kv = glove()
lines = [line for line in st.text_area("One sentence per line", key="batch", height=120, max_chars=BATCH_CHARS).splitlines() if line.strip()]
if not lines:
    stop("Type at least one sentence.", SCHEMA)
if len(lines) > MAX_SENTENCES:
    stop(f"At most {MAX_SENTENCES} sentences; this batch has {len(lines)}.", SCHEMA, error=True)
sentences = [embed(tokenize(line), kv, oov="drop") for line in lines]
if any(not s.tokens for s in sentences) or any(len(s.tokens) > MAX_TOKENS for s in sentences):
    stop(f"Each line needs at least one known word and at most {MAX_TOKENS} tokens.", SCHEMA, error=True)
x, valid = pad_batch([s.vectors for s in sentences])  # (B, T, d), (B, T)
mask = padding_mask(valid, valid)  # (B, 1, T, T)
result = attend(x, x, x, mask=mask[:, 0])  # weights (B, T, T)
B, T, d = x.shape
st.latex(r"X \in \mathbb{R}^{B \times T \times d} = %d \times %d \times %d,\quad \text{mask} \in \{0,1\}^{B \times 1 \times T \times T} = %d \times 1 \times %d \times %d" % (B, T, d, B, T, T))
padded_tokens = [s.tokens + ["⟨pad⟩"] * (T - len(s.tokens)) for s in sentences]
sentence_names, places = [f"sentence {b}" for b in range(B)], [str(t) for t in range(T)]
chart(st, matrix_heatmap(valid.float().numpy(), sentence_names, places, title="Padding mask (1 = real token, 0 = padding)",
                         bounded=True),
      key="padding", matrix=Matrix(valid.float().numpy(), sentence_names, places, corner="sentence \\ position"))
padding_weight = float(result.weights.masked_select(~mask[:, 0]).abs().max()) if (~mask).any() else 0.0
st.success(f"Largest weight on any padding key in the batch: {padding_weight:.1f} (exactly zero).")

PAD = "⟨pad⟩"
columns = st.columns(min(B, 2))  # two to a row: every key's label fits a half of a 1280-px page
for b, s in enumerate(sentences):
    n = len(s.tokens)
    with columns[b % len(columns)]:
        real = result.weights[b, :n, :].numpy()  # (n, T): the real queries over every key, padding included
        keys = s.tokens + [PAD] * (T - n)
        chart(st, attention_heatmap(real, s.tokens, keys, title=f"sentence {b}: {n} of {T} real", scale=st.session_state.scale,
                                    width="half", allowed=mask[b, 0, :n].numpy()),
              key=f"sentence_{b}", matrix=Matrix(real, s.tokens, keys))
        if n < T:
            keys = "padding key" if T - n == 1 else "padding keys"
            st.caption(f"The {T - n} {keys}, {PAD}, are masked: weight exactly 0, drawn grey and marked ×. The "
                       "padding query rows are not drawn: they are not real words.")

st.header("Batch matrix multiplication")
st.latex(r"\mathrm{BMM}(Q, K^\top) = [Q_1 K_1^\top, \dots, Q_n K_n^\top],\quad Q \in \mathbb{R}^{n \times a \times b},\ K^\top \in \mathbb{R}^{n \times b \times c} \Rightarrow \mathbb{R}^{n \times a \times c}")
st.latex(r"n = %d,\ a = %d,\ b = %d,\ c = %d" % (B, T, d, T))
item = held("item", B, clamp(0, B - 1, 0), lambda **widget: st.select_slider("Batch item", list(range(B)), **widget)) if B > 1 else 0
keys_t = x.transpose(1, 2)  # (B, d, T)
products = bmm_items(x, keys_t)  # B × (T, T)
left, middle, right = st.columns(3)
same = dict(width="third", height=460)  # one height for the row, whatever each matrix's shape
words, features = padded_tokens[item], dims(d)
for where, key, matrix, rows, cols, title in (
        (left, "bmm_q", x[item], words, features, f"Q<sub>{item}</sub>"),
        (middle, "bmm_k", keys_t[item], features, words, f"K<sub>{item}</sub>ᵀ"),
        (right, "bmm_out", products[item], words, words, f"Q<sub>{item}</sub> K<sub>{item}</sub>ᵀ")):
    corner = " \\ ".join("token" if labels is words else "dimension" for labels in (rows, cols))
    chart(where, matrix_heatmap(matrix.numpy(), rows, cols, title=title, **same), key=key,
          matrix=Matrix(matrix.numpy(), rows, cols, corner))
st.caption("Labels are thinned where they would not fit; hover names every row and column.")
st.caption(f"torch.bmm on the whole batch gives the same {B} × {T} × {T} numbers: largest difference "
           f"{float((torch.bmm(x, keys_t) - torch.stack(products)).abs().max()):.1e}.")
save_url_state(SCHEMA)
