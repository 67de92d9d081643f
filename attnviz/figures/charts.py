"""Charts of the retrieval and pooling pages: weight bars, the key–value PCA, entropy against τ, kernel regression,
learning σ, and the variance of q·k against d."""

from __future__ import annotations

import base64
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.figures.layout import FONT_PX, _colorbar, _finite, _rows_axis, _short, labels, positions, text_px

def weight_bars(
    weights: np.ndarray, tokens: list[str], *, oov=None, title: str = "", highlight: int | None = None, top: int | None = None,
    start: int = 0, axis: str = "weight", whole: bool = False,
) -> go.Figure:
    """One query's weights over the keys, one horizontal bar per key in sentence order, top to bottom; the
    `highlight` bar (say, the hard pick) stands out.

    With `top`, only the `top` largest weights are drawn (still in sentence order): a long input has
    too many keys for one bar each. `axis` names what the bars are (weights, unless they are, say, similarities).
    `whole`: the labels are names (of runs, of measures), drawn whole rather than cut as tokens are.
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
        yaxis=_rows_axis([text[i] for i in keys], shown, height, title=None, whole=whole),
        xaxis=dict(title=axis, range=[min(0.0, float(weights.min())) * 1.05, max(1e-9, float(weights.max())) * 1.05], automargin=True),
    ))


def bars_data(values: np.ndarray, labels_: list[str], *, title: str, axis: str, highlight: int | None = None,
              font_px: int = FONT_PX) -> dict:
    """What the browser draws as labelled bars (attnviz/browser/heatmap_matrix.mjs's BarChart: the inspector's bars, no plotly): one
    value per label, the `highlight` one marked; `axis` says what the numbers are. Labels are plain text."""
    values = np.ascontiguousarray(_finite(values), dtype="<f4")  # (k,)
    return dict(kind="bars", values=base64.b64encode(values.tobytes()).decode("ascii"), labels=[str(x) for x in labels_],
                title=title, axis=axis, highlight=-1 if highlight is None else int(highlight), font_px=font_px)


# The PCA's plot as small as it is drawn (half of a 1280×800 page): a label placed clear of the others there is
# clear on any larger screen, where the points spread further apart and the labels keep their size.
SCATTER_PLOT_PX = (300, 230)


LABEL_PLACES = {"top center": (0.0, 1.0), "bottom center": (0.0, -1.0), "middle right": (1.0, 0.0), "middle left": (-1.0, 0.0)}


def place_labels(points: np.ndarray, texts: list[str], order: np.ndarray, font_px: float = FONT_PX,
                 plot_px: tuple[int, int] = SCATTER_PLOT_PX, sizes: np.ndarray | None = None) -> tuple[list[str], list[str]]:
    """Each point's label (points (N, 2)) put above, below, right or left of it, the first place whose box meets no
    label placed before, taking the points in `order` (the heaviest first); a label with no free place is left
    off (""). `sizes`: the markers' diameters in px (8 where not given), which push their labels out as plotly does.
    Returns (texts, textpositions) for a plotly scatter."""
    span = np.ptp(points, axis=0) * 1.15 + 1e-9  # (2,) plotly pads the range a little
    px = (points - points.min(0)) / span * np.array(plot_px)  # (N, 2) where each point falls, in px
    # plotly.js (Drawing.textPointPosition) sets a label r = radius / 0.8 + 1 px off its marker's centre
    gaps = (np.full(len(texts), 8.0) if sizes is None else np.asarray(sizes, float)) / 2 / 0.8 + 1  # (N,)
    placed, texts_out, where = [], [""] * len(texts), ["top center"] * len(texts)
    for i in order:
        w, h = text_px(texts[i], font_px) + 2, 1.3 * font_px
        for name, (dx, dy) in LABEL_PLACES.items():
            cx, cy = px[i, 0] + dx * (w / 2 + gaps[i]), px[i, 1] + dy * (h / 2 + gaps[i])
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
    sizes = 8 + 40 * weights  # (N,) px
    drawn, where = place_labels(points[:-1], keys, np.argsort(-weights, kind="stable"), sizes=sizes)
    fig = go.Figure([
        go.Scatter(x=points[:-1, 0], y=points[:-1, 1], mode="markers+text", text=drawn, textposition=where,
                   cliponaxis=False,  # a label beside a point at the plot's edge is drawn whole, into the margin
                   marker=dict(size=sizes, color=weights, colorscale="Viridis", cmin=0, cmax=1,
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
