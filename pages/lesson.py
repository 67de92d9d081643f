"""Lesson: the story of attention in fifteen steps, one per screen, each a live figure with its formula.

Every step calls the same attnviz functions as the page it links to; the step is in the URL (?step=7).
"""

from dataclasses import replace

import numpy as np
import streamlit as st
import torch

from pages._common import clicked, glove, load_url_state, md_escape, page_link, position_select, save_url_state
from pages._explorer import Request, compare_downloads, live_compare
from pages._interactive import screen_sizes
from pages._model import model as loaded_model, run as model_run
from attnviz.export import Matrix
from pages._present import PRESENT, chart
from attnviz import figures, models
from attnviz.decoder import next_distribution, top_pieces
from attnviz.attention import FORMULAS, attend, causal_mask, entropy, make_scorer
from attnviz.encdec import bmm_items, encoder_decoder, pad_batch, padding_mask
from attnviz.embeddings import embed, tokenize
from attnviz.pooling import TRUE_FUNCTIONS, dot_variance, nadaraya_watson, salary_data
from attnviz.retrieval import PRESETS, exact_matches, retrieve, value_matrix
from attnviz.selfattention import Config, run, steps, temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, coerce, encode_bool, int_range, nearest

DOG = "When he saw his owner, the dog was happy, so he wagged his tail"
RECORDS = PRESETS["Surnames → first names"][0]  # Zhang→Aston, Lipton→Zachary, Li→Mu, Smola→Alex, Hu→Rachel, Werness→Brent
BATCH = ["the dog wagged its tail", "a cat sat", "when he saw his owner the dog was happy"]
SOURCE, TARGET = "the black cat sat on the mat", "a cat sat on a black mat"
SENTENCE_CHARS, MAX_TOKENS = 300, 64
SIGMAS = [0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
DIMS = [2, 4, 8, 16, 32, 64, 128, 256, 512]
FIGURE_COLUMN = "three_fifths"  # the share of the page a step's figure column gives a figure (figures.PLOT_PX)
SCHEMA = {
    "step": Param(1, int_range(1, 15)),
    "q": Param("Li", bounded_text(40)),
    "tau": Param(0.1, nearest(temperature_grid())),
    "sigma": Param(0.1, nearest(SIGMAS)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "text": Param(DOG, bounded_text(SENTENCE_CHARS)),
    "query": Param(9, int_range(0, MAX_TOKENS - 1)),
    "dk": Param(4, int_range(1, 16)),
    "mask": Param("causal", choice(["causal", "padding"])),
    "scoring": Param("dot", choice(["dot", "scaled_dot", "cosine"])),
    "item": Param(0, int_range(0, len(BATCH) - 1)),
    "heads": Param(4, int_range(1, 8)),
    "hhead": Param(0, int_range(0, 8)),  # step 13: the head drawn whole (H: their average)
    "layer": Param(1, int_range(1, 6)),
    "head": Param(3, int_range(1, 12)),
    "order": Param("dog bites man", bounded_text(120)),  # step 8: a sentence, and its words backwards
    "opos": Param(False, boolean, encode_bool),  # step 8: sinusoidal positions added
    # The comparison of steps 6, 8 and 10, drawn in the browser: each side's τ, hard and mask ("step": the step's own).
    "ctemp": Param(1.0, nearest(temperature_grid())),
    "chard": Param(False, boolean, encode_bool),
    "cmask": Param("step", choice(["step", "none", "causal"])),
    "cb_temp": Param(1.0, nearest(temperature_grid())),
    "cb_hard": Param(False, boolean, encode_bool),
    "cb_mask": Param("step", choice(["step", "none", "causal"])),
}
COMPARE_NAMES = {"temp": "ctemp", "hard": "chard", "mask": "cmask", "b_temp": "cb_temp", "b_hard": "cb_hard",
                 "b_mask": "cb_mask", "query": "query"}  # the browser's names → the lesson's


def explore(page: str, title: str, text: str = "Explore this", state: dict | None = None) -> None:
    """A link to the full page for this idea; it keeps the session (and presenter mode), and opens the page in the
    step's `state` (that page's URL names)."""
    page_link(page, f"{text} in {title}", query_params=state)


def sentence_input(where) -> str:
    return where.text_input("Sentence", key="text", max_chars=SENTENCE_CHARS)


def embedded_sentence(sentence: str, where):
    """The sentence's tokens and GloVe rows, or None after saying why there are none."""
    tokens = tokenize(sentence)
    if not tokens or len(tokens) > MAX_TOKENS:
        where.info(f"Type a sentence of 1 to {MAX_TOKENS} words.")
        return None
    embedded = embed(tokens, glove())
    if all(embedded.oov):
        where.info("None of these words are in GloVe. Try ordinary English words.")
        return None
    return embedded


def record_bars(figure, numbers: np.ndarray, query: str, keys: list[str], values: list[str], *, key: str, title: str,
                highlight: int | None, axis: str = "weight") -> None:
    """One number per record (N,) as bars labelled "key → value" (`axis`: what the numbers are), with its downloads."""
    labels = [f"{k} → {v}" for k, v in zip(keys, values)]
    chart(figure, figures.weight_bars(numbers, labels, highlight=highlight, title=title, axis=axis), key=key,
          matrix=Matrix(numbers[None], [query], labels, corner="query \\ record"))


def surnames(without: str | None = None):
    """(keys, values, value matrix) of the surname records, leaving out the record whose key is `without`."""
    kept = [(k, v) for k, v in RECORDS if k != without]
    keys, values = [k for k, _ in kept], [v for _, v in kept]
    return keys, values, value_matrix(values, "text")[0]


# ---------------------------------------------------------------- the steps: (text column, figure column)


def exact_lookup(text, figure):
    text.write("A database stores records (key, value). A query returns the value whose key **equals** it: "
               "\"Li\" returns \"Mu\". Anything else returns nothing.")
    text.latex(r"\text{lookup}(q) = v_i \text{ where } k_i = q")
    query = text.text_input("Query", key="q", max_chars=40)
    keys, values, _ = surnames()
    found = exact_matches(query, keys, numeric=False)
    if found:
        text.success(f"{md_escape(query)} → {md_escape(values[found[0]])}")
    else:
        text.warning("No record: no key equals the query.")
    match = np.array([1.0 if i in found else 0.0 for i in range(len(keys))])  # (N,)
    record_bars(figure, match, query, keys, values, key="lesson_exact", title="Does the key equal the query? (1 = yes)",
                highlight=found[0] if found else None)
    with text:
        explore("kv_database", "Key–value database")


def hard_retrieval(text, figure):
    text.write("Now remove the record Li → Mu. The exact lookup has no answer. **Hard** retrieval still answers: it "
               "returns the value of the most **similar** key. Keys and the query become vectors of their letter pairs "
               "and triples; \"Li\" is most like \"Lipton\".")
    text.latex(r"v_{i^*},\quad i^* = \arg\max_i \cos(q, k_i)")
    query = text.text_input("Query", key="q", max_chars=40)
    keys, values, matrix = surnames(without="Li")
    result = retrieve([query], keys, matrix, encoder="ngram", similarity="cosine", temperature=1.0)
    best = int(result.hard_weights[0].argmax())
    exact = md_escape(values[result.exact[0]]) if result.exact else "no answer"
    text.success(f"Exact: {exact}. Hard: {md_escape(keys[best])} → {md_escape(values[best])}")
    record_bars(figure, result.scores[0], query, keys, values, key="lesson_hard", title="Similarity a(q, k) of each key",
                highlight=best, axis="similarity cos(q, k)")
    with text:
        explore("kv_database", "Key–value database", state={"q": query, "drop": "Li"})


def soft_retrieval(text, figure):
    text.write("**Soft** retrieval lets every record answer a little: a weighted mix of all values, the weights a "
               "softmax of the similarities. Small τ: the best key takes it all (hard). Large τ: every record equally "
               "(the plain average).")
    text.latex(r"\sum_i \alpha_i v_i,\quad \alpha = \mathrm{softmax}\big(a(q, k) / \tau\big)")
    tau = text.select_slider("Temperature τ (log scale)", temperature_grid(), key="tau")
    keys, values, matrix = surnames(without="Li")
    result = retrieve([st.session_state.q], keys, matrix, encoder="ngram", similarity="cosine", temperature=tau)
    weights = result.soft_weights[0]  # (N,)
    spread = float(entropy(torch.from_numpy(weights)))
    text.latex(r"H(\alpha) = %.3f \le \ln %d = %.3f" % (spread, len(keys), np.log(len(keys))))
    text.caption("Entropy in nats: 0 for hard retrieval, ln N for the plain average.")
    record_bars(figure, weights, st.session_state.q, keys, values, key="lesson_soft", title=f"Soft weights α at τ = {tau:g}",
                highlight=int(weights.argmax()))
    with text:
        explore("kv_database", "Key–value database", state={"q": st.session_state.q, "drop": "Li", "tau": tau})


def kernel_regression(text, figure):
    text.write("The same idea predicts numbers. Keys: the GPAs of 40 graduates; values: their starting salaries. The "
               "query GPA 3.5 gives the most weight to GPAs near 3.5, so its prediction is a local average. No training: "
               "σ alone decides how local.")
    text.latex(r"\hat f(q) = \sum_j \alpha(q, x_j)\, y_j")
    text.latex(r"\alpha(q, x_j) = \mathrm{softmax}_j\Big(-\frac{(q - x_j)^2}{2\sigma^2}\Big)")
    sigma = text.select_slider("Bandwidth σ", SIGMAS, key="sigma")
    x, y = salary_data(40, 3000, "saturating", 0)
    grid = np.linspace(2.0, 4.0, 201)  # (G,)
    fitted, _ = nadaraya_watson(grid, x, y, "gaussian", sigma)
    prediction, weights = nadaraya_watson(np.array([3.5]), x, y, "gaussian", sigma)
    text.latex(r"\hat f(3.5) = %s" % f"{prediction[0]:,.0f}".replace(",", "{,}"))
    chart(figure, figures.pooling_regression(x, y, grid, fitted, TRUE_FUNCTIONS["saturating"](grid), 3.5, prediction[0], weights[0]),
          key="lesson_pooling", matrix=Matrix(weights, ["3.5"], [f"{v:.3f}" for v in x], corner="query GPA \\ training GPA"))
    with text:
        explore("pooling", "Attention pooling")


LESSON_SCORERS = ("dot", "scaled_dot", "additive", "gaussian")


def similarity_functions(text, figure):
    text.write("How do we compare a query with a key? Four common answers, on the same 5 queries and 7 keys (random "
               "vectors of size 8). Each panel is softmax of its scores: rows are queries, each sums to 1.")
    for name in LESSON_SCORERS:
        text.markdown(f"**{name.replace('_', ' ')}**")  # the name above its formula: side by side they outgrow the column
        text.latex(r"\small " + FORMULAS[name])
    seed = text.number_input("Seed (new random queries and keys)", 0, 2**31 - 1, key="seed")
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(5, 8, generator=generator)  # (5, 8)
    key = torch.randn(7, 8, generator=generator)  # (7, 8)
    rows, cols = [f"q{i}" for i in range(5)], [f"k{j}" for j in range(7)]
    results = [attend(query, key, torch.eye(7), scoring=make_scorer(name, 8, 8, seed=seed)) for name in LESSON_SCORERS]
    panels = [(name.replace("_", " "), r.weights.numpy(), r.scores.numpy()) for name, r in zip(LESSON_SCORERS, results)]  # (5, 7) each
    chart(figure, figures.panel_grid(panels, rows, cols, scale="absolute", width=FIGURE_COLUMN, cols=2, panel_px=200),
          key="lesson_scores", matrix=Matrix(np.concatenate([p[1] for p in panels]),
                                             [f"{name} {r}" for name, *_ in panels for r in rows], cols))
    with text:
        explore("scoring", "Scoring functions")


def why_sqrt_d(text, figure):
    text.write("Why divide by √d? For random q and k with entries of variance 1, q·k adds up d products, so its "
               "variance grows like d (measured below). Large scores push the softmax to one-hot. Right: GloVe's "
               "d = 50 on the sentence, A without the scale, B with it.")
    text.latex(r"\mathrm{Var}(q^\top k) = d")
    text.latex(r"\Rightarrow\ \mathrm{Var}\big(q^\top k/\sqrt d\big) = 1")
    sentence = sentence_input(text)
    variance = variance_samples()  # (len(DIMS),)
    chart(text, figures.variance_against_d(DIMS, variance), key="lesson_variance",
          matrix=Matrix(variance[:, None], [str(d) for d in DIMS], ["variance"], corner="d \\ measured"))
    draw_comparison(sentence, Config(scoring="dot"), Config(scoring="scaled_dot"), figure)
    with text:
        explore("self_attention", "Self-attention", "Compare more settings")


@st.cache_data(show_spinner=False)
def variance_samples() -> np.ndarray:
    """Var(q·k) measured for each d of DIMS, 2,000 samples each: the same on every rerun, so computed once."""
    return dot_variance(DIMS, 2000, 0)


def draw_comparison(sentence: str, a: Config, b: Config, where, b_sentence: str | None = None) -> None:
    """Compare mode for one sentence under two settings (or, with `b_sentence`, B's own sentence), in `where`, drawn in
    the browser from each side's raw scores: τ, hard and the mask of each side (a's and b's masks to start with)
    redraw at once; the link and the downloads follow once the person pauses."""
    state = st.session_state
    configs = []
    for config, temp, hard, mask in ((a, "ctemp", "chard", "cmask"), (b, "cb_temp", "cb_hard", "cb_mask")):
        configs.append(replace(config, temperature=state[temp], hard=state[hard],
                               mask=config.mask if state[mask] == "step" else state[mask]))
    raw = [Request("glove", text, False, "zero", replace(config, mask="none"), MAX_TOKENS)
           for text, config in ((sentence, a), (b_sentence or sentence, b))]
    views = [{"temp": c.temperature, "hard": c.hard, "mask": c.mask, "hide": [], "scale": "max", "palette": "viridis",
              "query": state.query} for c in configs]
    with where:
        sides = live_compare(glove(), *raw, views, key="lesson_compare", clean=clean_comparison, compact=True,
                             taus=temperature_grid(), **screen_sizes())
        if sides:
            compare_downloads(glove(), *(replace(r, config=c) for r, c in zip(raw, configs)), "viridis", "max",
                              key="lesson_compare")


def clean_comparison(sent: dict) -> dict:
    """The comparison's view as the browser sent it, under the lesson's names, checked as a link's values are."""
    return coerce({COMPARE_NAMES[name]: value for name, value in sent.items() if name in COMPARE_NAMES}, SCHEMA)


def self_attention(text, figure):
    text.write("Self-attention: every word of a sentence is a query, and every word is a key and a value. Take "
               "\"happy\" as the query: which words does it look at? Then let every word take its turn: one row each, "
               "the whole matrix. Click a row to make it the query.")
    text.latex(r"\alpha = \mathrm{softmax}\Big(\frac{XX^\top}{\sqrt{d}}\Big),\ d = 50")
    text.latex(r"O = \alpha X")
    embedded = embedded_sentence(sentence_input(text), figure)
    if embedded is None:
        return
    query = position_select(text, "Query word", embedded.tokens, "query")
    view = run(embedded.vectors, Config())
    weights = view.weights[0]  # (n, n)
    chart(text, figures.weight_bars(weights[query], embedded.tokens, oov=embedded.oov, title=f"What {embedded.tokens[query]!r} looks at"),
          key="lesson_row", matrix=Matrix(weights[query][None].copy(), [embedded.tokens[query]], embedded.tokens))

    def pick() -> None:
        row = clicked("lesson_matrix")
        if row is not None:
            st.session_state.query = row

    chart(figure, figures.attention_heatmap(weights, embedded.tokens, row_oov=embedded.oov, clickable=True,
                                            title=f"Every word as the query: {len(embedded.tokens)} × {len(embedded.tokens)}",
                                            width=FIGURE_COLUMN),
          key="lesson_matrix", on_select=pick, selection_mode="points", matrix=Matrix(weights, embedded.tokens, embedded.tokens))
    with text:
        explore("self_attention", "Self-attention")


def order_matters(text, figure):
    text.write("Self-attention has no idea where a word stands. Say the same words in another order: each word still "
               "compares its vector with every other word's, so the weights are the same numbers, only moved to the new "
               "rows and columns. Add positions to the vectors and the two orders come apart.")
    text.latex(r"\alpha_B = P\,\alpha_A\,P^\top")
    text.caption("P: the reordering. This holds without positions.")
    sentence = text.text_input("Sentence A (B is its words backwards)", key="order", max_chars=120)
    with_positions = text.toggle("Add sinusoidal positions to X", key="opos")
    if with_positions:
        text.latex(r"X + P,\ P_{p,2i} = \sin\frac{p}{10000^{2i/d}},\ P_{p,2i+1} = \cos\frac{p}{10000^{2i/d}}")
    words = tokenize(sentence)
    if not 2 <= len(words) <= MAX_TOKENS:
        figure.info(f"Type a sentence of 2 to {MAX_TOKENS} words.")
        return
    config = Config(positions="sinusoidal" if with_positions else "none")
    draw_comparison(" ".join(words), config, config, figure, b_sentence=" ".join(reversed(words)))
    with text:
        explore("self_attention", "Self-attention", "Reorder your own sentence")


def projections(text, figure):
    text.write("A real layer does not compare the raw vectors. It learns three matrices and three biases, and makes "
               "a query, a key and a value of every word. Here they are random (seeded), d_k wide.")
    embedded = embedded_sentence(sentence_input(text), figure)
    if embedded is None:
        return
    dk = text.slider("d_k", 1, 16, key="dk")
    view = run(embedded.vectors, Config(projection="random", d_k=dk, bias=True))
    n, d = view.x.shape
    text.latex(r"Q = XW_q + b_q,\ K = XW_k + b_k")
    text.latex(r"V = XW_v + b_v")
    text.latex(r"\small (%d \times %d)(%d \times %d) + (1 \times %d) \to %d \times %d" % (n, d, d, dk, dk, n, dk))
    labels = figures.labels(embedded.tokens, embedded.oov)
    matrices = steps(view)[:4]  # X, Q, K, V
    if st.session_state.get(PRESENT):  # Q, K, V in one row, X under them: two rows of 16 words at 16 px overflow 1080 px
        row = figure.columns(3)
        places = {1: (row[0], "third"), 2: (row[1], "third"), 3: (row[2], "third"), 0: (figure, FIGURE_COLUMN)}
    else:  # two by two
        grid = figure.columns(2)
        places = {i: (grid[i % 2], "third") for i in range(4)}
    for i, (where, width) in places.items():
        step, cols = matrices[i], figures.dims(matrices[i].matrix.shape[1])
        chart(where, figures.matrix_heatmap(step.matrix, labels, cols, title=step.title.split(" (")[0], width=width, height=300),
              key=f"lesson_proj_{i}", matrix=Matrix(step.matrix, labels, cols, corner="token \\ dimension"))
    with text:
        explore("self_attention", "Self-attention", "Q, K, V and heads")


def masks(text, figure):
    kind = text.radio("Mask", ["causal", "padding"], key="mask", horizontal=True)
    if kind == "causal":
        text.write("A decoder writes one word at a time, so a word may only look at itself and the words before it. "
                   "The **causal** mask blocks the future: weight exactly 0 above the diagonal (B).")
        text.latex(r"\alpha_{ij} = 0 \text{ for } j > i")
        embedded = embedded_sentence(sentence_input(text), figure)
        if embedded is not None:
            n = len(embedded.tokens)
            allowed = causal_mask(n, n).float().numpy()  # (n, n) 1 = may attend
            text.latex(r"M \in \{0,1\}^{T \times T} = %d \times %d" % (n, n))
            draw_comparison(st.session_state.text, Config(), Config(mask="causal"), figure)
            chart(text, figures.matrix_heatmap(allowed, embedded.tokens, embedded.tokens, width="third", height=440,
                                               title="Mask M: 1 = attend", bounded=True, scale_bar=False),
                  key="lesson_causal", matrix=Matrix(allowed, embedded.tokens, embedded.tokens))
            text.caption("M's yellow cells are 1 (may attend), its dark cells 0 (masked).")
    else:
        text.write("A batch holds sentences of different lengths, padded with zeros to the longest. The **padding** "
                   "mask hides the padding keys, so no word attends to them.")
        lengths = draw_batch_mask(text, figure)
        text.latex(r"\text{mask} \in \{0,1\}^{B \times 1 \times T_q \times T_k} = %d \times 1 \times %d \times %d"
                   % (len(lengths), max(lengths), max(lengths)))
    explore("batches", "Batches", "Padding masks")


def batch():
    """The lesson's batch: padded GloVe rows (B, T, d), valid (B, T), and each sentence's tokens."""
    sentences = [embed(tokenize(line), glove(), oov="drop") for line in BATCH]
    x, valid = pad_batch([s.vectors for s in sentences])  # (B, T, d), (B, T)
    return x, valid, [s.tokens for s in sentences]


def draw_batch_mask(text, figure) -> list[int]:
    x, valid, tokens = batch()
    B, T, _ = x.shape
    names, places = [f"sentence {b}" for b in range(B)], [str(t) for t in range(T)]
    chart(text, figures.matrix_heatmap(valid.float().numpy(), names, places, title="Padding mask (1 = real)", bounded=True, height=260),
          key="lesson_padding", matrix=Matrix(valid.float().numpy(), names, places, corner="sentence \\ position"))
    result = attend(x, x, x, mask=padding_mask(valid, valid)[:, 0])  # weights (B, T, T)
    padded = tokens[1] + ["⟨pad⟩"] * (T - len(tokens[1]))
    weights = result.weights[1].numpy()  # (T, T)
    chart(figure, figures.attention_heatmap(weights, padded, title=f"Sentence 1, padded to {T}: padding columns get 0", scale="max",
                                            width=FIGURE_COLUMN),
          key="lesson_padded", matrix=Matrix(weights, padded, padded))
    return [len(t) for t in tokens]


def encoder_decoder_step(text, figure):
    text.write("A translator has two parts. The **encoder** reads the source sentence, every word seeing every word. "
               "The **decoder** reads the target so far under the causal mask, then looks at the encoder's output through "
               "**cross-attention**: its queries are target words, its keys and values source words.")
    scoring = text.radio("Scoring", ["dot", "scaled_dot", "cosine"], key="scoring", horizontal=True)
    source, target = embed(tokenize(SOURCE), glove()), embed(tokenize(TARGET), glove())
    x_in, valid_in = pad_batch([source.vectors])
    x_out, valid_out = pad_batch([target.vectors])
    views = encoder_decoder(x_in, valid_in, x_out, valid_out, scoring=scoring)
    t_in, t_out = len(source.tokens), len(target.tokens)
    text.latex(r"\text{mask } (B, 1, T_q, T_k):\ \text{encoder } (1, 1, %d, %d),\ \text{decoder } (1, 1, %d, %d),\ "
               r"\text{cross } (1, 1, %d, %d)" % (t_in, t_in, t_out, t_out, t_out, t_in))
    panels = figure.columns(3)
    for column, (name, weights, rows, cols) in zip(panels, (
            ("encoder", views.encoder, source.tokens, source.tokens), ("decoder (causal)", views.decoder, target.tokens, target.tokens),
            ("cross", views.cross, target.tokens, source.tokens))):
        w = weights[0, 0].numpy()  # (T_q, T_k)
        chart(column, figures.attention_heatmap(w, rows, cols, title=name, width="third"), key=f"lesson_{name.split()[0]}",
              matrix=Matrix(w, rows, cols))
    with text:
        explore("encoder_decoder", "Encoder–decoder")


def batches_step(text, figure):
    x, valid, tokens = batch()
    B, T, d = x.shape
    text.write(f"A GPU computes a whole batch at once. The batch's {B} sentences are padded to T = {T} words of d = {d} "
               "numbers, and one batch matrix multiplication computes every sentence's QKᵀ together.")
    text.latex(r"\mathrm{BMM}:\ (n, a, b)\cdot(n, b, c) \to (n, a, c)")
    text.latex(r"\small Q\,K^\top:\ (%d, %d, %d)\cdot(%d, %d, %d) \to (%d, %d, %d)" % (B, T, d, B, d, T, B, T, T))
    item = text.select_slider("Batch item", list(range(B)), key="item")
    keys_t = x.transpose(1, 2)  # (B, d, T)
    product = bmm_items(x, keys_t)[item].numpy()  # (T, T)
    padded = tokens[item] + ["⟨pad⟩"] * (T - len(tokens[item]))
    gap = float((torch.bmm(x, keys_t)[item] - torch.from_numpy(product)).abs().max())
    text.caption(f"torch.bmm on the whole batch gives the same numbers for item {item}: largest difference {gap:.1e}.")
    chart(figure, figures.matrix_heatmap(product, padded, padded, title=f"Item {item}: Q{item} K{item}ᵀ", width=FIGURE_COLUMN),
          key="lesson_bmm", matrix=Matrix(product, padded, padded, corner="token \\ token"))
    with text:
        explore("batches", "Batches")


def heads_step(text, figure):
    text.write("One head gives one way of looking. Several heads, each with its own W_q, W_k, W_v of size d_k = 16, "
               "look in several ways at once; their outputs are joined and mixed by W_o. The last panel averages them.")
    text.latex(r"\mathrm{head}_h = \mathrm{softmax}\Big(\frac{Q_h K_h^\top}{\sqrt{d_k}}\Big) V_h")
    text.latex(r"O = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W_o")
    embedded = embedded_sentence(sentence_input(text), figure)
    if embedded is None:
        return
    heads = text.slider("Heads H", 1, 8, key="heads")
    view = run(embedded.vectors, Config(projection="random", heads=heads, d_k=16))
    # Every head small (the patterns side by side), and the one chosen drawn with every word's label.
    chart(figure, figures.head_grid(view.weights, embedded.tokens, oov=embedded.oov, width=FIGURE_COLUMN, cols=5,
                                    labelled=False, panel_px=130), key="lesson_heads")
    st.session_state.hhead = min(st.session_state.hhead, heads)
    names = [f"head {h}" for h in range(heads)] + ["average"]
    chosen = text.radio("Head to read", range(heads + 1), format_func=names.__getitem__, key="hhead", horizontal=True)
    weights = view.mean_weights if chosen == heads else view.weights[chosen]  # (n, n)
    title = "Average over heads" if chosen == heads else f"Head {chosen}"
    chart(figure, figures.attention_heatmap(weights, embedded.tokens, row_oov=embedded.oov, col_oov=embedded.oov,
                                            title=title, width=FIGURE_COLUMN, height=520),
          key="lesson_head", matrix=Matrix(weights, embedded.tokens, embedded.tokens))
    with text:
        explore("heads", "Heads and layers")


def trained_step(text, figure):
    text.write("Everything so far used random or no projections. A trained transformer learned its W_q, W_k, W_v. "
               "Here is all-MiniLM-L6-v2 (6 layers × 12 heads) on the same sentence, run by attnviz's own engine. "
               "Layer 1, head 3 looks almost only at the previous piece.")
    text.latex(r"\alpha = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{32}}\Big)")
    text.latex(r"Q = XW_q + b_q,\ K = XW_k + b_k")
    sentence = sentence_input(text)
    try:
        result = model_run("minilm", sentence)
    except (models.TextError, models.ModelError) as error:
        text.info(str(error))
        return
    left, right = text.columns(2)
    layer = left.selectbox("Layer", list(range(1, 7)), key="layer")
    head = right.selectbox("Head", list(range(1, 13)), key="head")
    labels = result.pieces.labels()
    weights = result.weights[layer - 1, head - 1]  # (n, n)
    chart(figure, figures.attention_heatmap(weights, labels, row_oov=result.pieces.unknown, title=f"Layer {layer}, head {head}",
                                            width=FIGURE_COLUMN),
          key="lesson_trained", matrix=Matrix(weights.copy(), labels, labels))
    with text:
        explore("trained", "Trained model", "All 72 heads")


def decoder_step(text, figure):
    text.write("The encoder above reads the whole sentence at once. A **decoder** (here SmolLM2-135M, 30 layers of 9 "
               "heads) reads left to right: the causal mask of step 10, for real, so every head's upper triangle is "
               "empty. From the last piece's hidden state it predicts the next piece: the final norm, then the "
               "output matrix, then a softmax.")
    text.latex(r"\begin{gathered} z = \mathrm{RMSNorm}(h_n^{(30)})\, E^\top \\ p(x_{n+1} \mid x_{\le n}) = \mathrm{softmax}(z) \end{gathered}")
    prompt = DOG.split(" happy")[0]  # "When he saw his owner, the dog was"
    text.write(f"“{prompt} …”: which word comes next?")
    try:
        result = model_run("smollm2", prompt)
    except models.ModelError as error:
        text.info(str(error))
        return
    probs = next_distribution(torch.from_numpy(result.next_logits)).numpy()  # (vocab,) softmax at T = 1
    top, names = top_pieces(loaded_model("smollm2"), probs, 8)
    chart(figure, figures.weight_bars(probs[top], names, title="The next piece: the 8 most likely", axis="probability"),
          key="lesson_decoder", matrix=Matrix(probs[top][None].copy(), ["next"], names, corner="after the text \\ piece"))
    labels = result.pieces.labels()
    weights = result.weights[0].mean(0)  # (n, n) layer 1, the average of its heads
    chart(figure, figures.attention_heatmap(weights, labels, title="Layer 1, the average of its 9 heads: causal",
                                            width=FIGURE_COLUMN, height=420, allowed=np.tril(np.ones(weights.shape, bool))),
          key="lesson_decoder_heads", matrix=Matrix(weights, labels, labels))
    with text:
        explore("decoder", "Decoder", "All 270 heads")


WIDE = {encoder_decoder_step}  # steps whose figures take the page's width, under the text
NARROW_TEXT = {masks}  # steps whose two figures side by side need a wider figure column
STEPS = [
    ("A database answers a query exactly", exact_lookup),
    ("No exact match: hard retrieval", hard_retrieval),
    ("Soft retrieval: every record answers a little", soft_retrieval),
    ("GPA → salary: attention pooling", kernel_regression),
    ("Similarity functions", similarity_functions),
    ("Why divide by √d", why_sqrt_d),
    ("Self-attention", self_attention),
    ("Order matters", order_matters),
    ("Weights and biases: Q, K, V", projections),
    ("Masks: causal and padding", masks),
    ("Encoder, decoder and cross-attention", encoder_decoder_step),
    ("Batches: batch matrix multiplication", batches_step),
    ("Several heads", heads_step),
    ("A trained model's real heads", trained_step),
    ("A decoder predicts the next word", decoder_step),
]


def move(by: int) -> None:
    st.session_state.step = min(max(st.session_state.step + by, 1), len(STEPS))
    new_step()


def new_step() -> None:
    """Each step's comparison opens with the step's own settings."""
    for name in set(COMPARE_NAMES.values()) - {"query"}:
        st.session_state[name] = SCHEMA[name].default


load_url_state(SCHEMA)
back, picker, forward_button = st.columns([1, 4, 1], vertical_alignment="bottom")
back.button("Previous", icon=":material/arrow_back:", on_click=move, args=(-1,), disabled=st.session_state.step == 1,
            key="previous", width="stretch")
picker.selectbox("Lesson step", list(range(1, len(STEPS) + 1)), key="step",
                 format_func=lambda i: f"{i} of {len(STEPS)} · {STEPS[i - 1][0]}", on_change=new_step)
forward_button.button("Next", icon=":material/arrow_forward:", on_click=move, args=(1,),
                      disabled=st.session_state.step == len(STEPS), key="next", width="stretch")
number = st.session_state.step
title, draw = STEPS[number - 1]
st.header(f"{number}. {title}")
if draw in WIDE:
    text_column, figure_column = st.container(), st.container()
else:
    text_column, figure_column = st.columns([1, 2] if draw in NARROW_TEXT else [2, 3], gap="large")
draw(text_column, figure_column)
save_url_state(SCHEMA)
