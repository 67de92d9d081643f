"""Lesson steps 1–4, retrieval: exact lookup, hard retrieval, soft retrieval, and GPA → salary as attention pooling.
Each step is one function of (text column, figure column)."""

import numpy as np
import streamlit as st
import torch

from attnviz import figures
from attnviz.functional import entropy
from attnviz.export import Matrix
from attnviz.pooling import TRUE_FUNCTIONS, nadaraya_watson, salary_data
from attnviz.retrieval import exact_matches, retrieve, value_matrix
from attnviz.sentence import temperature_grid
from appkit.common import md_escape
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import chart
from appkit.lesson.common import RECORDS, SIGMAS, explore, held


def record_bars(figure, numbers: np.ndarray, query: str, keys: list[str], values: list[str], *, key: str, title: str,
                highlight: int | None, axis: str = "weight") -> None:
    """One number per record (N,) as bars labelled "key → value" (`axis`: what the numbers are), with its downloads."""
    labels = [f"{k} → {v}" for k, v in zip(keys, values)]
    chart(figure, figures.weight_bars(numbers, labels, highlight=highlight, title=title, axis=axis), key=key,
          matrix=Matrix(numbers[None], [query], labels, corner="query \\ record"))


def records(where, keys: list[str], values: list[str]) -> None:
    """The records as a table: what a class reasons from while the figure is held back."""
    where.table({"key": keys, "value": values})


def surnames(without: str | None = None):
    """(keys, values, value matrix) of the surname records, leaving out the record whose key is `without`."""
    kept = [(k, v) for k, v in RECORDS if k != without]
    keys, values = [k for k, _ in kept], [v for _, v in kept]
    return keys, values, value_matrix(values, "text")[0]


def exact_lookup(text, figure):
    text.write("A database stores records (key, value). A query returns the value whose key **equals** it; "
               "anything else returns nothing.")
    text.latex(r"\text{lookup}(q) = v_i \text{ where } k_i = q")
    query = text.text_input("Query", key="q", max_chars=40)
    keys, values, _ = surnames()
    found = exact_matches(query, keys, numeric=False)
    offer(questions.exact_lookup(query, keys, values, found))
    if not held(text, "result"):
        if found:
            text.success(f"{md_escape(query)} → {md_escape(values[found[0]])}")
        else:
            text.warning("No record: no key equals the query.")
    match = np.array([1.0 if i in found else 0.0 for i in range(len(keys))])  # (N,)
    if held(figure):
        records(figure, keys, values)
    else:
        record_bars(figure, match, query, keys, values, key="lesson_exact", title="Does the key equal the query? (1 = yes)",
                    highlight=found[0] if found else None)
    with text:
        explore("kv_database", "Key–value database")


def hard_retrieval(text, figure):
    text.write("Now remove the record Li → Mu. The exact lookup has no answer. **Hard** retrieval still answers: it "
               "returns the value of the most **similar** key. Keys and the query become vectors of their letter pairs "
               "and triples.")
    text.latex(r"v_{i^*},\quad i^* = \arg\max_i \cos(q, k_i)")
    query = text.text_input("Query", key="q", max_chars=40)
    keys, values, matrix = surnames(without="Li")
    result = retrieve([query], keys, matrix, encoder="ngram", similarity="cosine", temperature=1.0)
    best = int(result.hard_weights[0].argmax())
    offer(questions.hard_retrieval(query, keys, values, result.scores[0]))
    exact = md_escape(values[result.exact[0]]) if result.exact else "no answer"
    if not held(text, "result"):
        text.success(f"Exact: {exact}. Hard: {md_escape(keys[best])} → {md_escape(values[best])}")
    if held(figure):
        records(figure, keys, values)
    else:
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
    offer(questions.soft_retrieval(result.scores[0]))
    spread = float(entropy(torch.from_numpy(weights)))
    if not held(text, "result"):
        text.latex(r"H(\alpha) = %.3f \le \ln %d = %.3f" % (spread, len(keys), np.log(len(keys))))
        text.caption("Entropy in nats: 0 for hard retrieval, ln N for the plain average.")
    if not held(figure):
        record_bars(figure, weights, st.session_state.q, keys, values, key="lesson_soft",
                    title=f"Soft weights α at τ = {tau:g}", highlight=int(weights.argmax()))
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
    offer(questions.kernel_regression(x, y))
    grid = np.linspace(2.0, 4.0, 201)  # (G,)
    fitted, _ = nadaraya_watson(grid, x, y, "gaussian", sigma)
    prediction, weights = nadaraya_watson(np.array([3.5]), x, y, "gaussian", sigma)
    if not held(text, "result"):
        text.latex(r"\hat f(3.5) = %s" % f"{prediction[0]:,.0f}".replace(",", "{,}"))
    if not held(figure):
        chart(figure, figures.pooling_regression(x, y, grid, fitted, TRUE_FUNCTIONS["saturating"](grid), 3.5, prediction[0],
                                                 weights[0]),
              key="lesson_pooling", matrix=Matrix(weights, ["3.5"], [f"{v:.3f}" for v in x], corner="query GPA \\ training GPA"))
    with text:
        explore("pooling", "Attention pooling")
