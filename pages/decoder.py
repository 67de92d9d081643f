"""Decoder: SmolLM2-135M's 30 layers × 9 causal heads on any text, its next word, attention sinks and the logit lens,
computed by attnviz's own engine (attnviz.decoder)."""

import numpy as np
import streamlit as st
import torch

from attnviz import decoder, figures
from attnviz.export import Matrix
from attnviz.urlstate import Param, boolean, bounded_text, choice, encode_bool, int_range, nearest
from pages._common import clicked_point, load_url_state, position_select, save_url_state, scale_select, stop
from pages._model import decode, decode_one_more, decoder_model
from pages._present import chart

TEXT_CHARS = 4_000
TEMPERATURES = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 1.0, 1.2, 1.5, 2.0]
TOP_P = [0.5, 0.8, 0.9, 0.95, 1.0]
BARS = 10  # next-token bars
LENS_POSITIONS = 12  # the logit lens's last positions
SCHEMA = {
    "text": Param("When he saw his owner, the dog was", bounded_text(TEXT_CHARS)),
    "layer": Param(1, int_range(1, 30)),
    "head": Param(1, int_range(1, 9)),
    "nosink": Param(False, boolean, encode_bool),  # the first token hidden, the rest renormalised, for reading
    "t": Param(0.7, nearest(TEMPERATURES)),
    "topk": Param(50, int_range(0, 1000)),
    "topp": Param(0.95, nearest(TOP_P)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "scale": Param("row", choice(figures.SCALES)),
    "lens": Param(False, boolean, encode_bool),  # the logit lens is open
    "query": Param(-1, int_range(-1, decoder.MAX_TOKENS - 1)),  # the inspected query piece; -1: the last
    "lines": Param(False, boolean, encode_bool),  # the line view is open
}

st.title("Decoder: SmolLM2-135M")
st.write("A decoder reads text left to right and predicts the next piece. Each of its 30 layers has 9 query heads; "
         "they share 3 key/value heads (grouped-query attention: heads 1–3 read K/V group 1, 4–6 group 2, 7–9 "
         "group 3). Positions enter as rotations of q and k (RoPE), and the causal mask hides the future, so the "
         "upper triangle of every head is empty by construction. SmolLM2-135M-Instruct (Apache-2.0), read from its "
         "GGUF file and run by our own engine.")
st.latex(r"\alpha^{(l,h)} = \mathrm{softmax}\Big(\frac{R_p(x W_q^{(h)})\,R_p(x W_k^{(g(h))})^\top}{\sqrt{64}} + M_{\text{causal}}\Big),"
         r"\quad g(h) = \lceil h/3 \rceil")
load_url_state(SCHEMA)


def next_word(greedy: bool) -> None:
    """Append the next piece, drawn from the distribution the controls set (or the most likely one). Text the model
    cannot read (typed just before the click) is left as it is: the page then says why."""
    try:
        result = decode(st.session_state.text)
    except decoder.TextError:
        return
    probs = distribution(result)
    if greedy:
        chosen = int(probs.argmax())
    else:
        generator = torch.Generator().manual_seed(st.session_state.seed + len(result.tokens.ids))
        chosen = int(torch.multinomial(probs, 1, generator=generator))
    longer = decode_one_more(st.session_state.text, chosen)
    if len(longer) <= TEXT_CHARS:  # the text box holds at most TEXT_CHARS characters
        st.session_state.text = longer


def distribution(result: decoder.Result) -> torch.Tensor:
    """(vocab,) the next-token probabilities under the page's temperature, top-k and top-p."""
    return decoder.next_distribution(torch.from_numpy(result.next_logits), st.session_state.t, st.session_state.topk,
                                     st.session_state.topp)


def looks_back(result: decoder.Result, labels: list[str], layer: int) -> None:
    """The last piece's query row in each of the layer's heads, and the K/V cache it reads: what a click adds."""
    n_layers, n_heads, n = result.weights.shape[:3]
    heads = [f"head {h}" for h in range(1, n_heads + 1)]
    rows = result.weights[layer - 1, :, -1, :]  # (H, n)
    chart(st, figures.matrix_heatmap(rows, heads, labels, bounded=True, height=360,
                                     title=f"The last piece “{labels[-1]}” (#{n - 1}) looks back: layer {layer}, its 9 heads"),
          key="decoder_last", matrix=Matrix(rows, heads, labels, corner="head \\ key"))
    cache_mb = n_layers * 2 * 3 * n * 64 * 4 / 2**20
    st.caption(f"Each row sums to 1 over the {n} pieces so far (the layer is chosen under All 270 heads). The K/V cache "
               f"now holds {n} rows of K and V in each of the 30 layers' 3 key/value heads (30 × 2 × 3 × {n} × 64 "
               f"floats, {cache_mb:.1f} MB); the next piece adds one row each.")


text = st.text_area("Text", key="text", max_chars=TEXT_CHARS, height=80)
with st.sidebar:
    scale_select(st)
try:
    result = decode(text)
except decoder.TextError as error:
    stop(str(error), SCHEMA, error=bool(text.strip()))
except (ImportError, FileNotFoundError) as error:
    stop(f"The decoder is not installed: {error}", SCHEMA, error=True)

tokens, labels = result.tokens, result.tokens.labels()
n_layers, n_heads, n = result.weights.shape[:3]
st.caption(f"{n} pieces (at most {decoder.MAX_TOKENS}; in labels · marks a space, ↵ a line break) · computed with "
           f"torch on **{decoder_model().device}**")

# ---------------------------------------------------------------- the next word
st.header("The next word")
controls, bars = st.columns([2, 3])
controls.select_slider("Temperature T (0: greedy)", TEMPERATURES, key="t")
controls.number_input("Top-k (0: every piece)", 0, 1000, key="topk")
controls.select_slider("Top-p (nucleus)", TOP_P, key="topp")
controls.latex(r"p_i = \frac{e^{z_i/T}}{\sum_j e^{z_j/T}}\ \text{over the kept pieces}")
sample, greedy = controls.columns(2)
sample.button("Next word (sample)", on_click=next_word, args=(False,), icon=":material/casino:")
greedy.button("Next word (greedy)", on_click=next_word, args=(True,), icon=":material/arrow_forward:")
probs = distribution(result).numpy()  # (vocab,)
top, names = decoder.top_pieces(decoder_model(), probs, BARS)
chart(bars, figures.weight_bars(probs[top], names, title=f"Next piece after “…{labels[-1]}”: the {len(top)} most likely",
                                axis="probability"), key="next",
      matrix=Matrix(probs[top][None].copy(), ["next"], names, corner="after the text \\ piece"))
controls.caption("A click appends the piece. The model keeps each layer's keys and values of the pieces so far (its "
                 "K/V cache), so the new piece costs one query row per head: its attention back over the text, below.")
looks_back(result, labels, st.session_state.layer)

# ---------------------------------------------------------------- heads
st.header("All 270 heads")
pick_layer, pick_head, pick_sink = st.columns(3)
layer = pick_layer.selectbox("Layer", list(range(1, n_layers + 1)), key="layer")
head = pick_head.selectbox("Head", list(range(1, n_heads + 1)), key="head")
hide_sink = pick_sink.toggle("Hide the first piece (renormalise)", key="nosink",
                             help="Many heads put most of their weight on the first piece, an attention sink. Hidden, "
                                  "each row is renormalised over the other keys, to read what else the head looks at.")
hide_sink = hide_sink and n > 1  # a single piece has no other key to read
key_labels = labels[1:] if hide_sink else labels


def open_head() -> None:
    point = clicked_point("decoder_atlas")
    if point and len(point) == 2:
        st.session_state.layer, st.session_state.head = int(point[0]) + 1, int(point[1]) + 1


# 270 thumbnails of at most 16 × 16 blocks, 28 px a layer: the atlas fits a 1080-px screen and builds in ~0.1 s.
chart(st, figures.head_atlas(result.weights, chosen=(layer - 1, head - 1), scale=st.session_state.scale, most=16,
                             tile_px=28, group=n_heads // 3), key="decoder_atlas", on_select=open_head, selection_mode="points")
st.caption("Layers run down, heads across (every head's own weights, the first piece included); dark lines part the "
           "three key/value groups (heads 1–3, 4–6, 7–9 share K and V). Click a head to open it.")

group = (head - 1) // (n_heads // 3) + 1
title = f"Layer {layer}, head {head} (K/V group {group})" + (": first piece hidden, rows renormalised" if hide_sink else "")
chosen = result.weights[layer - 1, head - 1]  # (n, n)
allowed = np.tril(np.ones((n, n), bool))  # (n, n)
if hide_sink:
    chosen, allowed = decoder.without_first(chosen), allowed[:, 1:]  # (n, n − 1) each
chart(st, figures.attention_heatmap(chosen, labels, key_labels, title=title, scale=st.session_state.scale, allowed=allowed),
      key="decoder_head", matrix=Matrix(chosen, labels, key_labels))

inspect, lines = st.columns(2)
picked = position_select(inspect, "Query piece", labels, "query", first=(-1, "the last piece"))
query = n - 1 if picked < 0 else picked
row = chosen[query]  # (n,) or (n − 1,): zero beyond the query (causal)
shown = np.arange(len(key_labels)) <= (query - 1 if hide_sink else query)  # the keys the query may read
chart(inspect, figures.weight_bars(row[shown], key_labels[:int(shown.sum())], highlight=int(row.argmax()),
                                   start=1 if hide_sink else 0, title=f"What “{labels[query]}” (#{query}) reads"),
      key="decoder_query", matrix=Matrix(row[None].copy(), [labels[query]], key_labels))
inspect.caption("Its weights over the pieces up to itself; the pieces after it are masked (the causal mask).")
if lines.toggle("Line view", key="lines", help="bertviz's lines from each piece to those it reads; drawn on request, "
                                               "so a next word redraws fewer charts"):
    chart(lines, figures.line_view(result.weights[layer - 1, head - 1][None], labels, query=query,
                                   head_names=[f"layer {layer}, head {head}"]), key="decoder_lines")
    lines.caption("Each piece (left) to the pieces it reads (right), the head's own weights (the first piece "
                  "included); the chosen query's lines stand out.")

# ---------------------------------------------------------------- sinks and the logit lens
st.header("Attention sinks")
sinks = result.sinks  # (L, H)
heads_labels, layer_labels = [str(h) for h in range(1, n_heads + 1)], [str(l) for l in range(1, n_layers + 1)]
chart(st, figures.matrix_heatmap(sinks, layer_labels, heads_labels, bounded=True, height=620,
                                 title=f"Mean weight on the first piece “{labels[0]}” (layers × heads)"),
      key="sinks", matrix=Matrix(sinks, layer_labels, heads_labels, corner="layer \\ head"))
st.caption("Each head's weight on the first piece, averaged over the pieces after it. Near 1: the head parks its "
           "attention there when nothing else fits (an attention sink); the first piece sees only itself.")

st.header("Logit lens")
if st.toggle("Read every layer's prediction", key="lens",
             help="Each layer's hidden state through the final norm and the output matrix: 31 × 49,152 logits per "
                  "position, about 0.03 s a position, so only the last positions and only when asked."):
    start = max(0, n - LENS_POSITIONS)
    ids, lens_probs = decoder.logit_lens(decoder_model(), result.hidden[:, start:])  # (L + 1, shown, 1) each
    lens = [[f"{decoder.piece_text(decoder_model(), [int(ids[l, i, 0])])[0]!r} {lens_probs[l, i, 0]:.2f}"
             for i in range(n - start)] for l in range(n_layers + 1)]
    st.dataframe({"layer": ["embeddings", *layer_labels],
                  **{f"#{start + i} {labels[start + i]}": [row[i] for row in lens] for i in range(n - start)}},
                 hide_index=True)
    st.caption(f"The last {n - start} positions: what each layer's hidden state would predict next, read through the "
               "final RMSNorm and the output matrix (the embeddings, tied), with its probability; the last row is the "
               "model's own prediction.")
save_url_state(SCHEMA)
