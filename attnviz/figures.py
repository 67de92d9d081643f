"""Plotly figure builders: arrays in, go.Figure out. No streamlit here.

Tokens may repeat ("his" twice), so axes are numeric positions with the tokens as tick text, and
user text is HTML-escaped because plotly renders a subset of HTML tags in labels and hovers.

Layout rules that keep every text readable (tests/e2e/test_layout.py checks them in a browser):
queries run down the left axis and keys along the bottom, in vertical labels thinned to what the
figure's width holds; colour-bar titles stand beside the bar; long tokens are cut in tick labels and
given whole on hover; margins are sized for all that before plotly draws (fit_margins), so it draws once.
"""

from __future__ import annotations

import base64
import contextvars
import functools
import hashlib
import html
import math
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PALETTES = {"viridis": "Viridis", "cividis": "Cividis", "greys": "Greys"}  # all colourblind-safe
DIVERGING = "PuOr"  # for signed matrices; colourblind-safe, centred on 0
OOV_MARK = " ⟨oov⟩"
# Colour scales for weights: what the colour of a cell means. Hover always gives the true weight.
SCALES = {"row": "per row", "max": "0 → largest shown", "absolute": "0 → 1", "sqrt": "√ stretch"}
# Pixels of plot area a figure gets at 1280×800, the smallest screen we lay out for, by the share of the
# page it is drawn in; a vertical tick label needs LABEL_PX of it.
PLOT_PX = {"full": 520, "three_fifths": 260, "half": 200, "third": 72, "sixth": 50}
LABEL_PX = 15
# Presenter mode is laid out for a 1920×1080 projector with the sidebar folded: its plot widths (a third of the
# page measured 400 px in Chromium), and 21 px a 16 px label.
PRESENTER_PLOT_PX = {"full": 1100, "three_fifths": 640, "half": 480, "third": 340, "sixth": 120}
PRESENTER_LABEL_PX = 21
ALL_LABELS = 20  # up to this many tokens every label is drawn: smaller type, or a taller figure, never a gap


@dataclass(frozen=True)
class Screen:
    """What the figures built for one screen lay their labels out for."""

    plot_px: dict  # plot width by the share of the page (PLOT_PX's keys)
    label_px: int  # room one tick label takes
    font_px: int  # tick labels' size
    min_font_px: int  # the smallest a bottom axis's labels shrink to so that up to ALL_LABELS all show


LAPTOP = Screen(PLOT_PX, LABEL_PX, 12, 8)
PRESENTER = Screen(PRESENTER_PLOT_PX, PRESENTER_LABEL_PX, 16, 16)  # 16 px is presenter mode's smallest chart text
# The screen of the figures built in this thread: a Streamlit script run sets it for its session, so concurrent
# sessions do not see each other's.
_screen = contextvars.ContextVar("screen", default=LAPTOP)


def set_presenter(on: bool) -> None:
    """Lay the figures this thread builds from now on out for presenter mode (on) or a laptop's screen."""
    _screen.set(PRESENTER if on else LAPTOP)


def label_px() -> int:
    """Room each tick label takes in the figures this thread builds."""
    return _screen.get().label_px


TICK_CHARS = 18  # longer tokens are cut in tick labels (hover shows them whole)
CLICK_LIMIT = 64  # up to this many queries a heatmap gets its click layer (one invisible point per cell)
# The click layers' points: invisible, and drawn one only (maxdisplayed), since hover and clicks read plotly's data,
# not the drawn points. Styling 256 drawn points took the browser about 40 ms per redraw at 16 tokens.
CLICK_MARKER = dict(symbol="square", size=12, opacity=0.01, color="#000000", maxdisplayed=1)


def labels(tokens: list[str], oov: list[bool] | None = None) -> list[str]:
    """Tokens escaped for plotly, with unknown words marked.

    Only &, < and > are escaped: plotly reads its own small set of HTML entities, and &quot; is not among
    them, so an escaped double quote would show as the literal text "&quot;".
    """
    oov = oov or [False] * len(tokens)
    return [html.escape(t, quote=False) + (OOV_MARK if o else "") for t, o in zip(tokens, oov)]


def positions(ticktext: list[str], start: int = 0) -> list[str]:
    """Unique category names "#i label", so a repeated word keeps its own row and column; i counts from
    `start`, the first token's position in the sentence."""
    return [f"#{start + i} {t}" for i, t in enumerate(ticktext)]


def _short(label: str) -> str:
    """An escaped label cut to TICK_CHARS characters of its text (never inside an entity such as &amp;)."""
    text = html.unescape(label)
    return label if len(text) <= TICK_CHARS else html.escape(text[: TICK_CHARS - 1], quote=False) + "…"


def _finite(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z)
    if not np.issubdtype(z.dtype, np.floating):
        z = z.astype(float)
    if not np.isfinite(z).all():
        raise ValueError("A matrix with NaN or infinite values cannot be drawn.")
    return z


def _axis(ticktext: list[str], names: list[str], plot_px: int, shrink: bool = True) -> dict:
    """A category axis over `names` showing the plain labels, as many as `plot_px` holds (every k-th), but all of
    them up to ALL_LABELS: then, with `shrink`, in smaller type where the room is short (a figure made taller is
    the other way, see grow_to_labels)."""
    screen = _screen.get()
    budget = max(plot_px // screen.label_px, 1)
    count = len(ticktext)
    step = 1 if count <= ALL_LABELS else max(1, math.ceil(count / budget))
    axis = dict(type="category", tickmode="array", tickvals=names[::step], ticktext=[_short(t) for t in ticktext[::step]],
                showgrid=False, automargin=True)
    if shrink and step == 1 and count > budget:
        axis["tickfont"] = dict(size=max(screen.min_font_px, screen.font_px * plot_px // (count * screen.label_px)))
    return axis


def _keys_axis(ticktext: list[str], names: list[str], width: str, title: str | None = "key") -> dict:
    """The bottom axis of keys (or dimensions): vertical labels, as many as the figure's width holds."""
    axis = _axis(ticktext, names, _screen.get().plot_px[width])
    return dict(axis, side="bottom", tickangle=-90, title=title)


def _rows_axis(ticktext: list[str], names: list[str], height: int, title: str | None = "query") -> dict:
    """The left axis of queries (or rows), top to bottom, as many labels as the height holds (all up to
    ALL_LABELS: grow_to_labels makes the figure tall enough)."""
    return dict(_axis(ticktext, names, height - 160, shrink=False), autorange="reversed", title=title)


def grow_to_labels(fig: go.Figure) -> go.Figure:
    """A figure tall enough for every label of its left axes (margins set, fit_margins): each label gets its
    room, the figure grows where the plot is short of it."""
    layout = fig.layout
    if layout.height is None:
        return fig
    plot_h = layout.height - (layout.margin.t or 0) - (layout.margin.b or 0)
    need = 0.0
    for axis in fig.select_yaxes():
        if axis.type != "category" or axis.showticklabels is False or not axis.tickvals or len(axis.tickvals) > ALL_LABELS:
            continue
        # One line of horizontal labels: 1.2 em apart (Source Sans's glyph box is 1.26 em, so neighbours touch).
        pitch = math.ceil(1.2 * (axis.tickfont.size or _screen.get().font_px))
        share = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        need = max(need, len(axis.tickvals) * pitch / share - plot_h)
    if need > 0:
        fig.update_layout(height=math.ceil(layout.height + need))
    return fig


def _side(n: int) -> int:
    return int(min(900, max(420, 200 + 26 * n)))


def _colorbar(title: str, **extra) -> dict:
    """At the plot's right edge (plotly's default, 2 % of the plot's width beyond it, is a width the margins
    cannot know before the browser lays the chart out)."""
    return dict(title=dict(text=title, side="right"), thickness=14, x=1.0, **extra)


# ---------------------------------------------------------------- margins

FONT_PX = 12  # tick labels when a figure sets no size (Streamlit's chart theme)
TITLE_FONT_PX = 14  # axis and colour-bar titles, likewise
# The longest tick label plotly picks itself, assumed: on a colour bar ("0.25", "−0.5"), on a numeric axis.
COLORBAR_NUMBER_CHARS, AXIS_NUMBER_CHARS = 4, 6
# Measured in Chromium, with the margins' pad at 0: an axis's labels take 9 px beside them, with a title 23 px
# more; a margin set larger than 0 but short of that is widened to 10 px beyond it, so the gaps below add those
# 10 px. A colour bar has 10 px of padding on each side.
LABELS_GAP, TITLE_GAP, COLORBAR_PAD = 19, 33, 10
THEME_PAD_PX = 8  # Streamlit's chart theme puts this between the plot and its axes (margin.pad)


def text_px(text: str, font_px: float) -> float:
    """A label's width in px, estimated from its characters: wide (CJK, emoji) 1 em, combining marks 0, the
    rest 0.56 em (Source Sans measures about 0.54 em per character in our labels)."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", text))
    return font_px * sum(0.0 if unicodedata.combining(c) else 1.0 if unicodedata.east_asian_width(c) in "WF" else 0.56
                         for c in plain)


def _title_px(title) -> float:
    return 1.36 * (title.font.size or TITLE_FONT_PX) if title.text else 0.0


def _axis_px(axis, across: bool) -> float:
    """Room an axis's tick labels and title take beside the plot: the labels' width when they run `across`
    the margin (beside a y axis, or vertical under an x axis), else one line's height."""
    size = axis.tickfont.size or FONT_PX
    if axis.showticklabels is False:
        labels_px = 0.0
    elif not across:
        labels_px = 1.33 * size
    else:
        labels_px = _ticks_px(axis.ticktext, size, AXIS_NUMBER_CHARS)
    title_px = _title_px(axis.title)
    return labels_px + (title_px + TITLE_GAP if title_px else LABELS_GAP)


def _ticks_px(ticktext, size: float, number_chars: int) -> float:
    """The widest tick label: of the figure's own tick texts, else of the numbers plotly will pick."""
    return max((text_px(str(t), size) for t in ticktext), default=0.0) if ticktext else text_px("0" * number_chars, size)


def _colorbar_px(colorbar) -> float:
    size = colorbar.tickfont.size or FONT_PX
    numbers = _ticks_px(colorbar.ticktext, size, COLORBAR_NUMBER_CHARS)
    return 2 * COLORBAR_PAD + (colorbar.thickness or 30) + numbers + _title_px(colorbar.title) + 4


def fit_margins(fig: go.Figure) -> go.Figure:
    """Left, right and bottom margins that hold the tick labels, axis titles and colour bars, estimated here.

    plotly's automargin (kept on as a safety net) widens a margin that is too small by drawing the whole
    figure a second time, and Streamlit's chart theme starts every chart at left and right margins of 0, so
    without this every chart was drawn twice. A margin the figure already sets larger is kept.
    """
    layout = fig.layout
    # No pad where every axis names its ticks (heatmaps): it gives narrow plots 8 px back. A numeric axis keeps
    # the theme's pad, or its "0" at the plot's corner meets the other axis's last label.
    pad = 0 if all(axis.type == "category" or axis.ticktext for axis in [*fig.select_xaxes(), *fig.select_yaxes()]) else THEME_PAD_PX
    need = {"l": 0.0, "r": 0.0, "b": 0.0}
    for axis in fig.select_yaxes():
        side = "r" if axis.side == "right" else "l"
        need[side] = max(need[side], _axis_px(axis, across=True) + pad)
    for axis in fig.select_xaxes():
        need["b"] = max(need["b"], _axis_px(axis, across=axis.tickangle in (-90, 90, 270)) + pad)
    shared = {trace.coloraxis for trace in fig.data if "coloraxis" in trace and trace.coloraxis}
    bars = [layout[name].colorbar for name in shared if layout[name].showscale is not False]
    bars += [trace.colorbar for trace in fig.data
             if trace.type == "heatmap" and not trace.coloraxis and trace.showscale is not False]
    need["r"] = max([need["r"]] + [_colorbar_px(bar) for bar in bars])
    fit = {side: math.ceil(px) + 5 if px else 0 for side, px in need.items()}  # 5 px for the estimate's error
    fig.update_layout(margin={side: max(getattr(layout.margin, side) or 0, px) for side, px in fit.items()} | {"pad": pad})
    return fig


# ---------------------------------------------------------------- colour scales


@dataclass(frozen=True)
class ColourScale:
    """How weights map to colour: `show(w)` gives the values to colour, on zmin 0 … zmax 1 (or `top`)."""

    name: str
    top: float  # the largest weight shown

    def show(self, weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, np.float32)
        if self.name == "row":
            row_max = w.max(-1, keepdims=True)  # (..., rows, 1)
            return np.divide(w, row_max, out=np.zeros_like(w), where=row_max > 0)
        if self.name == "sqrt":
            return np.sqrt(w / self.top)
        return w

    @property
    def zmax(self) -> float:
        return self.top if self.name == "max" else 1.0

    def colorbar(self, what: str = "weight") -> dict:
        if self.name == "row":
            return _colorbar(f"{what} ÷ its row's largest")
        if self.name == "max":
            return _colorbar(f"{what}, 0 → max {self.top:.3g}")
        if self.name == "sqrt":
            ticks = [t for t in (0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0) if t <= self.top] + [self.top]
            return _colorbar(f"{what} (√ scale), 0 → max {self.top:.3g}", tickvals=[math.sqrt(t / self.top) for t in ticks],
                             ticktext=[f"{t:.3g}" for t in ticks])
        return _colorbar(f"{what}, 0 → 1")


def colour_scale(scale: str, *matrices: np.ndarray) -> ColourScale:
    """The colour scale `scale` (a key of SCALES) for weights drawn together, sharing one colour bar."""
    if scale not in SCALES:
        raise ValueError(f"Unknown colour scale '{scale}'. Choose one of: {', '.join(SCALES)}.")
    top = max((float(np.max(m)) for m in matrices if np.size(m)), default=0.0)
    return ColourScale(scale, top if top > 0 else 1.0)


# ---------------------------------------------------------------- attention heatmaps


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


def _masked_trace(allowed: np.ndarray, row_names, col_names, **trace) -> go.Heatmap:
    """The masked cells (allowed False) in light grey over the weights, their hover "masked": a masked key gets no
    weight at all, which the palette's colour for 0 would show as a tiny weight. Allowed cells are gaps (null, not
    NaN) that let the weights beneath show and hover."""
    z = [[None if ok else 1 for ok in row] for row in np.asarray(allowed, bool)]  # (rows, cols)
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
        # a click returns a point's row of it as {"0": …, "1": …}, which pages/_common.clicked_point reads
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


def palette_stops(palette: str) -> list[list]:
    """A palette as [[position, [r, g, b]], ...], the stops plotly interpolates between, for the browser."""
    return [[p, list(rgb)] for p, rgb in _scale_stops(PALETTES[palette])]


@functools.lru_cache(maxsize=None)  # parsing plotly's colours took 0.6 ms of every run with an interactive heatmap
def _scale_stops(name: str) -> tuple[tuple[float, tuple[int, ...]], ...]:
    """plotly's colour scale `name` as ((position, (r, g, b)), ...)."""
    stops = plotly.colors.get_colorscale(name)
    return tuple((float(p), tuple(int(c) for c in plotly.colors.unlabel_rgb(plotly.colors.convert_colors_to_same_type(colour, "rgb")[0][0])))
                 for p, colour in stops)


def interactive_heatmap(
    scores: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None, *, view: dict, row_oov=None,
    col_oov=None, title: str = "", row_start: int = 0, col_start: int = 0, taus: list[float], overflow: str = "",
    file: str = "attnviz_heatmap", font_px: int = FONT_PX, label_px: int | None = None, bars_limit: int = 64,
    height: int | None = None, max_height: int | None = None, key_window: tuple[int, int] | None = None,
) -> dict:
    """What the interactive heatmap (heatmap.js) needs to compute and draw a view in the browser: the raw scores
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
) -> go.Figure:
    """Any labelled matrix; signed values use a diverging scale centred on 0, [0, 1] values the palette (without
    `scale_bar`, no colour bar: a 0/1 matrix whose title says what its two colours are)."""
    z = _finite(matrix)  # (rows, cols)
    if bounded:
        colour = dict(zmin=0, zmax=1, colorscale=PALETTES[palette])
    else:
        extent = float(np.abs(z).max()) or 1.0
        colour = dict(zmin=-extent, zmax=extent, colorscale=DIVERGING)
    row_names, col_names = positions(row_labels), positions(col_labels)
    height = height or max(300, _side(len(row_labels)) * 2 // 3)
    return go.Figure(go.Heatmap(
        z=z, x=col_names, y=row_names, **colour, colorbar=_colorbar("value"), showscale=scale_bar,
        hovertemplate="row %{y}<br>column %{x}<br>value: %{z:.4f}<extra></extra>",
    ), layout=dict(
        title=dict(text=f"{title}  ({z.shape[0]}×{z.shape[1]})"), height=height,
        xaxis=_keys_axis(col_labels, col_names, width, title=None), yaxis=_rows_axis(row_labels, row_names, height, title=None),
        margin=dict(t=50),
    ))


def weight_bars(
    weights: np.ndarray, tokens: list[str], *, oov=None, title: str = "", highlight: int | None = None, top: int | None = None,
    start: int = 0, axis: str = "weight",
) -> go.Figure:
    """One query's weights over the keys, one horizontal bar per key in sentence order, top to bottom; the
    `highlight` bar (say, the hard pick) stands out.

    With `top`, only the `top` largest weights are drawn (still in sentence order): a long input has
    too many keys for one bar each. `axis` names what the bars are (weights, unless they are, say, similarities).
    """
    text = labels(tokens, oov)
    weights = _finite(weights)  # (Tk,)
    keys = np.arange(len(text))  # (Tk,)
    if top is not None and len(text) > top:
        keys = np.sort(np.argsort(-weights, kind="stable")[:top])  # (top,) ties go to the earlier key
    names = positions(text, start)
    shown = [names[i] for i in keys]
    height = 110 + max(6, len(keys)) * (24 if len(keys) <= 16 else 16)
    return go.Figure(go.Bar(
        y=shown, x=weights[keys], orientation="h", marker_color=["#d55e00" if i == highlight else "#0072b2" for i in keys],
        hovertemplate=f"key %{{y}}<br>{axis}: %{{x:.4~g}}<extra></extra>",
    ), layout=dict(
        title=title, height=height, margin=dict(t=50),
        yaxis=_rows_axis([text[i] for i in keys], shown, height, title=None),
        xaxis=dict(title=axis, range=[min(0.0, float(weights.min())) * 1.05, max(1e-9, float(weights.max())) * 1.05], automargin=True),
    ))


def score_parts(rows: list[tuple[str, np.ndarray]], terms: np.ndarray, unit: str, *, title: str = "",
                sort: bool = False) -> go.Figure:
    """A score taken apart (the neuron view): one bar row per vector of `rows` (say q, k and q ∘ k), aligned over
    the `unit`s (dimensions, or hidden units), and last the terms that sum to the score, blue where a term adds to it,
    orange where it takes away. `sort`: the units in order of |term|, largest first, else in their own order."""
    terms = _finite(terms)  # (m,)
    order = np.argsort(-np.abs(terms), kind="stable") if sort else np.arange(len(terms))  # (m,)
    names = [str(u) for u in order]
    panels = [(name, _finite(vector)) for name, vector in rows] + [("term", terms)]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=[name for name, _ in panels])
    for r, (name, vector) in enumerate(panels, start=1):
        values = vector[order]  # (m,)
        colours = ["#0072b2" if v >= 0 else "#d55e00" for v in values] if name == "term" else "#7f7f7f"
        fig.add_trace(go.Bar(x=names, y=values, marker_color=colours, name=name, showlegend=False,
                             hovertemplate=f"{unit} %{{x}}<br>{name}: %{{y:.4~g}}<extra></extra>"), row=r, col=1)
    fig.update_xaxes(type="category", showticklabels=False)
    fig.update_xaxes(showticklabels=len(names) <= 64, title=unit + (" (by |term|)" if sort else ""), row=len(panels), col=1)
    fig.update_layout(title=title, height=120 + 110 * len(panels), margin=dict(t=70), bargap=0.15)
    return fig


def dims(n: int) -> list[str]:
    """Column labels for the feature dimensions of a matrix."""
    return [f"d{i}" for i in range(n)]


# ---------------------------------------------------------------- the line view

# Okabe–Ito: eight colours that stay distinct under the common colour-vision deficiencies.
HEAD_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
LINE_ROW_PX = 22


def line_view(weights: np.ndarray, tokens: list[str], *, query: int | None = None, heads: list[int] | None = None,
              oov=None, min_share: float = 0.02, head_names: list[str] | None = None) -> go.Figure:
    """bertviz-style lines from each query (left) to each key (right), one Okabe–Ito colour per head.

    weights (H, n, n). Opacity and width grow with the weight relative to the largest weight shown, so
    the pattern reads at any sentence length; lines under `min_share` of it are left out. `query` picks one
    word: its lines stand out and the others fade. `heads` picks the heads drawn (default: all), named
    `head_names` in the legend (default "head h"). The query words carry their position in customdata,
    so a click on one picks it.
    """
    n_heads, n, _ = weights.shape
    if n_heads > len(HEAD_COLOURS):
        raise ValueError(f"The line view has {len(HEAD_COLOURS)} distinct head colours; got {n_heads} heads.")
    weights = _finite(weights)
    heads = list(range(n_heads)) if heads is None else heads
    rows = range(n) if query is None else [query]
    top = max(float(weights[np.ix_(heads, list(rows))].max()), 1e-12)
    fig = go.Figure()
    for h in heads:
        _add_lines(fig, weights[h] / top, list(rows), HEAD_COLOURS[h], min_share)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=HEAD_COLOURS[h], width=4), name=head_names[h] if head_names else f"head {h}"))
    if query is not None:  # the other words' strongest lines, faded, for context; all of them would be a grey wash
        context_top = max(float(weights[heads].max()), 1e-12)
        others = [i for i in range(n) if i != query]
        for h in heads:
            _add_lines(fig, weights[h] / context_top, others, HEAD_COLOURS[h], 0.5, fade=0.1)
    text = [_short(t) for t in labels(tokens, oov)]
    bold = [f"<b>{t}</b>" if i == query else t for i, t in enumerate(text)]
    fig.add_trace(go.Scatter(x=[0] * n, y=list(range(n)), mode="text+markers", text=bold, textposition="middle left",
                             marker=dict(size=10, color="#888888"), customdata=list(range(n)), showlegend=False, name="queries",
                             textfont=dict(size=14), hovertemplate="query #%{y} %{text}<br>click: show its lines<extra></extra>"))
    fig.add_trace(go.Scatter(x=[1] * n, y=list(range(n)), mode="text+markers", text=text, textposition="middle right",
                             marker=dict(size=6, color="#888888"), showlegend=False, name="keys", textfont=dict(size=14),
                             hovertemplate="key #%{y} %{text}<extra></extra>"))
    fig.update_layout(
        xaxis=dict(visible=False, range=[-0.45, 1.45], fixedrange=True), yaxis=dict(visible=False, autorange="reversed", fixedrange=True),
        height=max(320, LINE_ROW_PX * n + 110), margin=dict(t=70, b=10, l=10, r=10),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0.5, xanchor="center"),
        hovermode="closest",
    )
    return fig


FADED = "other words' lines"  # the name of the faded traces drawn for context around a chosen word


def _add_lines(fig: go.Figure, shares: np.ndarray, rows: list[int], colour: str, min_share: float, fade: float = 1.0) -> None:
    """The lines of the queries `rows` to every key whose weight is at least min_share of the largest shown,
    shares (n, n), grouped by tenths of that share: one trace per tenth for all the rows (opacity and width from
    the tenth), as plotly draws a few long traces much faster than hundreds of short ones."""
    tenths = np.minimum((shares * 10).astype(int), 9)  # (n, n)
    for tenth in range(10):
        pairs = [(i, j) for i in rows for j in np.flatnonzero((tenths[i] == tenth) & (shares[i] >= min_share))]
        if not pairs:
            continue
        xs = [v for _ in pairs for v in (0, 1, None)]
        ys = [v for i, j in pairs for v in (i, int(j), None)]
        # Squared, so that near-uniform heads (most random ones) stay a light mesh and the strong links stand out.
        strength = ((tenth + 1) / 10) ** 2
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=0.5 + 3.5 * strength),
                                 opacity=fade * (0.06 + 0.94 * strength), hoverinfo="skip", showlegend=False,
                                 name=FADED if fade < 1 else "lines"))


def qk_space(queries: np.ndarray, keys: np.ndarray, names: list[str], sentence: np.ndarray, position: np.ndarray,
             explained: np.ndarray, *, chosen: int | None = None, targets: list[tuple[int, float]] = (), title: str = "") -> go.Figure:
    """Queries (circles) and keys (diamonds) of one head in one 2-D projection (N, 2) each, point i being piece
    names[i], at `position[i]` of sentence `sentence[i]`, coloured by its place in its sentence (0 first, 1 last).
    `chosen` (a query's index) is ringed, with a line to each of `targets`, its strongest keys (index, weight)."""
    text = labels(names)
    length = np.array([np.sum(sentence == s) for s in sentence])  # (N,) each point's sentence length
    place = position / np.maximum(length - 1, 1)  # (N,) 0 → first, 1 → last
    data = np.stack([np.arange(len(text)), sentence, position], -1)  # (N, 3) index, sentence, position
    marker = dict(size=9, color=place, colorscale="Viridis", cmin=0, cmax=1, line=dict(width=0.5, color="#ffffff"))
    hover = "%{text}<br>sentence %{customdata[1]}, position %{customdata[2]}<extra>"
    fig = go.Figure([
        go.Scatter(x=queries[:, 0], y=queries[:, 1], mode="markers", name="queries", text=text, customdata=data,
                   marker=dict(**marker, symbol="circle", colorbar=_colorbar("place in its sentence (0 first, 1 last)")),
                   hovertemplate="query " + hover + "query</extra>"),
        go.Scatter(x=keys[:, 0], y=keys[:, 1], mode="markers", name="keys", text=text, customdata=data,
                   marker=dict(**marker, symbol="diamond"), hovertemplate="key " + hover + "key</extra>"),
    ])
    if chosen is not None:
        for j, weight in targets:
            fig.add_trace(go.Scatter(x=[queries[chosen, 0], keys[j, 0]], y=[queries[chosen, 1], keys[j, 1]], mode="lines",
                                     line=dict(color="#d55e00", width=1 + 5 * weight), showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=keys[[j for j, _ in targets], 0], y=keys[[j for j, _ in targets], 1], mode="markers+text",
                                 text=[f"{_short(text[j])} {w:.2f}" for j, w in targets], textposition="top center",
                                 marker=dict(size=14, symbol="diamond-open", color="#d55e00"), name="its strongest keys",
                                 hovertemplate="%{text}<extra>weight</extra>"))
        fig.add_trace(go.Scatter(x=queries[chosen:chosen + 1, 0], y=queries[chosen:chosen + 1, 1], mode="markers",
                                 marker=dict(size=16, symbol="circle-open", color="#d55e00", line=dict(width=2)),
                                 name=f"query {_short(text[chosen])}", hoverinfo="skip"))
    fig.update_layout(title=title, height=520, margin=dict(t=60), legend=dict(orientation="h", y=-0.18),
                      xaxis=dict(title=f"PC 1 ({explained[0]:.0%} of the variance)", automargin=True, zeroline=False),
                      yaxis=dict(title=f"PC 2 ({explained[1]:.0%})", automargin=True, zeroline=False, scaleanchor="x"))
    return fig


# ---------------------------------------------------------------- the key–value database


# The PCA's plot as small as it is drawn (half of a 1280×800 page): a label placed clear of the others there is
# clear on any larger screen, where the points spread further apart and the labels keep their size.
SCATTER_PLOT_PX = (300, 230)
LABEL_PLACES = {"top center": (0.0, 1.0), "bottom center": (0.0, -1.0), "middle right": (1.0, 0.0), "middle left": (-1.0, 0.0)}


def place_labels(points: np.ndarray, texts: list[str], order: np.ndarray, font_px: float = FONT_PX,
                 plot_px: tuple[int, int] = SCATTER_PLOT_PX) -> tuple[list[str], list[str]]:
    """Each point's label (points (N, 2)) put above, below, right or left of it, the first place whose box meets no
    label placed before, taking the points in `order` (the heaviest first); a label with no free place is left
    off (""). Returns (texts, textpositions) for a plotly scatter."""
    span = np.ptp(points, axis=0) * 1.15 + 1e-9  # (2,) plotly pads the range a little
    px = (points - points.min(0)) / span * np.array(plot_px)  # (N, 2) where each point falls, in px
    placed, texts_out, where = [], [""] * len(texts), ["top center"] * len(texts)
    for i in order:
        w, h = text_px(texts[i], font_px) + 2, 1.3 * font_px
        for name, (dx, dy) in LABEL_PLACES.items():
            cx, cy = px[i, 0] + dx * (w / 2 + 6), px[i, 1] + dy * (h / 2 + 6)
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            if all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1] for b in placed):
                placed.append(box)
                texts_out[i], where[i] = texts[i], name
                break
    return texts_out, where


def pca_scatter(points: np.ndarray, key_labels: list[str], query_label: str, weights: np.ndarray) -> go.Figure:
    """Keys and the query on their first two principal components (points (N+1, 2), the query last), each
    key sized and coloured by its soft weight. Key names are drawn beside their points where they do not run into
    another's (place_labels, the heaviest keys first); crowded ones name themselves on hover."""
    keys = [_short(k) for k in labels(key_labels)]
    drawn, where = place_labels(points[:-1], keys, np.argsort(-weights, kind="stable"))
    fig = go.Figure([
        go.Scatter(x=points[:-1, 0], y=points[:-1, 1], mode="markers+text", text=drawn, textposition=where,
                   marker=dict(size=8 + 40 * weights, color=weights, colorscale="Viridis", cmin=0, cmax=1,
                               colorbar=_colorbar("soft weight")),
                   customdata=np.stack([weights, np.arange(len(keys))], -1), name="keys", hovertext=keys,
                   hovertemplate="key #%{customdata[1]:.0f} %{hovertext}<br>weight: %{customdata[0]:.4~g}<extra></extra>"),
        go.Scatter(x=points[-1:, 0], y=points[-1:, 1], mode="markers", marker=dict(size=14, symbol="x", color="#d55e00"),
                   name="query", text=labels([query_label]), hovertemplate="query %{text}<extra></extra>"),
    ])
    fig.update_layout(title="Query and keys (PCA, size ∝ weight)", height=380, margin=dict(t=50),
                      xaxis=dict(title="PC 1", automargin=True), yaxis=dict(title="PC 2", automargin=True),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def entropy_against_tau(taus: np.ndarray, curve: np.ndarray, tau: float, n_keys: int) -> go.Figure:
    """Entropy of the soft weights against τ, with the chosen τ and ln N (the plain average) marked."""
    fig = go.Figure([
        go.Scatter(x=taus, y=curve, mode="lines", name="entropy", hovertemplate="τ = %{x:.3g}<br>entropy = %{y:.3f} nats<extra></extra>"),
        go.Scatter(x=[tau, tau], y=[0, float(np.log(n_keys))], mode="lines", line=dict(dash="dash", color="#d55e00"), name=f"τ = {tau:g}"),
        go.Scatter(x=[taus[0], taus[-1]], y=[float(np.log(n_keys))] * 2, mode="lines", line=dict(dash="dot", color="#888888"),
                   name=f"ln N = {np.log(n_keys):.3f}: plain average"),
    ])
    fig.update_layout(title="Entropy of the soft weights against τ", height=340, margin=dict(t=50),
                      xaxis=dict(type="log", title="τ (log scale)"), yaxis=dict(title="entropy (nats)"),
                      legend=dict(orientation="h", y=-0.3))
    return fig


# ---------------------------------------------------------------- a trained model's layers × heads

ATLAS_BLOCKS = 32  # a thumbnail shows at most this many rows and columns (block maxima beyond)
ATLAS_TILE_PX = 96  # the largest thumbnail, on a wide screen with few heads
ATLAS_HEIGHT_PX = 900  # the atlas's rows fit this height (a 32-layer model gets 27-px thumbnails)


def _pick_layer(fig: go.Figure, xs: np.ndarray, ys: np.ndarray, layers: np.ndarray, heads: np.ndarray, hover: list[str]) -> None:
    """Invisible points carrying (layer, head) for clicks; with hoverdistance -1 the nearest point takes the
    hover, so a click anywhere on a head's cell or tile picks that head."""
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", marker=CLICK_MARKER,
        customdata=np.stack([layers, heads], -1).tolist(), text=hover, showlegend=False, name="heads",
        hovertemplate="%{text}<br>click: open this head<extra></extra>",
    ))


def _outline(fig: go.Figure, x0: float, y0: float, x1: float, y1: float) -> None:
    fig.add_shape(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color="#d55e00", width=3))


def atlas_data(weights: np.ndarray, *, chosen: tuple[int, int], scale: str = "row", palette: str = "viridis", group: int = 1,
               most: int = ATLAS_BLOCKS, allowed: np.ndarray | None = None, font_px: int = FONT_PX,
               max_height: int = ATLAS_HEIGHT_PX, title: str | None = None) -> dict:
    """What the browser's head atlas (atlas.js) draws: every head of weights (L, H, n, n) as a thumbnail of at most
    `most` × `most` blocks (each block's largest weight beyond that), as the colour scale shows it, in bytes 0 … 255
    (base64); `allowed` (n, n), where a mask hides keys, greys the blocks no query may read; `chosen` (layer, head),
    counted from 0, is outlined; with `group` > 1 (grouped-query attention) dark lines part the key/value groups."""
    blocks, b = block_max(weights, most)  # (L, H, r, r)
    n_layers, n_heads, r, _ = blocks.shape
    colours = colour_scale(scale, blocks)
    shown = np.clip(colours.show(blocks) / colours.zmax, 0, 1)  # (L, H, r, r) on 0 … 1
    values = np.rint(shown * 255).astype(np.uint8).tobytes()
    masked = ""
    if allowed is not None and not np.asarray(allowed).all():
        readable, _ = block_max(np.asarray(allowed, np.float32), most)  # (r, r) 0 where no query reads the block
        masked = base64.b64encode((readable == 0).astype(np.uint8).tobytes()).decode("ascii")
    packed = base64.b64encode(values).decode("ascii")
    n = weights.shape[-1]
    title = title or (f"All {n_layers * n_heads:,} heads ({n_layers} layers × {n_heads} heads), each {n}×{n}"
                      + (f", max per {b}×{b} block" if b > 1 else ""))
    zmax = {"row": "1 = its row's largest", "max": f"{colours.top:.3g} (largest)", "sqrt": f"{colours.top:.3g} (√ scale)"}
    version = hashlib.blake2b("\x00".join([packed, masked, scale, palette, title]).encode(), digest_size=12).hexdigest()
    return dict(version=version, layers=int(n_layers), heads=int(n_heads), r=int(r), blocks=packed, masked=masked,
                group=int(group), chosen=[int(c) for c in chosen], palette=palette_stops(palette), title=title,
                zmax_text=zmax.get(scale, "1"), font_px=font_px, tile_max_px=ATLAS_TILE_PX, max_height=max_height)


def layer_head_heatmap(values: np.ndarray, *, title: str, what: str, chosen: tuple[int, int] | None = None,
                       zmax: float | None = None, palette: str = "viridis") -> go.Figure:
    """One number per head, (L, H), layers as rows, each cell printed; a click on a cell selects [layer, head]."""
    values = _finite(values).astype(np.float32)  # (L, H)
    n_layers, n_heads = values.shape
    top = zmax if zmax is not None else max(float(values.max()), 1e-12)
    fig = go.Figure(go.Heatmap(
        z=values, x=np.arange(1, n_heads + 1), y=np.arange(1, n_layers + 1), zmin=0, zmax=top, colorscale=PALETTES[palette],
        texttemplate="%{z:.2f}", textfont=dict(size=14), hoverinfo="skip", colorbar=_colorbar(what),
    ))
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    hover = [f"layer {l + 1}, head {h + 1}<br>{html.escape(what)}: {values[l, h]:.4g}" for l, h in zip(layers, heads)]
    _pick_layer(fig, heads + 1, layers + 1, layers, heads, hover)
    if chosen is not None:
        l, h = chosen
        _outline(fig, h + 0.5, l + 0.5, h + 1.5, l + 1.5)
    fig.update_layout(
        title=title, height=n_layers * 56 + 150, margin=dict(t=60), hoverdistance=-1, hovermode="closest",
        xaxis=dict(title="head", tickmode="linear", dtick=1, showgrid=False, zeroline=False),
        yaxis=dict(title="layer", tickmode="linear", dtick=1, autorange="reversed", showgrid=False, zeroline=False),
    )
    return fig


# ---------------------------------------------------------------- attention pooling


def bandwidth_training(losses: list[float], sigmas: list[float], steps: int, *, grid_sigma: float | None = None) -> go.Figure:
    """The σ fit so far: the leave-one-out loss (top) and σ (bottom) after each Adam step. The x axis spans
    all `steps` from the start, so the curves grow across a fixed frame while training runs."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("leave-one-out loss", "σ"))
    done = np.arange(1, len(losses) + 1)  # (steps so far,)
    fig.add_trace(go.Scatter(x=done, y=losses, mode="lines", name="loss", line=dict(color="#d55e00"),
                             hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=done, y=sigmas, mode="lines", name="σ", line=dict(color="#0072b2"),
                             hovertemplate="step %{x}<br>σ %{y:.4f}<extra></extra>"), row=2, col=1)
    if grid_sigma is not None:
        fig.add_hline(y=grid_sigma, line=dict(dash="dot", color="#999999"), row=2, col=1,
                      annotation_text=f"best σ on a grid: {grid_sigma:.3g}", annotation_position="top right")
    fig.update_xaxes(range=[0, steps + 1])
    fig.update_xaxes(title="Adam step", row=2, col=1)
    # Four labelled ticks over the σ drawn: plotly's own on a log axis spanning less than a decade are its minor
    # digits (2, 3, 4, …), which pile up on a short panel.
    shown = [*sigmas, *([grid_sigma] if grid_sigma is not None else [])]
    low, high = min(shown), max(shown)
    ticks = np.geomspace(low, high, 4) if high > low * 1.01 else np.array([low])  # (≤4,)
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:.3g}" for t in ticks], row=2, col=1,
                     range=[math.log10(low) - 0.05, math.log10(high) + 0.05])
    fig.update_layout(title=f"Learning σ: step {len(losses)} of {steps}", height=420, showlegend=False, margin=dict(t=70))
    return fig


def pooling_regression(x: np.ndarray, y: np.ndarray, grid: np.ndarray, fitted: np.ndarray, truth: np.ndarray,
                       query: float, prediction: float, query_weights: np.ndarray) -> go.Figure:
    """Attention pooling as kernel regression: the training points (keys, values) sized by one query's weights,
    the true function, the pooled prediction over a grid of queries (NaN where no key is in reach: not drawn),
    and the chosen query's prediction."""
    drawn = np.isfinite(fitted)  # (G,)
    fig = go.Figure([
        go.Scatter(x=x, y=y, mode="markers", name="training points (keys, values)",
                   marker=dict(size=5 + 40 * query_weights, color="#0072b2", opacity=0.7), customdata=query_weights,
                   hovertemplate="GPA %{x:.2f}<br>salary %{y:,.0f}<br>weight %{customdata:.3f}<extra></extra>"),
        go.Scatter(x=grid, y=truth, mode="lines", name="truth", line=dict(dash="dot", color="#999999")),
        go.Scatter(x=grid[drawn], y=fitted[drawn], mode="lines", name="attention pooling", line=dict(color="#d55e00")),
        go.Scatter(x=[query], y=[prediction], mode="markers", name=f"f̂({query:g}) = {prediction:,.0f}",
                   marker=dict(symbol="x", size=14, color="#000000")),
    ])
    fig.update_layout(xaxis_title="GPA", yaxis=dict(title="starting salary", tickformat=",.0f"), height=420,
                      legend=dict(orientation="h", y=1.02, yanchor="bottom"), margin=dict(t=40))
    return fig


def variance_against_d(dims: list[int], variance: np.ndarray) -> go.Figure:
    """The measured variance of q·k for each dimension d, beside the line y = d, on log axes ticked at the measured
    d (powers of two: evenly spaced, where plotly's own log ticks crowd a narrow column; every other one on the
    shorter y axis), the legend above."""
    fig = go.Figure([
        go.Scatter(x=dims, y=variance, mode="markers+lines", name="measured Var(q·k)"),
        go.Scatter(x=dims, y=dims, mode="lines", name="y = d", line=dict(dash="dot")),
    ])

    def ticks(every: int) -> dict:
        return dict(type="log", tickvals=dims[::every], ticktext=[str(d) for d in dims[::every]])

    fig.update_layout(xaxis=dict(**ticks(1), title="d"), yaxis=dict(**ticks(2), title="variance"), height=360,
                      legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))
    return fig
