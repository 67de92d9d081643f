"""Figures of matrices: attention heatmaps (plotly's, and the browser's data), several heads in a grid, B − A,
a long input's block overview, any labelled matrix."""

from __future__ import annotations

import base64
import hashlib
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.figures.layout import (
    CLICK_LIMIT, CLICK_MARKER, ColourScale, DIVERGING, FONT_PX, OOV_MARK, PALETTES, TICK_CHARS, _axis, _colorbar,
    _finite, _keys_axis, _rows_axis, _scale_stops, _screen, _short, _side, colour_scale, labels, palette_stops, wrap_title,
    positions,
)

def _weights_trace(weights, scores, row_names, col_names, colours: ColourScale, **trace) -> go.Heatmap:
    """z is what the colour scale shows; customdata keeps the true weight (and score) for hover.

    Numpy arrays throughout: plotly sends them as compact binary instead of validating nested lists.
    """
    weights = _finite(weights).astype(np.float32)  # (rows, cols)
    if scores is None:
        custom, score_line = weights[..., None], ""  # (rows, cols, 1)
    else:
        custom, score_line = np.stack([weights, _finite(scores).astype(np.float32)], -1), "<br>score: %{customdata[1]:.4~g}"
    return go.Heatmap(
        z=colours.show(weights), x=col_names, y=row_names, customdata=custom,
        hovertemplate="query %{y}<br>key %{x}<br>weight: %{customdata[0]:.4~g}" + score_line + "<extra></extra>",
        **trace,
    )


MASKED_GREY = "#d9d9d9"  # the browser's heatmap draws masked cells in the same grey
MASKED_MARK, MASKED_INK = "×", "#595959"  # 5.0:1 on the grey: a masked cell is marked, not told by its colour alone
MARKED_SIDE = 24  # above this many rows or keys a mark would not fit its cell: grey and the hover only


def _masked_trace(allowed: np.ndarray, row_names, col_names, **trace) -> go.Heatmap:
    """The masked cells (allowed False) in light grey over the weights, each marked ×, their hover "masked": a masked
    key gets no weight at all, which the palette's colour for 0 would show as a tiny weight. Allowed cells are gaps
    (null, not NaN) that let the weights beneath show and hover."""
    allowed = np.asarray(allowed, bool)  # (rows, cols)
    z = [[None if ok else 1 for ok in row] for row in allowed]  # (rows, cols)
    if max(allowed.shape) <= MARKED_SIDE:
        marks = [["" if ok else MASKED_MARK for ok in row] for row in allowed]  # (rows, cols)
        trace = dict(text=marks, texttemplate="%{text}", textfont=dict(color=MASKED_INK, size=10), **trace)
    return go.Heatmap(z=z, x=col_names, y=row_names, zmin=0, zmax=1, colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]],
                      showscale=False, hoverongaps=False, name="masked",
                      hovertemplate="query %{y}<br>key %{x}<br>masked: weight 0<extra></extra>", **trace)


def _click_layer(weights, scores, row_names, col_names, row_start: int, col_start: int) -> go.Scatter:
    """One invisible point per cell, carrying its (query, key) positions in the sentence: plotly reports
    clicks on scatter points but not on heatmap cells. It also carries the hover, as the nearest point is
    the cell's own."""
    rows, cols = np.indices(weights.shape)  # (rows, cols) each
    custom = [rows.ravel() + row_start, cols.ravel() + col_start, np.asarray(weights, np.float32).ravel()]
    score_line = ""
    if scores is not None:
        custom.append(np.asarray(scores, np.float32).ravel())
        score_line = "<br>score: %{customdata[3]:.4~g}"
    return go.Scatter(
        x=np.asarray(col_names, dtype=object)[cols.ravel()], y=np.asarray(row_names, dtype=object)[rows.ravel()],
        mode="markers", marker=CLICK_MARKER,
        # a typed array, sent as binary: as nested lists plotly validated every number (about 0.1 s at 64×64);
        # a click returns a point's row of it as {"0": …, "1": …}, which appkit/common.clicked_point reads
        customdata=np.stack(custom, -1).astype(np.float32), showlegend=False, name="cells",
        hovertemplate="query %{y}<br>key %{x}<br>weight: %{customdata[2]:.4~g}" + score_line + "<br>click: inspect this query<extra></extra>",
    )


def _token_axes(row_tokens, col_tokens, row_oov, col_oov, row_start: int = 0, col_start: int = 0):
    """(row labels, column labels, row names, column names) of a queries × keys matrix; the keys are the queries
    when col_tokens is None."""
    rows = labels(row_tokens, row_oov)
    cols = labels(col_tokens if col_tokens is not None else row_tokens, col_oov if col_tokens is not None else row_oov)
    return rows, cols, positions(rows, row_start), positions(cols, col_start)


def attention_heatmap(
    weights: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None, *,
    scores: np.ndarray | None = None, row_oov=None, col_oov=None, title: str = "", palette: str = "viridis",
    scale: str = "row", width: str = "full", row_start: int = 0, col_start: int = 0, clickable: bool = False,
    colours: ColourScale | None = None, height: int | None = None, allowed: np.ndarray | None = None,
) -> go.Figure:
    """Weights (Tq, Tk): queries are rows, top to bottom in sentence order; keys are columns. With `allowed` (Tq, Tk),
    masked cells are drawn light grey and say "masked" on hover (see _masked_trace).

    `scale` picks what colour means (SCALES); hover gives query, key, the true weight and the raw score.
    `width` is the share of the page the figure gets (a key of PLOT_PX), which sets how many key
    labels fit. row_start and col_start number a window of a longer sentence by its own positions.
    `clickable` adds a click layer: a click on a cell selects the point (query, key) = customdata[0:2].
    `colours` shares one colour scale between figures drawn side by side (see colour_scale); it overrides `scale`.
    `height` overrides the height that fits the number of rows (px).
    """
    rows, cols, row_names, col_names = _token_axes(row_tokens, col_tokens, row_oov, col_oov, row_start, col_start)
    colours = colours or colour_scale(scale, weights)
    heatmap = _weights_trace(weights, scores, row_names, col_names, colours, zmin=0, zmax=colours.zmax,
                             colorscale=PALETTES[palette], colorbar=colours.colorbar())
    clickable = clickable and len(rows) <= CLICK_LIMIT
    if clickable:
        heatmap.hoverinfo = "skip"  # the click layer above it carries the hover
    traces = [heatmap, _click_layer(weights, scores, row_names, col_names, row_start, col_start)] if clickable else [heatmap]
    if allowed is not None and not np.all(allowed):
        traces.insert(1, _masked_trace(allowed, row_names, col_names))
    height = height or _side(len(rows))
    # The layout goes into the constructor: a later update_layout (plotly's relayout machinery) cost more than
    # the rest of this function, on every click.
    return go.Figure(traces, layout=dict(
        title=title, height=height, xaxis=_keys_axis(cols, col_names, width), yaxis=_rows_axis(rows, row_names, height),
        hoverdistance=-1 if clickable else 20, margin=dict(t=60 if title else 30),
    ))


def interactive_heatmap(
    scores: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None, *, view: dict, row_oov=None,
    col_oov=None, title: str = "", row_start: int = 0, col_start: int = 0, taus: list[float], overflow: str = "",
    file: str = "attnviz_heatmap", font_px: int = FONT_PX, label_px: int | None = None, bars_limit: int = 64,
    height: int | None = None, max_height: int | None = None, key_window: tuple[int, int] | None = None,
) -> dict:
    """What the interactive heatmap (attnviz/browser/heatmap.mjs) needs to compute and draw a view in the browser: the raw scores
    a(q_i, k_j), (Tq, Tk) or (H, Tq, Tk) for several heads (drawn as their average or maximum, the view's `over`),
    before τ, the mask and the softmax, as float32 bytes in base64; the tokens as plain
    text (the browser sets them as text, never as HTML), OOV marked; the view's state (temp, hard, mask, hide,
    scale, palette, query); the τ grid; the palettes' stops; and the layout rules of these figures (label pitch,
    tick-label cut, height: the rows' own, or `height`, at most `max_height`). `overflow` is the message shown where S/τ
    leaves float32's range.

    With `key_window` = (start, width) the scores hold every key of their rows and only keys start … start + width − 1
    are drawn (a long input's zoom window): the rows are still normalised over every key, and `keys` carries every
    key's label for the query's bars. `row_start` is the first row's position in the sentence (the causal mask's)."""
    scores = np.ascontiguousarray(_finite(scores), dtype="<f4")  # (Tq, Tk) or (H, Tq, Tk)
    rows = [t + (OOV_MARK if o else "") for t, o in zip(row_tokens, row_oov or [False] * len(row_tokens))]
    if col_tokens is None:
        cols = rows
    else:
        cols = [t + (OOV_MARK if o else "") for t, o in zip(col_tokens, col_oov or [False] * len(col_tokens))]
    window = {}
    if key_window is not None:
        col_start, width = key_window
        window = dict(keys=cols)
        cols = cols[col_start:col_start + width]
    packed = base64.b64encode(scores.tobytes()).decode("ascii")
    version = hashlib.blake2b("\x00".join([packed, *rows, "\x01", *cols, title, str(row_start), str(col_start)]).encode(),
                              digest_size=12).hexdigest()
    return dict(
        version=version, scores=packed, heads=int(scores.shape[0]) if scores.ndim == 3 else 1, n=int(scores.shape[-2]),
        m=len(cols), rows=rows, cols=cols, **window,
        row_start=row_start, col_start=col_start, title=title, view=view, taus=list(taus), overflow_message=overflow,
        palettes={name: palette_stops(name) for name in PALETTES}, label_px=label_px or _screen.get().label_px, font_px=font_px,
        min_font_px=min(font_px, _screen.get().min_font_px),
        tick_chars=TICK_CHARS, height=min(height or _side(len(rows)), max_height or math.inf), bars_limit=bars_limit,
        file=file,
    )


def matrix_data(values: np.ndarray, row_labels: list[str], col_labels: list[str], *, title: str, what: str,
                axes: tuple[str, str], scale: str = "absolute", palette: str = "viridis", chosen_row: int = -1,
                font_px: int = FONT_PX, height: int | None = None, file: str = "attnviz_matrix",
                whole_rows: bool = False) -> dict:
    """What the browser draws for a matrix of final numbers (n, m): each head's row of weights, a mean per layer and
    head. The heatmap's own drawing (heatmap_matrix.mjs: labels, colour bar, hover, PNG/SVG) without τ, masks or clicks,
    so a page that reruns often redraws no plotly chart. `what` names a cell's number, `axes` the rows and columns;
    `scale` "absolute" (0 → 1, for weights) or "max"; `chosen_row` (from 0) is outlined, -1 none. `whole_rows`: the
    row labels are names (of measures), drawn whole rather than cut to TICK_CHARS as tokens are."""
    values = np.ascontiguousarray(_finite(values), dtype="<f4")  # (n, m)
    packed = base64.b64encode(values.tobytes()).decode("ascii")
    rows, cols = [str(r) for r in row_labels], [str(c) for c in col_labels]
    version = hashlib.blake2b("\x00".join([packed, *rows, "\x01", *cols, title, scale]).encode(), digest_size=12).hexdigest()
    view = {"temp": 1.0, "hard": False, "mask": "none", "hide": [], "scale": scale, "palette": palette, "query": chosen_row}
    return dict(kind="matrix", version=version, values=packed, scores="", heads=1, n=int(values.shape[0]),
                m=int(values.shape[1]), rows=rows, cols=cols, row_start=0, col_start=0, title=title, what=what,
                axes=list(axes), view=view, taus=[1.0], overflow_message="",
                palettes={name: palette_stops(name) for name in PALETTES}, label_px=_screen.get().label_px,
                font_px=font_px, min_font_px=min(font_px, _screen.get().min_font_px), tick_chars=TICK_CHARS,
                row_chars=max(map(len, rows), default=0) if whole_rows else TICK_CHARS,
                height=height or _side(len(rows)), bars_limit=64, file=file)


def interactive_comparison(a: dict, b: dict, *, same_tokens: bool, compact: bool = False) -> dict:
    """What the interactive heatmap needs for Compare A | B: the two sides' interactive_heatmap data (their own scores,
    views and titles; B's view holds B's τ, hard and mask) and, where the tokens match, B − A's: side A's labels and
    layout with the diverging palette (DIVERGING), drawn from the two sides' weights in the browser. `compact` (a
    lesson step): each side with τ, hard and the mask only, no query bars, so A and B fit beside the step's text."""
    sides = [{**a, "side": "A"}, {**b, "side": "B"}]
    if not same_tokens:
        return {"sides": sides, "compact": compact}
    view = {"temp": 1.0, "hard": False, "mask": "none", "hide": [], "scale": "absolute", "palette": "diverging", "query": 0}
    stops = [[p, list(rgb)] for p, rgb in _scale_stops(DIVERGING)]
    difference = {**a, "scores": "", "version": f"{a['version']}-{b['version']}", "title": "B − A", "view": view,
                  "palettes": {"diverging": stops}, "file": a["file"].removesuffix("_a") + "_difference"}
    return {"sides": sides, "difference": difference, "compact": compact}


def head_grid(
    weights: np.ndarray, tokens: list[str], *, scores: np.ndarray | None = None, oov=None, palette: str = "viridis",
    scale: str = "row", allowed: np.ndarray | None = None, width: str = "full", cols: int = 3, labelled: bool = True,
    panel_px: int | None = None,
) -> go.Figure:
    """Small multiples: one heatmap per head (H, n, n) and the head average, on one colour bar (panel_grid)."""
    panels = [(f"head {h}", weights[h], None if scores is None else scores[h]) for h in range(weights.shape[0])]
    panels.append(("average over heads" if labelled else "average", weights.mean(0), None))  # a thumbnail's title is short
    text = labels(tokens, oov)
    return panel_grid(panels, text, text, palette=palette, scale=scale, allowed=allowed, width=width, cols=cols,
                      labelled=labelled, panel_px=panel_px)


def panel_grid(
    panels: list[tuple[str, np.ndarray, np.ndarray | None]], row_text: list[str], col_text: list[str], *,
    palette: str = "viridis", scale: str = "row", allowed: np.ndarray | None = None, width: str = "full", cols: int = 3,
    labelled: bool = True, panel_px: int | None = None,
) -> go.Figure:
    """Small multiples: one weights heatmap per panel (title, weights (n, m), scores or None), `cols` to a row, on one
    colour bar, in a figure given `width` of the page (PLOT_PX's keys).

    Tick labels sit on the grid's outer edges only (keys under the last row, queries left of the first column),
    so no subplot's labels run into the next one's title. Unlabelled (`labelled` False), the panels are thumbnails
    of a pattern, named by their titles and hover: a figure beside them draws the chosen one with every label.
    """
    cols = max(1, min(cols, len(panels)))
    nrows = math.ceil(len(panels) / cols)
    row_names, col_names = positions(row_text), positions(col_text)
    n = len(row_text)
    panel_px = panel_px or min(420, max(240, 120 + 12 * n))
    label_px = 8 * min(TICK_CHARS, max(len(t) for t in col_text)) + 30 if labelled else 10  # the vertical key labels
    height = nrows * panel_px + label_px + 60
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[p[0] for p in panels], horizontal_spacing=0.04,
                        vertical_spacing=min(0.3, 50 / height))
    colours = colour_scale(scale, *(p[1] for p in panels))
    room = _screen.get().plot_px[width] // cols  # each panel's share of the width
    for i, (_, w, s) in enumerate(panels):
        r, c = divmod(i, cols)
        fig.add_trace(_weights_trace(w, s, row_names, col_names, colours, coloraxis="coloraxis"), row=r + 1, col=c + 1)
        if allowed is not None and not np.all(allowed):  # (n, m) one mask for every panel
            fig.add_trace(_masked_trace(allowed, row_names, col_names), row=r + 1, col=c + 1)
        # Key labels under the last row only: hanging from a panel above an empty cell, they would run into
        # the titles of the row below.
        fig.update_xaxes(**_axis(col_text, col_names, room), side="bottom", tickangle=-90, title=None,
                         showticklabels=labelled and r == nrows - 1, row=r + 1, col=c + 1)
        fig.update_yaxes(**_rows_axis(row_text, row_names, panel_px + 160, title=None), showticklabels=labelled and c == 0,
                         row=r + 1, col=c + 1)
    fig.update_layout(
        coloraxis=dict(cmin=0, cmax=colours.zmax, colorscale=PALETTES[palette], colorbar=colours.colorbar()),
        height=height, margin=dict(t=40, b=label_px),
    )
    return fig


def difference_heatmap(a: np.ndarray, b: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None, *,
                       row_oov=None, col_oov=None, title: str = "B − A", width: str = "full") -> go.Figure:
    """B − A of two weight matrices over the same tokens, on a diverging scale centred on 0 (PuOr: orange where A
    is larger, purple where B is). Hover gives A, B and the difference."""
    a, b = _finite(a).astype(np.float32), _finite(b).astype(np.float32)  # (Tq, Tk) each
    difference = b - a  # (Tq, Tk)
    rows, cols, row_names, col_names = _token_axes(row_tokens, col_tokens, row_oov, col_oov)
    extent = float(np.abs(difference).max()) or 1.0
    height = _side(len(rows))
    return go.Figure(go.Heatmap(
        z=difference, x=col_names, y=row_names, zmin=-extent, zmax=extent, zmid=0, colorscale=DIVERGING,
        customdata=np.stack([a, b], -1), colorbar=_colorbar("B − A"),
        hovertemplate="query %{y}<br>key %{x}<br>A: %{customdata[0]:.4~g}<br>B: %{customdata[1]:.4~g}<br>"
                      "B − A: %{z:.4~g}<extra></extra>",
    ), layout=dict(title=title, height=height, xaxis=_keys_axis(cols, col_names, width),
                   yaxis=_rows_axis(rows, row_names, height), margin=dict(t=60)))


def block_max(weights: np.ndarray, max_blocks: int) -> tuple[np.ndarray, int]:
    """(blocks, b): the maximum of each b×b block of the last two dimensions, b = ⌈n / max_blocks⌉."""
    weights = _finite(weights)
    n_rows, n_cols = weights.shape[-2:]
    b = max(1, math.ceil(max(n_rows, n_cols) / max_blocks))
    rows, cols = math.ceil(n_rows / b), math.ceil(n_cols / b)
    if (n_rows, n_cols) != (rows * b, cols * b):  # pad with 0, which never wins a max of weights ≥ 0
        padded = np.zeros((*weights.shape[:-2], rows * b, cols * b), dtype=weights.dtype)  # (..., rows·b, cols·b)
        padded[..., :n_rows, :n_cols] = weights
        weights = padded
    blocks = weights.reshape(*weights.shape[:-2], rows, b, cols, b).max(axis=(-3, -1))  # (..., rows, cols)
    return blocks.astype(np.float32), b


def block_overview(weights: np.ndarray, tokens: list[str], *, max_blocks: int = 128, palette: str = "viridis",
                   scale: str = "row") -> go.Figure:
    """A light overview of a large (n, n) matrix: the maximum weight in each b×b block, b = ⌈n / max_blocks⌉.

    Max rather than mean, so a single strong link stays visible. Hover names the block's token ranges.
    """
    n_rows, n_cols = weights.shape
    blocks, b = block_max(weights, max_blocks)  # (rows, cols)
    rows, cols = blocks.shape
    text = labels(tokens)

    def span(i: int, n: int) -> str:
        lo, hi = i * b, min(n, (i + 1) * b) - 1
        return f"#{lo}–{hi} {_short(text[lo])} … {_short(text[hi])}" if hi > lo else f"#{lo} {_short(text[lo])}"

    row_names = [span(i, n_rows) for i in range(rows)]
    col_names = [span(j, n_cols) for j in range(cols)]
    colours = colour_scale(scale, blocks)
    height = 700
    return go.Figure(go.Heatmap(
        z=colours.show(blocks), x=col_names, y=row_names, zmin=0, zmax=colours.zmax, colorscale=PALETTES[palette],
        customdata=blocks, colorbar=colours.colorbar("block max"),
        hovertemplate="queries %{y}<br>keys %{x}<br>max weight in block: %{customdata:.4~g}<extra></extra>",
    ), layout=dict(
        title=f"Overview: max weight per {b}×{b} block ({n_rows} × {n_cols} tokens)", height=height,
        xaxis=dict(_keys_axis([c.split(" ")[0] for c in col_names], col_names, "full", title="keys"), type="category"),
        yaxis=dict(_rows_axis([r.split(" ")[0] for r in row_names], row_names, height, title="queries"), type="category"),
    ))


def matrix_heatmap(
    matrix: np.ndarray, row_labels: list[str], col_labels: list[str], *, title: str = "",
    bounded: bool = False, palette: str = "viridis", width: str = "full", height: int | None = None, scale_bar: bool = True,
    nonnegative: bool = False, whole_rows: bool = False,
) -> go.Figure:
    """Any labelled matrix (`whole_rows`: row labels that are names, drawn whole); signed values use a diverging scale centred on 0, [0, 1] values (`bounded`) the palette
    from 0 to 1, values ≥ 0 (`nonnegative`) the palette from 0 to their largest (without `scale_bar`, no colour bar: a
    0/1 matrix whose title says what its two colours are)."""
    z = _finite(matrix)  # (rows, cols)
    if bounded or nonnegative:
        colour = dict(zmin=0, zmax=1 if bounded else float(z.max()) or 1.0, colorscale=PALETTES[palette])
    else:
        extent = float(np.abs(z).max()) or 1.0
        colour = dict(zmin=-extent, zmax=extent, colorscale=DIVERGING)
    row_names, col_names = positions(row_labels), positions(col_labels)
    height = height or max(300, _side(len(row_labels)) * 2 // 3)
    return go.Figure(go.Heatmap(
        z=z, x=col_names, y=row_names, **colour, colorbar=_colorbar("value"), showscale=scale_bar,
        hovertemplate="row %{y}<br>column %{x}<br>value: %{z:.4f}<extra></extra>",
    ), layout=dict(
        title=dict(text=wrap_title(f"{title}  ({z.shape[0]}×{z.shape[1]})", width)), height=height,
        xaxis=_keys_axis(col_labels, col_names, width, title=None), yaxis=_rows_axis(row_labels, row_names, height, title=None, whole=whole_rows),
        margin=dict(t=50),
    ))
