"""Scoring-function lab: six scoring functions on the same queries and keys, and why we divide by √d."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from attnviz.functional import FORMULAS, PARAMETERS, SCORING_NAMES, attend, make_scorer
from attnviz.figures import SCALES, attention_heatmap, variance_against_d
from attnviz.pooling import dot_variance, softmax_entropy
from attnviz.urlstate import Param, choice, int_range, nearest
from appkit.common import load_url_state, save_url_state, scale_select
from attnviz.export import Matrix
from appkit.present import chart

SAMPLES = [1000, 2000, 4000, 8000, 16000]
SCHEMA = {
    "m": Param(5, int_range(1, 32)),
    "n": Param(7, int_range(1, 32)),
    "dq": Param(8, int_range(1, 256)),
    "dk": Param(8, int_range(1, 256)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "samples": Param(4000, nearest(SAMPLES)),
    "scale": Param("absolute", choice(SCALES)),
}
DIMS = [2, 4, 8, 16, 32, 64, 128, 256, 512]


@st.cache_data(max_entries=16, show_spinner="Sampling…")
def measurements(samples: int, seed: int):
    return (dot_variance(DIMS, samples, seed),
            softmax_entropy(DIMS, keys=32, queries=samples // 8, scaled=True, seed=seed),
            softmax_entropy(DIMS, keys=32, queries=samples // 8, scaled=False, seed=seed))


st.title("Scoring functions")
st.write("The same random queries and keys, scored six ways. Each heatmap shows the softmax weights "
         "(rows: queries, columns: keys) next to the formula that produced them.")
load_url_state(SCHEMA)
with st.sidebar:
    st.slider("Queries m", 1, 32, key="m")
    st.slider("Keys n", 1, 32, key="n")
    st.slider("Query size d_q", 1, 256, key="dq")
    st.slider("Key size d_k", 1, 256, key="dk", help="Make it differ from d_q: only general and additive can score then.")
    st.number_input("Seed", 0, 2**31 - 1, key="seed")
    st.select_slider("Samples for the √d plots", SAMPLES, key="samples")
    scale_select(st)
state = st.session_state
generator = torch.Generator().manual_seed(state.seed)
query = torch.randn(state.m, state.dq, generator=generator)  # (m, dq)
key = torch.randn(state.n, state.dk, generator=generator)  # (n, dk)
value = torch.eye(state.n)  # (n, n)
names = [f"k{j}" for j in range(state.n)]
rows = [f"q{i}" for i in range(state.m)]
for start in range(0, len(SCORING_NAMES), 3):
    for column, name in zip(st.columns(3), SCORING_NAMES[start : start + 3]):
        with column:
            st.subheader(name)
            # One height for every formula and every caption, so the heatmaps line up.
            st.container(height=80, border=False).latex(FORMULAS[name])
            st.container(height=45, border=False).caption(PARAMETERS.get(name, "\u00a0"))
            try:
                result = attend(query, key, value, scoring=make_scorer(name, state.dq, state.dk, seed=state.seed))
            except ValueError as error:
                st.warning(f"Cannot score: {error}")
                continue
            chart(st, attention_heatmap(result.weights.numpy(), rows, names, scores=result.scores.numpy(),
                                        scale=state.scale, width="third"),
                  key=f"score_{name}", matrix=Matrix(result.weights.numpy(), rows, names))

st.header("Why divide by √d?")
st.write("Take q and k with independent entries of mean 0 and variance 1. Then q·k is a sum of d products, "
         "each with variance 1, so Var(q·k) = d. Large scores push the softmax towards one-hot. Measured here "
         f"from {state.samples:,} samples per d, seed {state.seed}:")
variance, scaled, unscaled = measurements(state.samples, state.seed)
left, right = st.columns(2)
chart(left, variance_against_d(DIMS, variance), key="variance")
ent_fig = go.Figure([
    go.Scatter(x=DIMS, y=unscaled, mode="markers+lines", name="softmax(q·k)"),
    go.Scatter(x=DIMS, y=scaled, mode="markers+lines", name="softmax(q·k/√d)"),
    go.Scatter(x=DIMS, y=[np.log(32)] * len(DIMS), mode="lines", name="ln 32 (uniform)", line=dict(dash="dot")),
])
ent_fig.update_layout(xaxis=dict(type="log", title="d"), yaxis=dict(title="mean entropy over 32 keys (nats)"), height=360)
chart(right, ent_fig, key="entropy")
st.latex(r"\mathrm{Var}(q^\top k) = \sum_{i=1}^{d} \mathrm{Var}(q_i k_i) = d \quad\Rightarrow\quad \mathrm{Var}\!\left(\frac{q^\top k}{\sqrt d}\right) = 1")
save_url_state(SCHEMA)
