"""Heads and layers: a bertviz-style line view, head summaries, a stack of layers and attention rollout."""

import streamlit as st
import torch

from attnviz.encdec import layer_stack, rollout
from attnviz.embeddings import embed, tokenize
from attnviz.figures import HEAD_COLOURS, PALETTES, SCALES, attention_heatmap, interactive_heatmap, line_view
from attnviz.sentence import MASKS, Config, run, temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, coerce, encode_bool, encode_int_list, int_list, int_range, nearest
from appkit.common import clamp, clicked, glove, held, load_url_state, position, position_select, save_url_state, scale_select, stop
from appkit.interactive import interactive_heatmap as mount, screen_sizes, view_state, weights_on_screen
from attnviz.export import Matrix
from appkit.present import chart, downloads

MAX_TOKENS, SENTENCE_CHARS = 64, 2000
SCHEMA = {
    "text": Param("When he saw his owner, the dog was happy, so he wagged his tail", bounded_text(SENTENCE_CHARS)),
    "heads": Param(4, int_range(1, len(HEAD_COLOURS))),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "focus": Param(-1, int_range(-1, MAX_TOKENS - 1)),
    "layers": Param(3, int_range(1, 6)),
    "lmode": Param("identity", choice(["identity", "random"])),
    "lhead": Param(0, int_range(-1, len(HEAD_COLOURS) - 1)),  # one head to start: every word × every head is a hairball
    "scale": Param("row", choice(SCALES)),
    # The head summary, drawn in the browser from every head's scores (appkit/interactive): what it shows.
    "over": Param("mean", choice(["mean", "max"])),
    "temp": Param(1.0, nearest(temperature_grid())),
    "hard": Param(False, boolean, encode_bool),
    "mask": Param("none", choice(MASKS)),
    "hide": Param([], int_list, encode_int_list),
    "palette": Param("viridis", choice(PALETTES)),
    "query": Param(0, int_range(0, MAX_TOKENS - 1)),
}

st.title("Heads and layers")
load_url_state(SCHEMA)
kv = glove()
sentence = st.text_input("Sentence", key="text", max_chars=SENTENCE_CHARS)
with st.sidebar:
    heads = st.slider("Heads H (random projections, d_k = 16)", 1, len(HEAD_COLOURS), key="heads",
                      help="d_k: the length of each head's query and key vectors.")
    seed = st.number_input("Seed", 0, 2**31 - 1, key="seed")
    layers = st.slider("Layers L", 1, 6, key="layers")
    mode = st.radio("Layer projections", ["identity", "random"], key="lmode", horizontal=True)
    scale_select(st)
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
st.write("Each line joins a query word (left) to a key word (right); the stronger the weight, the bolder the line.")
pick_word, pick_heads = st.columns(2)
focus = position_select(pick_word, "Show the lines of", tokens, "focus", first=(-1, "every word"))
shown = held("lhead", heads, clamp(-1, heads - 1, 0),
             lambda **widget: pick_heads.selectbox("Heads shown", [-1, *range(heads)], **widget,
                                                   format_func=lambda h: "all heads together" if h < 0 else f"head {h} alone"))


def pick_focus() -> None:
    """A click on a query word (left) shows its lines; a second click on it shows every word's again."""
    word = clicked("lines")
    if word is not None:
        st.session_state.focus = -1 if word == st.session_state.get("focus") else word


chart(st, line_view(view.weights, tokens, query=None if focus < 0 else focus, heads=None if shown < 0 else [shown],
                    oov=embedded.oov),
          key="lines", on_select=pick_focus, selection_mode="points")
st.caption("Click a word on the left to see its lines alone. Opacity and width grow with each weight relative to the "
           "largest one drawn. One colour per head, from the Okabe–Ito set, which colour-blind readers can tell apart.")

st.header("Head summaries")
st.write("All the heads in one matrix: their **average** (each row still sums to 1) or each cell's **maximum** over "
         "the heads (its strongest head; rows need not sum to 1). Choose under \"Over heads\" above the heatmap. τ, hard "
         "attention and the masks apply to every head before they are combined; hover gives each head's weight.")
n = len(tokens)
st.session_state.query = position(tokens, "query")
st.session_state.hide = [i for i in st.session_state.get("hide", []) if isinstance(i, int) and 0 <= i < n]
summary_view = view_state(SCHEMA)
data = interactive_heatmap(
    view.scores, tokens, row_oov=embedded.oov, view=summary_view, title=f"random projections, d_k = 16, seed {seed}",
    taus=temperature_grid(), file="attnviz_heads", bars_limit=MAX_TOKENS, **screen_sizes(),
    overflow="The scores divided by τ are larger than float32 can hold, so the softmax has no answer. Choose a larger τ.",
)
mount(data, key="live_heads", clean=lambda sent: coerce(sent, SCHEMA))
summary = weights_on_screen(view.scores, summary_view)  # (n, n) as drawn
summary_title = f"{'Maximum' if summary_view['over'] == 'max' else 'Average'} over {heads} heads"
downloads(st, "summary", lambda: attention_heatmap(summary, tokens, row_oov=embedded.oov, title=summary_title,
                                                   scale=summary_view["scale"], palette=summary_view["palette"]),
          Matrix(summary, tokens, tokens), image_help="PNG or SVG: the buttons above the heatmap.")
st.latex(r"\text{average: } \bar\alpha_{ij} = \frac{1}{H}\sum_{h=1}^{H} \alpha^{(h)}_{ij},\qquad "
         r"\text{maximum: } \alpha^{\max}_{ij} = \max_h \alpha^{(h)}_{ij}")
st.latex(r"\alpha^{(h)} = \mathrm{softmax}\big(Q^{(h)} K^{(h)\top} / (\sqrt{16}\,\tau)\big)")

scale = st.session_state.scale
st.header("Layers and rollout")
st.latex(r"h^{(l)} = \mathrm{LayerNorm}\big(h^{(l-1)} + \mathrm{Attention}(h^{(l-1)})\big),\quad "
         r"\tilde A_l = 0.5\,A_l + 0.5\,I,\quad R = \tilde A_L \cdots \tilde A_1")
per_layer = layer_stack(torch.from_numpy(embedded.vectors), layers, mode=mode, seed=seed)
columns = st.columns(min(layers, 2))  # two to a row: every word's label fits a half of a 1280-px page
for l, weights in enumerate(per_layer):
    chart(columns[l % len(columns)],
          attention_heatmap(weights.numpy(), tokens, title=f"layer {l + 1}", scale=scale, width="half"),
          key=f"layer_{l}", matrix=Matrix(weights.numpy(), tokens, tokens))
flow = rollout(per_layer).numpy()  # (n, n)
chart(st, attention_heatmap(flow, tokens, title=f"Rollout through {layers} layer(s)", scale=scale), key="rollout",
      matrix=Matrix(flow, tokens, tokens, corner="output \\ input"))
st.caption("Rollout (Abnar & Zuidema, 2020) follows attention through the residual connections: how much each input "
           "word reaches each output position. Ã adds the identity because each layer also passes its input on unchanged.")
save_url_state(SCHEMA)
