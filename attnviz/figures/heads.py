"""Figures of a model's heads: the atlas's data for the browser, layers × heads summaries, the line view, the
query–key space, and a score taken apart over its dimensions."""

from __future__ import annotations

import base64
import hashlib
import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.figures.layout import (
    CLICK_MARKER, DIVERGING, FONT_PX, PALETTES, _colorbar, _finite, _scale_stops, _short, colour_scale, labels,
    palette_stops,
)
from attnviz.figures.matrices import block_max

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
               max_height: int = ATLAS_HEIGHT_PX, title: str | None = None, score: tuple[str, np.ndarray] | None = None,
               colour: str = "pattern", sort: bool = False, signed: bool = False, base: int = 1,
               names: tuple[list[int], list[int]] | None = None) -> dict:
    """What the browser's head atlas (attnviz/browser/atlas.mjs) draws: every head of weights (L, H, n, n) as a thumbnail of at most
    `most` × `most` blocks (each block's largest weight beyond that), as the colour scale shows it, in bytes 0 … 255
    (base64); `allowed` (n, n), where a mask hides keys, greys the blocks no query may read; `chosen` (layer, head),
    counted from 0, is outlined; with `group` > 1 (grouped-query attention) dark lines part the key/value groups.
    `score` (name, (L, H) values in 0 … 1), a head score (attnviz.heads): shown on hover; with colour="score" each
    thumbnail keeps its pattern and shows the score as a bar along its foot (`score_bars`); with colour="measure"
    each head is one square of the measure's colour instead: a `signed` measure (an effect, Δ log p) on a
    diverging scale centred on 0, an unsigned one (1 − cos) on the palette from 0 to its largest value, so that a
    measure far below 1 still spans the scale. With `sort` each layer's heads are ordered by it, highest first
    (`order`). `names` (layer numbers, head numbers): what the model calls the layers and heads drawn, where they are
    a subset of its own."""
    n_layers, n_heads = weights.shape[:2]
    order = np.tile(np.arange(n_heads), (n_layers, 1))  # (L, H) the head drawn in each place of a layer
    if score is not None and sort:
        order = np.argsort(-np.nan_to_num(score[1], nan=-1.0), axis=1, kind="stable")  # (L, H)
    stops = palette_stops(palette)
    squares = score is not None and colour == "measure"
    if squares:  # one square a head, coloured by the measure
        values = np.nan_to_num(np.asarray(score[1], np.float64), nan=0.0, posinf=0.0, neginf=0.0)  # (L, H)
        top = float(np.abs(values).max()) or 1.0
        if signed:
            shown = (0.5 + 0.5 * values / top)[..., None, None]  # (L, H, 1, 1): 0 → the middle of the scale
            zmax_text = f"+{top:.3g}"
            stops = [[p, list(rgb)] for p, rgb in _scale_stops(DIVERGING)]
        else:
            shown = np.clip(values / top, 0, 1)[..., None, None]  # (L, H, 1, 1): 0 → the scale's foot, the largest → its top
            zmax_text = f"{top:.3g} (largest)"
        r, masked = 1, ""
        title = title or f"All {n_layers * n_heads:,} heads ({n_layers} layers × {n_heads} heads), coloured by {score[0]}"
    else:
        blocks, b = block_max(weights, most)  # (L, H, r, r)
        r = blocks.shape[-1]
        colours = colour_scale(scale, blocks)
        shown = np.clip(colours.show(blocks) / colours.zmax, 0, 1)  # (L, H, r, r) on 0 … 1
        zmax_text = {"row": "1 = its row's largest", "max": f"{colours.top:.3g} (largest)",
                     "sqrt": f"{colours.top:.3g} (√ scale)"}.get(scale, "1")
        masked = ""
        if allowed is not None and not np.asarray(allowed).all():
            readable, _ = block_max(np.asarray(allowed, np.float32), most)  # (r, r) 0 where no query reads the block
            masked = base64.b64encode((readable == 0).astype(np.uint8).tobytes()).decode("ascii")
        n = weights.shape[-1]
        title = title or (f"All {n_layers * n_heads:,} heads ({n_layers} layers × {n_heads} heads), each {n}×{n}"
                          + (f", max per {b}×{b} block" if b > 1 else ""))
    bars = score is not None and colour == "score"
    if bars:
        title += f"; the bar along each head's foot: its {score[0]} (the full width = 1)"
    if sort and score is not None:
        title += f"; each layer's heads by {score[0]}, highest first"
        shown = np.take_along_axis(shown, order[..., None, None], axis=1)  # (L, H, r, r) in drawing order
    values = np.rint(shown * 255).astype(np.uint8).tobytes()
    packed = base64.b64encode(values).decode("ascii")
    sorted_ = bool(sort and score is not None)
    version = hashlib.blake2b("\x00".join([packed, masked, scale, palette, title, str(signed), str(base), str(names)]).encode(),
                              digest_size=12).hexdigest()
    data = dict(version=version, layers=int(n_layers), heads=int(n_heads), r=int(r), blocks=packed, masked=masked,
                group=int(group) if not sorted_ else 1, chosen=[int(c) for c in chosen], palette=stops,
                title=title, zmax_text=zmax_text, font_px=font_px, tile_max_px=ATLAS_TILE_PX, max_height=max_height,
                order=order.ravel().tolist() if sorted_ else None, base=int(base), score_bars=bool(bars))
    if squares and signed:
        data["zmin_text"] = zmax_text.replace("+", "−")  # the scale runs −top … +top, 0 in its middle
    if names is not None:
        data["layer_names"], data["head_names"] = [int(i) for i in names[0]], [int(i) for i in names[1]]
    if score is not None:
        data["measure"] = dict(name=score[0], values=[round(float(v), 4) for v in np.nan_to_num(score[1]).ravel()])
    return data


def share_bars(weight: np.ndarray, norm: np.ndarray, names: list[str], *, title: str) -> go.Figure:
    """Each key's share of a layer's attention weight beside its share of the norm the heads move from it, two bars a
    key (shares in %, each series summing to 100)."""
    weight, norm = _finite(weight) * 100, _finite(norm) * 100  # (n,) each
    x = np.arange(len(names))
    ticks = [_short(html.escape(t)) for t in names]
    fig = go.Figure([
        go.Bar(x=x, y=weight, name="share of the weight Σ α_ij", marker_color="#0072b2",
               hovertemplate="%{customdata}<br>weight: %{y:.1f} %<extra></extra>", customdata=ticks),
        go.Bar(x=x, y=norm, name="share of the norm Σ ‖α_ij f(x_j)‖", marker_color="#e69f00",
               hovertemplate="%{customdata}<br>norm: %{y:.1f} %<extra></extra>", customdata=ticks),
    ])
    fig.update_layout(title=title, barmode="group", height=380, margin=dict(t=70), legend=dict(orientation="h", y=1.02, x=0),
                      xaxis=dict(tickmode="array", tickvals=x, ticktext=ticks, title="key"), yaxis=dict(title="%"))
    return fig


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
