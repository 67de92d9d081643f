"""Plotly figure builders: arrays in, go.Figure out. No streamlit here.

Tokens may repeat ("his" twice), so axes are numeric positions with the tokens as tick text, and
user text is HTML-escaped because plotly renders a subset of HTML tags in labels and hovers.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PALETTES = {"viridis": "Viridis", "cividis": "Cividis", "greys": "Greys"}  # all colourblind-safe
DIVERGING = "PuOr"  # for signed matrices; colourblind-safe, centred on 0
OOV_MARK = " ⟨oov⟩"


def labels(tokens: list[str], oov: list[bool] | None = None) -> list[str]:
    """Tokens escaped for plotly, with unknown words marked.

    Only &, < and > are escaped: plotly reads its own small set of HTML entities, and &quot; is not among
    them, so an escaped double quote would show as the literal text "&quot;".
    """
    oov = oov or [False] * len(tokens)
    return [html.escape(t, quote=False) + (OOV_MARK if o else "") for t, o in zip(tokens, oov)]


def positions(ticktext: list[str]) -> list[str]:
    """Unique category names "#i label", so a repeated word keeps its own row and column."""
    return [f"#{i} {t}" for i, t in enumerate(ticktext)]


def _finite(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z)
    if not np.issubdtype(z.dtype, np.floating):
        z = z.astype(float)
    if not np.isfinite(z).all():
        raise ValueError("A matrix with NaN or infinite values cannot be drawn.")
    return z


def _axis(ticktext: list[str], names: list[str] | None = None) -> dict:
    """A category axis over `names` (default positions(ticktext)), showing the plain labels; long axes label every k-th."""
    names = positions(ticktext) if names is None else names
    step = max(1, math.ceil(len(ticktext) / 48))
    return dict(type="category", tickmode="array", tickvals=names[::step], ticktext=ticktext[::step], showgrid=False)


def _weights_trace(weights, scores, row_labels, col_labels, **trace) -> go.Heatmap:
    """Numpy arrays throughout: plotly sends them as compact binary instead of validating nested lists."""
    score_line = "" if scores is None else "<br>score: %{customdata:.3f}"
    return go.Heatmap(
        z=_finite(weights).astype(np.float32), x=positions(col_labels), y=positions(row_labels),
        customdata=None if scores is None else _finite(scores).astype(np.float32),
        hovertemplate="query %{y}<br>key %{x}<br>weight: %{z:.3f}" + score_line + "<extra></extra>",
        **trace,
    )


def attention_heatmap(
    weights: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None, *,
    scores: np.ndarray | None = None, row_oov=None, col_oov=None, title: str = "", palette: str = "viridis",
) -> go.Figure:
    """Weights (Tq, Tk): queries are rows, top to bottom in sentence order; keys are columns.
    Hover gives query, key, weight to 3 decimals and the raw score. The colour bar runs 0 → 1."""
    rows = labels(row_tokens, row_oov)
    cols = labels(col_tokens if col_tokens is not None else row_tokens, col_oov if col_tokens is not None else row_oov)
    trace = _weights_trace(
        weights, scores, rows, cols, zmin=0, zmax=1, colorscale=PALETTES[palette], colorbar=dict(title="weight")
    )
    fig = go.Figure(trace)
    fig.update_layout(
        title=title, xaxis=dict(title="key", side="top", **_axis(cols)),
        yaxis=dict(title="query", autorange="reversed", **_axis(rows)), height=_side(len(rows)),
    )
    return fig


def _side(n: int) -> int:
    return int(min(900, max(360, 140 + 22 * n)))


def head_grid(
    weights: np.ndarray, tokens: list[str], *, scores: np.ndarray | None = None, oov=None, palette: str = "viridis"
) -> go.Figure:
    """Small multiples: one heatmap per head (H, n, n) and the head average, on one 0 → 1 colour bar."""
    heads = weights.shape[0]
    panels = [(f"head {h}", weights[h], None if scores is None else scores[h]) for h in range(heads)]
    panels.append(("average over heads", weights.mean(0), None))
    cols = min(3, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[p[0] for p in panels], horizontal_spacing=0.06, vertical_spacing=0.16)
    text = labels(tokens, oov)
    for i, (_, w, s) in enumerate(panels):
        r, c = divmod(i, cols)
        fig.add_trace(_weights_trace(w, s, text, text, coloraxis="coloraxis"), row=r + 1, col=c + 1)
        fig.update_xaxes(**_axis(text), row=r + 1, col=c + 1)
        fig.update_yaxes(autorange="reversed", **_axis(text), row=r + 1, col=c + 1)
    fig.update_layout(
        coloraxis=dict(cmin=0, cmax=1, colorscale=PALETTES[palette], colorbar=dict(title="weight")),
        height=nrows * min(520, max(300, 100 + 14 * len(tokens))),
    )
    return fig


def matrix_heatmap(
    matrix: np.ndarray, row_labels: list[str], col_labels: list[str], *, title: str = "",
    bounded: bool = False, palette: str = "viridis",
) -> go.Figure:
    """Any labelled matrix; signed values use a diverging scale centred on 0, [0, 1] values the palette."""
    z = _finite(matrix)  # (rows, cols)
    if bounded:
        colour = dict(zmin=0, zmax=1, colorscale=PALETTES[palette])
    else:
        extent = float(np.abs(z).max()) or 1.0
        colour = dict(zmin=-extent, zmax=extent, colorscale=DIVERGING)
    fig = go.Figure(go.Heatmap(
        z=z, x=positions(col_labels), y=positions(row_labels), **colour,
        hovertemplate="row %{y}<br>column %{x}<br>value: %{z:.4f}<extra></extra>",
    ))
    fig.update_layout(
        title=dict(text=f"{title}  ({z.shape[0]}×{z.shape[1]})"), height=_side(len(row_labels)) * 2 // 3,
        xaxis=dict(side="top", **_axis(col_labels)), yaxis=dict(autorange="reversed", **_axis(row_labels)),
        margin=dict(t=70),
    )
    return fig


def weight_bars(
    weights: np.ndarray, tokens: list[str], *, oov=None, title: str = "", highlight: int | None = None, top: int | None = None
) -> go.Figure:
    """One query's weights over the keys, in sentence order; the `highlight` bar (say, the hard pick) stands out.

    With `top`, only the `top` largest weights are drawn (still in sentence order): a long input has
    too many keys for one bar each.
    """
    text = labels(tokens, oov)
    weights = _finite(weights)  # (Tk,)
    keys = np.arange(len(text))  # (Tk,)
    if top is not None and len(text) > top:
        keys = np.sort(np.argsort(-weights, kind="stable")[:top])  # (top,) ties go to the earlier key
    names = positions(text)
    shown = [names[i] for i in keys]
    fig = go.Figure(go.Bar(
        x=shown, y=weights[keys], marker_color=["#d55e00" if i == highlight else "#0072b2" for i in keys],
        hovertemplate="key %{x}<br>weight: %{y:.3f}<extra></extra>",
    ))
    fig.update_layout(title=title, xaxis=_axis([text[i] for i in keys], shown), yaxis=dict(title="weight", range=[0, 1]), height=320)
    return fig


def dims(n: int) -> list[str]:
    """Column labels for the feature dimensions of a matrix."""
    return [f"d{i}" for i in range(n)]


# Okabe–Ito: eight colours that stay distinct under the common colour-vision deficiencies.
HEAD_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")


def line_view(weights: np.ndarray, tokens: list[str], *, query: int | None = None, oov=None, min_weight: float = 0.01) -> go.Figure:
    """bertviz-style lines from each query (left) to each key (right), opacity = weight, one colour per head.

    weights (H, n, n). `query` isolates one token's lines. Lines are grouped by head and by tenths of
    weight, so the figure has at most 10·H line traces however long the sentence.
    """
    heads, n, _ = weights.shape
    if heads > len(HEAD_COLOURS):
        raise ValueError(f"The line view has {len(HEAD_COLOURS)} distinct head colours; got {heads} heads.")
    weights = _finite(weights)
    text = labels(tokens, oov)
    fig = go.Figure()
    rows = range(n) if query is None else [query]
    for h in range(heads):
        for tenth in range(10):
            xs, ys = [], []
            for i in rows:
                for j in range(n):
                    w = weights[h, i, j]
                    if w >= min_weight and min(int(w * 10), 9) == tenth:
                        xs += [0, 1, None]
                        ys += [i, j, None]
            if xs:
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=HEAD_COLOURS[h], width=2),
                                         opacity=(tenth + 0.5) / 10, hoverinfo="skip", showlegend=False, legendgroup=f"h{h}"))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=HEAD_COLOURS[h], width=3), name=f"head {h}", legendgroup=f"h{h}"))
    for side in (0, 1):
        fig.add_trace(go.Scatter(x=[side] * n, y=list(range(n)), mode="text", text=text, showlegend=False,
                                 textposition="middle left" if side == 0 else "middle right",
                                 hovertemplate=("query" if side == 0 else "key") + " #%{y} %{text}<extra></extra>"))
    fig.update_layout(xaxis=dict(visible=False, range=[-0.6, 1.6]), yaxis=dict(visible=False, autorange="reversed"),
                      height=max(300, 24 * n + 80), title="Lines: query (left) → key (right), opacity = weight")
    return fig


def block_overview(weights: np.ndarray, tokens: list[str], *, max_blocks: int = 128, palette: str = "viridis") -> go.Figure:
    """A light overview of a large (n, n) matrix: the maximum weight in each b×b block, b = ⌈n / max_blocks⌉.

    Max rather than mean, so a single strong link stays visible. Hover names the block's token ranges.
    """
    weights = _finite(weights)
    n_rows, n_cols = weights.shape
    b = max(1, math.ceil(max(n_rows, n_cols) / max_blocks))
    rows, cols = math.ceil(n_rows / b), math.ceil(n_cols / b)
    if (n_rows, n_cols) != (rows * b, cols * b):  # pad with 0, which never wins a max of weights ≥ 0
        padded = np.zeros((rows * b, cols * b), dtype=weights.dtype)  # (rows·b, cols·b)
        padded[:n_rows, :n_cols] = weights
        weights = padded
    blocks = weights.reshape(rows, b, cols, b).max(axis=(1, 3))  # (rows, cols)
    text = labels(tokens)

    def span(i: int, n: int) -> str:
        lo, hi = i * b, min(n, (i + 1) * b) - 1
        return f"#{lo}–{hi} {text[lo]} … {text[hi]}" if hi > lo else f"#{lo} {text[lo]}"

    row_names = [span(i, n_rows) for i in range(rows)]
    col_names = [span(j, n_cols) for j in range(cols)]
    fig = go.Figure(go.Heatmap(
        z=blocks.astype(np.float32), x=col_names, y=row_names, zmin=0, zmax=1, colorscale=PALETTES[palette],
        colorbar=dict(title="max weight"),
        hovertemplate="queries %{y}<br>keys %{x}<br>max weight in block: %{z:.3f}<extra></extra>",
    ))
    step = max(1, math.ceil(rows / 16))
    fig.update_layout(
        title=f"Overview: max weight per {b}×{b} block ({n_rows} × {n_cols} tokens)", height=700,
        xaxis=dict(type="category", tickmode="array", tickvals=col_names[::step], ticktext=[c.split(" ")[0] for c in col_names[::step]], side="top"),
        yaxis=dict(type="category", autorange="reversed", tickmode="array", tickvals=row_names[::step], ticktext=[r.split(" ")[0] for r in row_names[::step]]),
    )
    return fig
