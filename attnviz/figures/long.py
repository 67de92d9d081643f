"""A whole document's scan (attnviz.models.scan.Scan) drawn: every head's overview in the atlas, the chosen head's
overview with a click layer, the exact tile of the block clicked, the document shaded by one query's weights, and where
the last piece reads from."""

from __future__ import annotations

import base64

import numpy as np
import plotly.graph_objects as go

from attnviz.figures.heads import atlas_data
from attnviz.figures.layout import CLICK_MARKER, PALETTES, _colorbar, _keys_axis, _rows_axis, _short, labels
from attnviz.figures.matrices import attention_heatmap

SORTS = {"layer": "the model's order", "sink": "sink share", "entropy": "mean entropy", "retrieval": "retrieval score"}
CONTEXT_CHARS = 40  # the text shown on either side of a key "the last piece reads from"


def head_measure(scan, sort: str, retrieval: np.ndarray | None = None) -> tuple[str, np.ndarray] | None:
    """(name, (L, H) values in 0 … 1) the atlas sorts each layer's heads by: the sink's share; each query's entropy
    over the most it could have, log(keys it may read), averaged over the queries; or Wu et al.'s retrieval score."""
    if sort == "sink":
        return "sink share (mean α on the first piece)", scan.sink
    if sort == "entropy":
        n = len(scan)
        readable = np.arange(1, n + 1) if scan.architecture.causal else np.full(n, n)  # (n,) keys each query may read
        most = np.log(np.maximum(readable, 2))  # (n,) the entropy of a uniform row
        return "mean entropy / log(keys read)", (scan.entropy / most).mean(-1)
    if sort == "retrieval" and retrieval is not None:
        return "retrieval score (Wu et al. 2024)", retrieval
    return None


def scan_atlas(scan, chosen: tuple[int, int], sort: str = "layer", retrieval: np.ndarray | None = None,
               palette: str = "viridis") -> dict:
    """The head atlas (atlas.mjs) of every head's overview (L, H, B, B): each block's share of its row's weight, 1 = its
    row's largest; sorted within each layer by `sort` (SORTS), which hover shows."""
    score = head_measure(scan, sort, retrieval)
    b = scan.overview.shape[-1]
    title = (f"All {scan.layers * scan.heads:,} heads over {len(scan):,} pieces: each block of {scan.block} queries' "
             f"mean weight on each block of keys ({b}×{b})")
    return atlas_data(scan.overview, chosen=chosen, scale="row", palette=palette, group=scan.architecture.group,
                      score=score, sort=score is not None, title=title, base=1)


def block_name(names: list[str], start: int, stop: int) -> str:
    """Pieces start … stop − 1 as a hover names them: their positions and the first and last."""
    if stop - start == 1:
        return f"#{start} {_short(names[start])}"
    return f"#{start}–{stop - 1} {_short(names[start])} … {_short(names[stop - 1])}"


def overview_figure(scan, layer: int, head: int, *, palette: str = "viridis", height: int = 560) -> go.Figure:
    """The chosen head's overview (B, B): the mean over each block of queries of its weight on each block of keys (a
    row sums to 1). Hover names the blocks' pieces; a click on a block, or a box drawn over a region of them (plotly's
    Box Select), selects their (row block, key block) through the click layer's customdata."""
    values = scan.overview[layer, head]  # (B, B)
    count = values.shape[0]
    names = labels(scan.pieces.labels())
    n = len(scan)
    spans = [block_name(names, a * scan.block, min(n, (a + 1) * scan.block)) for a in range(count)]
    ticks = [str(a * scan.block) for a in range(count)]
    top = float(values.max()) or 1.0
    rows, cols = np.indices(values.shape)  # (B, B) each
    heatmap = go.Heatmap(z=values, x=spans, y=spans, zmin=0, zmax=top, colorscale=PALETTES[palette],
                         colorbar=_colorbar("mean share"), hoverinfo="skip")
    clicks = go.Scatter(
        x=np.asarray(spans, dtype=object)[cols.ravel()], y=np.asarray(spans, dtype=object)[rows.ravel()],
        mode="markers", marker=CLICK_MARKER, showlegend=False, name="blocks",
        customdata=np.stack([rows.ravel(), cols.ravel(), values.ravel()], -1).astype(np.float32),
        hovertemplate="queries %{y}<br>keys %{x}<br>mean share: %{customdata[2]:.4~g}<br>click, or draw a box "
                      "over blocks: the exact weights"
                      "<extra></extra>")
    return go.Figure([heatmap, clicks], layout=dict(
        title=f"Layer {layer + 1}, head {head + 1}: each block's mean share over {n:,} pieces ({count}×{count} blocks "
              f"of {scan.block})",
        height=height, hoverdistance=-1,
        xaxis=dict(_keys_axis(ticks, spans, "full", title="keys (first piece of each block)"), type="category"),
        yaxis=dict(_rows_axis(ticks, spans, height, title="queries"), type="category"),
        margin=dict(t=60)))


TILE_PIECES = 512  # pieces a side of a region's exact weights drawn at once (a 512 × 512 heatmap is 4.4 MB of figure)


def tile_region(scan, zoom: list[int]) -> tuple[range, range] | None:
    """The blocks a link's or a selection's `zoom` names: [row block, key block] one block, [first row block, first
    key block, last row block, last key block] a region; as (row blocks, key blocks), or None where it names no block
    of this scan, or (in a decoder) only keys after every query of it."""
    blocks = scan.overview.shape[-1]
    if len(zoom) == 2:
        zoom = [*zoom, *zoom]
    if len(zoom) != 4:
        return None
    first_row, first_key, last_row, last_key = zoom
    if not (0 <= first_row <= last_row < blocks and 0 <= first_key <= last_key < blocks):
        return None
    if scan.architecture.causal and first_key > last_row:
        return None
    return range(first_row, last_row + 1), range(first_key, last_key + 1)


def drawn_region(scan, rows: range, cols: range) -> tuple[range, range]:
    """The part of a region of blocks tile_figure draws: its first TILE_PIECES pieces a side."""
    most = max(1, TILE_PIECES // scan.block)
    return range(rows.start, min(rows.stop, rows.start + most)), range(cols.start, min(cols.stop, cols.start + most))


def tile_figure(scan, layer: int, head: int, rows: range, cols: range, *, palette: str = "viridis") -> go.Figure:
    """The exact weights α[q, k] of the row blocks `rows` against the key blocks `cols` (Scan.tile), pieces
    labelled; a region of more than TILE_PIECES pieces a side is drawn from its first (drawn_region)."""
    n, b = len(scan), scan.block
    rows, cols = drawn_region(scan, rows, cols)
    queries, keys = range(rows.start * b, min(n, rows.stop * b)), range(cols.start * b, min(n, cols.stop * b))
    weights = scan.tile(layer, head, queries, keys)  # (r, c)
    names = scan.pieces.labels()
    allowed = None
    if scan.architecture.causal:
        allowed = np.arange(keys.start, keys.stop)[None, :] <= np.arange(queries.start, queries.stop)[:, None]  # (r, c)
    return attention_heatmap(weights, names[queries.start:queries.stop], names[keys.start:keys.stop],
                             row_start=queries.start, col_start=keys.start, scale="sqrt", palette=palette,
                             allowed=allowed, height=640,
                             title=f"Layer {layer + 1}, head {head + 1}: the exact weights of queries "
                                   f"{queries.start}–{queries.stop - 1} on keys {keys.start}–{keys.stop - 1}")


def document_data(scan, layer: int, head: int, query: int) -> dict:
    """What the shaded document (document.mjs) draws: each piece's text (set as text in the browser, never as HTML)
    and the weight the query at `query` gives it (float32, base64), the query marked."""
    n = len(scan)
    row = scan.tile(layer, head, range(query, query + 1), range(0, n))[0]  # (n,)
    text = scan.pieces.text
    spans = scan.pieces.spans
    chunks, start = [], 0
    for i, (a, b) in enumerate(spans):  # each piece's characters, with the spaces before it; a special piece its label
        if b <= a:
            chunks.append(scan.pieces.labels()[i] if scan.pieces.special[i] else "")
            continue
        chunks.append(text[start:b] if b > start else "")  # pieces of one character share it: the first shows it
        start = max(start, b)
    packed = base64.b64encode(np.ascontiguousarray(row, dtype="<f4").tobytes()).decode("ascii")
    return dict(pieces=chunks, weights=packed, query=int(query), top=float(row.max()) or 1.0,
                title=f"The document, each piece shaded by the weight piece #{query} gives it (layer {layer + 1}, "
                      f"head {head + 1}; the darkest: {float(row.max()):.3g})")


def reads_from(scan, query: int | None = None, heads: list[tuple[int, int]] | None = None, top: int = 3,
               past_first: bool = False) -> list[dict]:
    """Where the query at `query` (the last piece when None) reads from: for each head (every head, or `heads`), its
    `top` strongest keys (of those the scan kept; `past_first`: the first piece, a sink, left aside), each with its
    weight and the text around it. Rows sorted by weight, strongest first."""
    n = len(scan)
    query = n - 1 if query is None else query
    text, spans = scan.pieces.text, scan.pieces.spans
    found = []
    for layer, head in heads or [(l, h) for l in range(scan.layers) for h in range(scan.heads)]:
        kept = [(k, w) for k, w in zip(scan.top_keys[layer, head, query], scan.top_weights[layer, head, query])
                if w > 0 and not (past_first and k == 0)]
        for k, weight in kept[:top]:
            a, b = spans[int(k)]
            found.append(dict(layer=layer + 1, head=head + 1, key=int(k), weight=float(weight),
                              piece=scan.pieces.labels()[int(k)],
                              before=text[max(0, a - CONTEXT_CHARS):a], after=text[b:b + CONTEXT_CHARS]))
    return sorted(found, key=lambda row: -row["weight"])
