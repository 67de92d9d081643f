"""The self-attention explorer's heavier parts: the cached computation, the long-input zoom window and the
step-by-step walk. pages/self_attention.py reads the controls and lays these out."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import streamlit as st
import torch

from attnviz import figures
from attnviz.cache import ByteBudgetCache
from attnviz.embeddings import tokenize
from attnviz.functional import Parts
from attnviz.positions import cosine_similarity, permutation, rotary_angles, rotary_similarity, sinusoidal
from attnviz.sentence import (
    FULL_LIMIT, Config, Explored, Step, View, explore, overflow_message, problem, steps,
)
from attnviz.urlstate import Param
from appkit import beacon
from appkit.common import VISIT, clamp, held, md_escape, position_select, save_url_state, widget_key
from attnviz.export import Matrix, matrices_zip
from appkit.interactive import interactive_heatmap, weights_on_screen
from appkit.present import chart, downloads

INTERACTIVE_LIMIT = 512  # up to this many tokens one head is drawn whole by the browser (appkit/interactive)
STEPS_LIMIT = 64  # the step-by-step walk draws n×n matrices up to this size
ALL_STEPS = "All steps"
WALK = "walk"  # the walk's open tab: its URL parameter and session-state name
ZOOM_SIZES = [8, 16, 32, 64, 128]  # the long-input zoom window's sizes
ZOOM_FLOATS = 2**19  # the most scores a zoom window sends the browser (2 MiB of float32): 128 rows × 4,096 keys
# Computed views of every session share this many bytes; one of 4,096 tokens with eight heads of 128 is ~130 MB.
VIEW_CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Request:
    """Everything a computed view depends on: the cache key, and what a download recomputes from."""

    vectors_id: str
    sentence: str
    drop_punctuation: bool
    oov: str
    config: Config
    max_tokens: int


@st.cache_resource
def _views() -> ByteBudgetCache:
    return ByteBudgetCache(VIEW_CACHE_BYTES, lambda computed: computed.nbytes)


def compute(kv, request: Request) -> Explored:
    """The view for `request`, from the shared byte-bounded cache or computed now."""
    return _views().get(request, lambda: _compute(kv, request))


def browser_sentence(kv, raw: Request, data_of: Callable[[Explored, str], dict | None]) -> Callable[[str], dict | None]:
    """text → the page's data for that sentence under `raw`'s settings, `data_of(computed, text)` (None where the page
    draws more from it than its heatmap), or None: the page runs for it. appkit/beacon calls it off the script thread
    and keeps it until the token is evicted, so the vectors are held weakly: a session's uploaded file (or GloVe's
    matrix mapped during the warm-up) goes once nothing else holds it, and then the page runs."""
    views, vectors = _views(), weakref.ref(kv)  # the shared cache taken now, on the script thread

    def data_for(text: str) -> dict | None:
        if len(tokenize(text, drop_punctuation=raw.drop_punctuation)) not in range(1, STEPS_LIMIT + 1):
            return None  # no words, or more than the walk draws: the page runs, and a long text's scores are not made
        held, request = vectors(), replace(raw, sentence=text)
        return None if held is None else data_of(views.get(request, lambda: _compute(held, request)), text)

    return data_for


def whole_page_if_stale() -> None:
    """A nested fragment rerun alone draws from its arguments of the page's last run. Where the heatmap has posted a
    view or a new sentence since (appkit/beacon), those are out of date: the page runs instead, and takes them."""
    if beacon.waiting():
        st.rerun()


def _compute(kv, r: Request) -> Explored:
    return explore(r.sentence, kv, r.config, oov=r.oov, drop_punctuation=r.drop_punctuation, max_tokens=r.max_tokens)


def describe(config: Config) -> str:
    """A side's settings in a few words, for its title."""
    parts = [config.scoring] + ([f"τ = {config.temperature:g}"] if config.temperature != 1 else []) + (["hard"] if config.hard else [])
    parts += [config.mask] if config.mask != "none" else []
    parts += [f"random W, {config.heads} head(s)"] if config.projection == "random" else []
    return ", ".join(parts)


def live_compare(kv, a: Request, b: Request, views: tuple[dict, dict], *, key: str, clean: Callable[[dict], dict],
                 compact: bool = False, **options) -> list[Explored] | None:
    """A and B side by side, drawn in the browser from each side's raw scores (requests at τ = 1, no mask), each with
    its own view (τ, hard, mask) on one colour scale, and B − A below where their tokens match (appkit/interactive).
    With several heads a side draws its head average. `compact`: the lesson's smaller toolbars (figures.interactive_comparison).
    `options` go to figures.interactive_heatmap. Returns the two
    sides' computations, or None after saying why they cannot be drawn."""
    sides = [compute(kv, request) for request in (a, b)]
    for name, request, computed in zip("AB", (a, b), sides):
        why = problem(computed, min(request.max_tokens, FULL_LIMIT))
        if why:
            (st.error if why[1] else st.info)(f"{name}: {why[0]}")
            return None
    data = []
    for name, request, computed, view in zip("AB", (a, b), sides, views):
        tokens, scores = computed.embedded.tokens, computed.view.scores  # (H, n, n)
        view = {**view, "query": min(view["query"], len(tokens) - 1)}
        data.append(figures.interactive_heatmap(
            scores[0] if scores.shape[0] == 1 else scores, tokens, row_oov=computed.embedded.oov, view=view,
            title=f"{name}: {describe(request.config)}", file=f"attnviz_{key}_{name.lower()}", **options,
            overflow=overflow_message(computed, "The scores divided by τ")))
    same = sides[0].embedded.tokens == sides[1].embedded.tokens
    interactive_heatmap(figures.interactive_comparison(*data, same_tokens=same, compact=compact), key=key, clean=clean)
    order = None if same else permutation(sides[0].embedded.tokens, sides[1].embedded.tokens)
    if order is not None:
        word_order(sides, views, order)
    elif not same:
        st.info("A and B have different tokens, so there is no cell-by-cell difference to draw.")
    return sides


def word_order(sides: list[Explored], views: tuple[dict, dict], order: list[int]) -> None:
    """B's words are A's in another order (B's word k is A's word π(k)): whether B's weights, as drawn, are A's with
    rows and columns reordered the same way, α_B = P α_A Pᵀ, measured. Without positions they are: self-attention
    cannot tell the orders apart."""
    a, b = (weights_on_screen(side.view.scores, view) for side, view in zip(sides, views))  # (n, n) each, as drawn
    gap = float(np.abs(b - a[np.ix_(order, order)]).max())
    positions = [side.view.config.positions for side in sides]
    said = (f"B's words are A's in another order: B's word k is A's word π(k), π = {order}. "
            f"max |α_B − P α_A Pᵀ| = {gap:.2g}")
    if gap <= 1e-6:
        st.success(said + ": equal. Without position information, self-attention cannot tell the two orders apart: "
                   "reorder the words and its weights reorder with them.")
    elif positions != ["none", "none"]:
        st.info(said + f": not equal. Positions ({positions[0]} on A, {positions[1]} on B) tell the orders apart.")
    else:
        st.info(said + ": not equal, because A's and B's settings differ.")


def compare_downloads(kv, a: Request, b: Request, palette: str, scale: str, *, key: str = "compare") -> list[Explored] | None:
    """Download menus of A, B and B − A, side by side, computed by the engine for `a` and `b` as the browser shows
    them (their τ, hard and mask in the requests' configs), on one colour scale. Returns the two computations, or
    None (and draws nothing) where a side has no weights (its S/τ left float32: the heatmap says so)."""
    shown = [compute(kv, request) for request in (a, b)]
    if any(side.view is None for side in shown):
        return None
    (first, second), columns = shown, st.columns(3)
    shared = figures.colour_scale("max" if scale == "row" else scale, first.view.mean_weights, second.view.mean_weights)
    for column, name, side in zip(columns, "AB", shown):
        tokens, oov, weights = side.embedded.tokens, side.embedded.oov, side.view.mean_weights  # (n, n)
        downloads(column, f"{key}_{name.lower()}", lambda tokens=tokens, oov=oov, weights=weights, name=name: figures.attention_heatmap(
            weights, tokens, row_oov=oov, colours=shared, palette=palette, title=name), Matrix(weights, tokens, tokens),
            label=f"Download {name}", image_help="PNG or SVG: the buttons above each heatmap.")
    if first.embedded.tokens == second.embedded.tokens:
        tokens, oov = first.embedded.tokens, first.embedded.oov
        difference = second.view.mean_weights - first.view.mean_weights  # (n, n)
        downloads(columns[2], f"{key}_difference", lambda: figures.difference_heatmap(
            first.view.mean_weights, second.view.mean_weights, tokens, row_oov=oov), Matrix(difference, tokens, tokens),
            label="Download B − A", image_help="PNG or SVG: the buttons above the heatmap.")
    return shown


def view_parts(view: View, head: int = 0) -> Callable[[int, int], Parts]:
    """parts(i, j): the score of query i and key j of `head` taken apart by the view's own scorer."""
    return lambda i, j: view.scorer.parts(torch.from_numpy(view.query[head][i]), torch.from_numpy(view.key[head][j]))


def inside_a_score(parts_of: Callable[[int, int], Parts], scores: np.ndarray, weights: np.ndarray, allowed: np.ndarray,
                   tokens: list[str], oov: list[bool], query: int, *, tau: float, hard: bool, schema: dict[str, Param],
                   names: tuple[str, str] = ("q", "k")) -> None:
    """The neuron view of one cell, in an expander (session state `parts`) drawn only while open (its chart costs
    ~60 ms of a run): the chosen query's and key's vectors, the scorer's terms over the dimensions (or hidden units)
    and their sum, the score, ÷τ and the weight, each the number the heatmap gives: `scores` (n, n) before τ,
    `weights` (n, n) and `allowed` (n, n) as drawn (at τ, hard, the mask). The key is session state `key` (a click on
    a cell sets it with the query; -1, the default, is the query's strongest key). `names`: what q and k are. Opening
    it, the key picker and the sort rerun it alone (a fragment), and the link follows (`schema`, the page's)."""
    _score_section(parts_of, scores, weights, allowed, figures.labels(tokens, oov), query, tau, hard, names, schema)


@st.fragment
def _score_section(parts_of, scores, weights, allowed, label: list[str], query: int, tau: float, hard: bool,
                   names: tuple[str, str], schema: dict[str, Param]) -> None:
    whole_page_if_stale()
    section = st.expander("Inside a score: the chosen cell's q, k and their terms, dimension by dimension", key="parts",
                          on_change="rerun")
    if section.open:
        with section:
            _score_apart(parts_of, scores, weights, allowed, label, query, tau=tau, hard=hard, names=names)
    save_url_state(schema, note=False)


def _score_apart(parts_of, scores, weights, allowed, label: list[str], query: int, *, tau: float, hard: bool,
                 names: tuple[str, str]) -> None:
    """inside_a_score's content: the key picker, the sort toggle, the formulas with their numbers and the chart."""
    st.caption("Click a cell of the heatmap to take its score apart, or choose the key here.")
    left, right = st.columns([3, 2])
    best = int(np.argmax(weights[query]))  # ties to the first key, as torch.argmax
    chosen = position_select(left, "Key word", label, "key", first=(-1, f"its strongest: {best} · {label[best]}"))
    j = best if chosen < 0 else chosen
    ordered = right.toggle("Sort by contribution", key="nsort", help="The terms in order of size, largest first.")
    parts = parts_of(query, j)
    score = float(scores[query, j])
    q_name, k_name = names
    st.markdown(f"Query #{query} **{md_escape(label[query])}** ({q_name}) and key #{j} **{md_escape(label[j])}** ({k_name}), "
                f"{len(parts.terms)} {parts.unit}s:")
    if parts.then:  # the model shapes the sum s into its score
        st.latex(parts.rule.replace("a =", "s_{%d,%d} =" % (query, j), 1) + r" = %.6g" % parts.total)
        st.latex(parts.then.replace("a =", "a_{%d,%d} =" % (query, j), 1) + r" = %.6g" % parts.score)
    else:
        st.latex(parts.rule.replace("a =", "a_{%d,%d} =" % (query, j), 1) + r" = %.6g" % parts.score)
    if not allowed[query, j]:
        st.latex(r"\text{masked: } \alpha_{%d,%d} = 0" % (query, j))
    elif hard:
        st.latex(r"\alpha_{%d,%d} = [\,%d = \arg\max_{j'} a_{%d j'}\,] = %g" % (query, j, j, query, weights[query, j]))
    else:
        st.latex(r"\frac{a_{%d,%d}}{\tau} = \frac{%.6g}{%g} = %.6g,\quad \alpha_{%d,%d} = \frac{e^{a_{%d,%d}/\tau}}{\sum_{j'} e^{a_{%d j'}/\tau}} = %.6g"
                 % (query, j, score, tau, score / tau, query, j, query, j, query, weights[query, j]))
    rows = [(name, vector.numpy()) for name, vector in parts.rows]  # (m,) each
    chart(st, figures.score_parts(rows, parts.terms.numpy(), parts.unit, sort=ordered, title=f"{'s' if parts.then else 'a'} = Σ terms = {parts.total:.4g}"),
          key="score_parts", matrix=Matrix(np.stack([v for _, v in rows] + [parts.terms.numpy()]), [name for name, _ in rows] + ["term"],
                                 [str(u) for u in range(len(parts.terms))], corner=f"row \\ {parts.unit}"))


def positions_section(config: Config, tokens: list[str], oov: list[bool], d: int) -> None:
    """The position encoding in use (config.positions: sinusoidal or rotary) for these tokens, d wide: its matrix
    (positions × dimensions, or × pairs for rotary) and the position–position similarity it induces."""
    if config.positions == "none":
        return
    n, label = len(tokens), figures.labels(tokens, oov)
    names = [f"{p} · {t}" for p, t in enumerate(label)]
    st.subheader(f"Positions: {config.positions}")
    if config.positions == "rotary" and d < 2:
        st.info("Rotary positions turn pairs of dimensions, and d_k = 1 has none: here they change nothing. Choose a "
                "larger d_k.")
        return
    if config.positions == "sinusoidal":
        table = sinusoidal(n, d).numpy()  # (n, d)
        st.latex(r"P_{p,2i} = \sin\frac{p}{10000^{2i/%d}},\ P_{p,2i+1} = \cos\frac{p}{10000^{2i/%d}},\ P: %d \times %d" % (d, d, n, d))
        similarity, how = cosine_similarity(table), r"\cos(P_m, P_n)"
        title, cols = "P: added to each word's vector", figures.dims(d)
    else:
        table = np.cos(rotary_angles(torch.arange(n), d).numpy())  # (n, d // 2)
        st.latex(r"q_p, k_p \text{ turned pair by pair by } p\,\theta_i,\ \theta_i = 10000^{-2i/%d},\ \cos(p\,\theta_i): %d \times %d" % (d, n, d // 2))
        similarity, how = rotary_similarity(n, d), r"\tfrac{1}{%d}\sum_i \cos((m-n)\,\theta_i)" % (d // 2)
        title, cols = "cos(p·θ_i): how far pair i of row p is turned", [f"pair {i}" for i in range(d // 2)]
    st.latex(r"\mathrm{similarity}(m, n) = " + how + r",\ %d \times %d" % (n, n))
    left, right = st.columns(2)
    chart(left, figures.matrix_heatmap(table, names, cols, title=title, width="half"), key="positions_table",
          matrix=Matrix(table, label, cols, corner="position \\ " + ("dimension" if config.positions == "sinusoidal" else "pair")))
    chart(right, figures.matrix_heatmap(similarity, names, names, title="Position–position similarity", width="half"),
          key="positions_similarity", matrix=Matrix(similarity, label, label, corner="position \\ position"))
    st.caption("Near positions are alike and far ones less so: this is all the model learns of order. Compare A | B "
               "with B's words reordered, or B's positions off, to see what it changes.")


def zoom_sizes(n: int, heads: int) -> list[int]:
    """The window sizes whose rows' scores over every key (heads × size × n) fit ZOOM_FLOATS: at least the smallest."""
    return [size for size in ZOOM_SIZES if heads * size * n <= ZOOM_FLOATS] or ZOOM_SIZES[:1]


def zoom_window(raw: View, tokens: list[str], oov: list[bool], *, clean: Callable[[dict], dict], **options) -> tuple[slice, slice]:
    """The long-input zoom: its size and position, and the window drawn in the browser (appkit/interactive) from its
    rows' scores over every key, so that τ, hard attention, the masks, the colour scale and the query redraw at once
    and each row is normalised over the whole sentence; only the window's rows are sent, never the n×n scores. Its
    axes are numbered by the sentence's own positions, and the chosen query is kept inside the window. `raw` holds
    the scores; `options` go to figures.interactive_heatmap (the view, τ grid, sizes). Returns the window (rows, cols)."""
    n, heads = len(tokens), raw.config.heads
    sizes = zoom_sizes(n, heads)
    if st.session_state.get("zw") not in sizes:
        st.session_state.zw = sizes[-1]
    z_left, z_middle, z_right = st.columns(3)
    size = z_right.select_slider("Window size", sizes, key="zw", disabled=len(sizes) == 1,
                                 help=f"The browser gets the window's rows with every key: with {heads} head(s) at "
                                      f"{n:,} tokens, windows up to {sizes[-1]} rows.")
    r0, c0 = (held(name, (n, size), clamp(0, n - size, 0),  # the window stays inside the matrix
                   lambda **widget: column.number_input(label, 0, n - size, step=size // 2, **widget))
              for name, column, label in (("zr", z_left, "First query row"), ("zc", z_middle, "First key column")))
    rows, cols = slice(r0, r0 + size), slice(c0, c0 + size)
    if not r0 <= st.session_state.get("query", 0) < r0 + size:
        st.session_state.query = r0
    view = {**options.pop("view"), "query": st.session_state.query}
    scores = np.stack([raw.scores_block(h, rows, slice(None)) for h in range(heads)])  # (H, size, n)
    data = figures.interactive_heatmap(
        scores[0] if heads == 1 else scores, tokens[rows], tokens, row_oov=oov[rows], col_oov=oov, view=view,
        row_start=r0, key_window=(c0, size), file="attnviz_zoom", **options,
        title=f"Zoom: queries {r0}–{r0 + size - 1} × keys {c0}–{c0 + size - 1}, full resolution",
    )
    interactive_heatmap(data, key="live_zoom", clean=clean)
    return rows, cols


def step_walk(view: View, tokens: list[str], oov: list[bool], palette: str, schema: dict[str, Param]) -> None:
    """Every matrix from X to αV with its formula and shape, built only while its expander is open."""
    heads = view.config.heads

    def draw() -> None:
        head = held("head", heads, clamp(0, heads - 1, 0),
                    lambda **widget: st.selectbox("Head", list(range(heads)), **widget)) if heads > 1 else 0
        draw_steps(steps(view, head), figures.labels(tokens, oov), palette)

    walk_section("Step by step: every matrix from X to αV, with its formula and shape", len(tokens), "tokens", draw, schema)


def walk_section(label: str, size: int, unit: str, draw: Callable[[], None], schema: dict[str, Param]) -> None:
    """The walk's expander, filled by `draw` while open; above STEPS_LIMIT `size` (`unit`: tokens, pieces) it says
    why it draws nothing."""
    if size > STEPS_LIMIT:
        st.expander(label, key="steps", on_change="rerun").info(
            f"The step-by-step walk draws every n×n matrix, so it is shown up to {STEPS_LIMIT:,} {unit}; this text has {size:,}.")
    else:
        walk_expander(label, draw, schema)


@st.fragment
def walk_expander(label: str, draw: Callable[[], None], schema: dict[str, Param]) -> None:
    """The walk's expander, a fragment of its own (inside the page's): opening it, or one of its tabs, reruns the
    walk only. `draw` fills it while it is open; closed, it costs nothing."""
    whole_page_if_stale()
    walk = st.expander(label, key="steps", on_change="rerun")
    if walk.open:
        with walk:
            draw()
    save_url_state(schema, note=False)


def draw_steps(walk: list[Step], token_labels: list[str], palette: str, *, key: str = "steps") -> None:
    """One tab per step (its title, formula and matrix, rows and columns labelled by token or dimension) and a last
    tab with every step. Only the open tab runs, so the walk opens with one chart drawn, not ten (1.2 s for all ten).
    One Download menu gives every matrix of the walk at once (a menu under each of its charts slowed it by 0.5 s)."""
    matrices = []
    for step in walk:
        rows = token_labels if step.rows == "tokens" else figures.dims(step.matrix.shape[0])
        cols = token_labels if step.cols == "tokens" else figures.dims(step.matrix.shape[1])
        corner = " \\ ".join("token" if side == "tokens" else "dimension" for side in (step.rows, step.cols))
        matrices.append((step.title, Matrix(step.matrix, rows, cols, corner)))
    tabs = step_tabs([step.symbol for step in walk])
    for i, tab in enumerate(tabs[:-1]):
        if tab.open:
            with tab:
                draw_step(i, walk[i], matrices[i][1], palette)
    if tabs[-1].open:
        with tabs[-1]:
            for i, step in enumerate(walk):
                draw_step(i, step, matrices[i][1], palette)
    menu = st.popover("Download every matrix of the walk", icon=":material/download:", key=f"downloads_{key}")
    menu.download_button("All as CSV (.zip)", lambda: matrices_zip(matrices, "csv"), f"attnviz_{key}_csv.zip",
                         "application/zip", on_click="ignore", key=f"csv_{key}", width="stretch")
    menu.download_button("All as float32 .npy (.zip)", lambda: matrices_zip(matrices, "npy"), f"attnviz_{key}_npy.zip",
                         "application/zip", on_click="ignore", key=f"npy_{key}", width="stretch")
    menu.caption("One file per step, numbered in the walk's order. Each chart's camera button saves it as PNG or SVG.")


def draw_step(i: int, step: Step, matrix: Matrix, palette: str) -> None:
    st.markdown(f"**{i + 1}. {step.title}**")
    st.latex(step.latex)
    chart(st, figures.matrix_heatmap(step.matrix, matrix.rows, matrix.cols, title=step.title, bounded=step.bounded, palette=palette),
          key=f"step_{i}")


def step_tabs(symbols: list[str]) -> list:
    """The walk's tabs, one per step symbol and a last with every step; lazy (only the open one runs). The open
    tab goes in the URL under WALK as a number (1 the first step, 0 the tab with every step). An edit that changes
    the steps (τ = 1 has no τ step) keeps the same matrix open where it still exists, and draws fresh tabs (keyed
    by their names) so no dead name comes back."""
    names = [f"{i + 1} · {symbol}" for i, symbol in enumerate(symbols)] + [ALL_STEPS]
    stored = st.session_state.get(WALK)
    position = len(symbols) if stored == 0 else stored - 1 if isinstance(stored, int) and 1 <= stored <= len(symbols) else 0
    key = widget_key(WALK, names)
    visit = st.session_state.setdefault(VISIT, {})
    shown = visit.get(WALK)  # (tabs' key, name of the open tab without its number) on this visit's last run
    opened = symbols + [ALL_STEPS]
    if shown and shown[0] != key and shown[1] in opened:
        position = opened.index(shown[1])
    visit[WALK] = (key, opened[position])
    st.session_state[WALK] = _walk_value(position, len(symbols))
    st.session_state[key] = names[position]
    return st.tabs(names, key=key, on_change=_open_tab, args=(key, names))


def _walk_value(position: int, steps: int) -> int:
    """The URL's number for the tab at `position`: the step counted from 1, or 0 for the tab with every step."""
    return position + 1 if position < steps else 0


def _open_tab(key: str, names: list[str]) -> None:
    st.session_state[WALK] = _walk_value(names.index(st.session_state[key]), len(names) - 1)
