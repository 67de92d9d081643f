"""Lesson steps 5–8, scores: similarity functions, why divide by √d, self-attention, and order (positions).
Each step is one function of (text column, figure column)."""

import numpy as np
import streamlit as st
import torch

from attnviz import figures
from attnviz.functional import FORMULAS, attend, make_scorer
from attnviz.embeddings import embed, tokenize
from attnviz.export import Matrix
from attnviz.pooling import dot_variance
from attnviz.sentence import Config
from appkit.common import clicked, glove, position_select
from appkit.served import shared
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import chart
from appkit.lesson.common import (DIMS, toy_view, FIGURE_COLUMN, MAX_TOKENS, draw_comparison, embedded_sentence, explore, held,
                                  sentence_input)


LESSON_SCORERS = ("dot", "scaled_dot", "additive", "gaussian")


def scorer_panels(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, weights (5, 7), scores (5, 7)) of each of step 5's scoring functions on the seed's random queries and
    keys, once for every session."""
    def compute():
        generator = torch.Generator().manual_seed(seed)
        query = torch.randn(5, 8, generator=generator)  # (5, 8)
        key = torch.randn(7, 8, generator=generator)  # (7, 8)
        results = [attend(query, key, torch.eye(7), scoring=make_scorer(name, 8, 8, seed=seed)) for name in LESSON_SCORERS]
        return [(name.replace("_", " "), r.weights.numpy(), r.scores.numpy()) for name, r in zip(LESSON_SCORERS, results)]

    return shared(("scoring", seed), compute)


def similarity_functions(text, figure):
    text.write("How do we compare a query with a key? Four common answers, on the same 5 queries and 7 keys (random "
               "vectors of size 8). Each panel is softmax of its scores: rows are queries, each sums to 1.")
    for name in LESSON_SCORERS:
        text.markdown(f"**{name.replace('_', ' ')}**")  # the name above its formula: side by side they outgrow the column
        text.latex(r"\small " + FORMULAS[name])
    seed = text.number_input("Seed (new random queries and keys)", 0, 2**31 - 1, key="seed")
    rows, cols = [f"q{i}" for i in range(5)], [f"k{j}" for j in range(7)]
    panels = scorer_panels(seed)
    offer(questions.similarity_functions([p[0] for p in panels], [p[1] for p in panels]))
    if held(figure):
        return
    chart(figure, lambda: figures.panel_grid(panels, rows, cols, scale="absolute", width=FIGURE_COLUMN, cols=2, panel_px=200),
          key="lesson_scores", matrix=Matrix(np.concatenate([p[1] for p in panels]),
                                             [f"{name} {r}" for name, *_ in panels for r in rows], cols),
          same_for=(seed,))
    with text:
        explore("scoring", "Scoring functions")


def why_sqrt_d(text, figure):
    text.write("Why divide by √d? For random q and k with entries of variance 1, q·k adds up d products, so its "
               "variance grows like d (measured below). Large scores push the softmax to one-hot. Right: GloVe's "
               "d = 50 on the sentence, A without the scale, B with it.")
    text.latex(r"\mathrm{Var}(q^\top k) = d")
    text.latex(r"\Rightarrow\ \mathrm{Var}\big(q^\top k/\sqrt d\big) = 1")
    sentence = sentence_input(text)
    words = tokenize(sentence)
    if 1 <= len(words) <= MAX_TOKENS:
        offer(questions.why_sqrt_d(embed(words, glove()).vectors))
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


def self_attention(text, figure):
    text.write("Self-attention: every word of a sentence is a query, and every word is a key and a value. Take "
               "\"happy\" as the query: which words does it look at? Then let every word take its turn: one row each, "
               "the whole matrix. Click a row to make it the query.")
    text.latex(r"\alpha = \mathrm{softmax}\Big(\frac{XX^\top}{\sqrt{d}}\Big),\ d = 50")
    text.latex(r"O = \alpha X")
    sentence = sentence_input(text)
    embedded = embedded_sentence(sentence, figure)
    if embedded is None:
        return
    query = position_select(text, "Query word", embedded.tokens, "query")
    view = toy_view(sentence, Config())
    weights = view.weights[0]  # (n, n)
    offer(questions.self_attention(weights, embedded.tokens, query))
    if held(figure):
        return
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
    forward, backward = (toy_view(" ".join(w), config).weights[0] for w in (words, words[::-1]))  # (n, n) each
    offer(questions.order_matters(forward, backward, with_positions))
    draw_comparison(" ".join(words), config, config, figure, b_sentence=" ".join(reversed(words)))
    with text:
        explore("self_attention", "Self-attention", "Reorder your own sentence")
