"""The figures' shared layout: palettes and colour scales, the screen (laptop or projector) and its label sizes,
tick labels and axes, and margins sized for every text before plotly draws (fit_margins), so it draws once.

Layout rules that keep every text readable (tests/e2e/test_layout.py checks them in a browser): queries run down the
left axis and keys along the bottom, in vertical labels thinned to what the figure's width holds; colour-bar titles
stand beside the bar; long tokens are cut in tick labels and given whole on hover."""

from __future__ import annotations

import contextvars
import functools
import html
import math
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import plotly.colors
import plotly.graph_objects as go

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


def _axis(ticktext: list[str], names: list[str], plot_px: int, shrink: bool = True, whole: bool = False) -> dict:
    """A category axis over `names` showing the plain labels, as many as `plot_px` holds (every k-th), but all of
    them up to ALL_LABELS: then, with `shrink`, in smaller type where the room is short (a figure made taller is
    the other way, see grow_to_labels). Tokens are cut to TICK_CHARS; `whole` labels (names of runs or measures, which
    may differ only at their end) are drawn whole."""
    screen = _screen.get()
    budget = max(plot_px // screen.label_px, 1)
    count = len(ticktext)
    step = 1 if count <= ALL_LABELS else max(1, math.ceil(count / budget))
    axis = dict(type="category", tickmode="array", tickvals=names[::step], ticktext=[t if whole else _short(t) for t in ticktext[::step]],
                showgrid=False, automargin=True)
    if shrink and step == 1 and count > budget:
        axis["tickfont"] = dict(size=max(screen.min_font_px, screen.font_px * plot_px // (count * screen.label_px)))
    return axis


def _keys_axis(ticktext: list[str], names: list[str], width: str, title: str | None = "key") -> dict:
    """The bottom axis of keys (or dimensions): vertical labels, as many as the figure's width holds."""
    axis = _axis(ticktext, names, _screen.get().plot_px[width])
    return dict(axis, side="bottom", tickangle=-90, title=title)


def _rows_axis(ticktext: list[str], names: list[str], height: int, title: str | None = "query",
               whole: bool = False) -> dict:
    """The left axis of queries (or rows), top to bottom, as many labels as the height holds (all up to
    ALL_LABELS: grow_to_labels makes the figure tall enough); `whole`: see _axis."""
    return dict(_axis(ticktext, names, height - 160, shrink=False, whole=whole), autorange="reversed", title=title)


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


FIGURE_TITLE_PX = 16  # the chart theme's title size, where a figure sets none


def wrap_title(text: str, width: str, font_px: float = FIGURE_TITLE_PX) -> str:
    """`text` broken into lines (<br>) at spaces, each within what a figure `width` wide (PLOT_PX's keys) holds on this
    screen: its plot's width and a little of its margins. A word longer than that keeps a line of its own."""
    room = _screen.get().plot_px[width] + 80
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_px(lines[-1] + " " + word, font_px) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def title_room(fig: go.Figure) -> go.Figure:
    """A top margin that holds every line of the figure's title (wrap_title's), with plotly's gap above the plot."""
    title = fig.layout.title
    lines = (title.text or "").count("<br>") + 1
    if lines > 1:
        need = math.ceil(lines * 1.36 * (title.font.size or FIGURE_TITLE_PX) + 30)
        fig.update_layout(margin_t=max(fig.layout.margin.t or 0, need))
    return fig


def fit_margins(fig: go.Figure) -> go.Figure:
    """Left, right and bottom margins that hold the tick labels, axis titles and colour bars, estimated here; the top
    one holds every line of the title (title_room).

    plotly's automargin (kept on as a safety net) widens a margin that is too small by drawing the whole
    figure a second time, and Streamlit's chart theme starts every chart at left and right margins of 0, so
    without this every chart was drawn twice. A margin the figure already sets larger is kept.
    """
    title_room(fig)
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


def palette_stops(palette: str) -> list[list]:
    """A palette as [[position, [r, g, b]], ...], the stops plotly interpolates between, for the browser."""
    return [[p, list(rgb)] for p, rgb in _scale_stops(PALETTES[palette])]


@functools.lru_cache(maxsize=None)  # parsing plotly's colours took 0.6 ms of every run with an interactive heatmap
def _scale_stops(name: str) -> tuple[tuple[float, tuple[int, ...]], ...]:
    """plotly's colour scale `name` as ((position, (r, g, b)), ...)."""
    stops = plotly.colors.get_colorscale(name)
    return tuple((float(p), tuple(int(c) for c in plotly.colors.unlabel_rgb(plotly.colors.convert_colors_to_same_type(colour, "rgb")[0][0])))
                 for p, colour in stops)


def dims(n: int) -> list[str]:
    """Column labels for the feature dimensions of a matrix."""
    return [f"d{i}" for i in range(n)]
