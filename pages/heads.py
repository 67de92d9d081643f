"""Heads and layers: a bertviz-style line view, head summaries, a stack of layers and attention rollout."""

import streamlit as st
import torch

from attnviz.encdec import layer_stack, rollout
from attnviz.embeddings import embed, tokenize
from attnviz.figures import HEAD_COLOURS, attention_heatmap, line_view
from attnviz.selfattention import Config, run
from attnviz.urlstate import Param, bounded_text, choice, int_range
from pages._common import glove, load_url_state, position_select, save_url_state, stop

MAX_TOKENS, SENTENCE_CHARS = 64, 2000
SCHEMA = {
    "text": Param("When he saw his owner, the dog was happy, so he wagged his tail", bounded_text(SENTENCE_CHARS)),
    "heads": Param(4, int_range(1, len(HEAD_COLOURS))),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "focus": Param(-1, int_range(-1, MAX_TOKENS - 1)),
    "layers": Param(3, int_range(1, 6)),
    "lmode": Param("identity", choice(["identity", "random"])),
}

st.title("Heads and layers")
load_url_state(SCHEMA)
kv = glove()
sentence = st.text_input("Sentence", key="text", max_chars=SENTENCE_CHARS)
with st.sidebar:
    heads = st.slider("Heads H (random projections, d_k = 16)", 1, len(HEAD_COLOURS), key="heads")
    seed = st.number_input("Seed", 0, 2**31 - 1, key="seed")
    layers = st.slider("Layers L", 1, 6, key="layers")
    mode = st.radio("Layer projections", ["identity", "random"], key="lmode", horizontal=True)
tokens = tokenize(sentence)
if not tokens:
    stop("Type a sentence.", SCHEMA)
if len(tokens) > MAX_TOKENS:
    stop(f"This page takes at most {MAX_TOKENS} tokens; the sentence has {len(tokens)}.", SCHEMA, error=True)
embedded = embed(tokens, kv)
if all(embedded.oov):
    stop("None of these words are in the vocabulary. Try ordinary English words.", SCHEMA, error=True)
view = run(embedded.vectors, Config(projection="random", heads=heads, d_k=16, seed=seed))

st.header("Line view")
focus = position_select(st, "Show the lines of", tokens, "focus", first=(-1, "every word"))
st.plotly_chart(line_view(view.weights, tokens, query=None if focus < 0 else focus, oov=embedded.oov), key="lines", width="stretch")
st.caption("One colour per head (Okabe–Ito, distinct for colour-blind readers); lines under weight 0.01 are left out.")

st.header("Head summaries")
mean_col, max_col = st.columns(2)
mean_col.plotly_chart(attention_heatmap(view.mean_weights, tokens, title="Average over heads (rows sum to 1)"), key="mean", width="stretch")
max_col.plotly_chart(attention_heatmap(view.weights.max(0), tokens, title="Maximum over heads (rows need not sum to 1)"), key="max", width="stretch")

st.header("Layers and rollout")
st.latex(r"h^{(l)} = \mathrm{LayerNorm}\big(h^{(l-1)} + \mathrm{Attention}(h^{(l-1)})\big),\quad "
         r"\tilde A_l = 0.5\,A_l + 0.5\,I,\quad R = \tilde A_L \cdots \tilde A_1")
per_layer = layer_stack(torch.from_numpy(embedded.vectors), layers, mode=mode, seed=seed)
columns = st.columns(min(layers, 3))
for l, weights in enumerate(per_layer):
    columns[l % len(columns)].plotly_chart(attention_heatmap(weights.numpy(), tokens, title=f"layer {l + 1}"),
                                           key=f"layer_{l}", width="stretch")
st.plotly_chart(attention_heatmap(rollout(per_layer).numpy(), tokens, title=f"Rollout through {layers} layer(s)"),
                key="rollout", width="stretch")
st.caption("Rollout (Abnar & Zuidema) follows attention through the residual connections: how much each input word reaches each output position.")
save_url_state(SCHEMA)
