"""A whole document's scan (attnviz.models.scan.Scan) drawn: every head's overview in the atlas, the chosen head's
overview and the exact tile of the blocks clicked (both drawn in the browser, overview.mjs), the document shaded by one
query's weights, and where the last piece reads from."""

from __future__ import annotations

import base64

import numpy as np

from attnviz.figures.heads import atlas_data
from attnviz.figures.layout import FONT_PX, _short, labels, palette_stops

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
               palette: str = "viridis", font_px: int = FONT_PX) -> dict:
    """The head atlas (atlas.mjs) of every head's overview (L, H, B, B): each block's share of its row's weight, 1 = its
    row's largest; sorted within each layer by `sort` (SORTS), which hover shows."""
    score = head_measure(scan, sort, retrieval)
    b = scan.overview.shape[-1]
    title = (f"All {scan.layers * scan.heads:,} heads over {len(scan):,} pieces: each block of {scan.block} queries' "
             f"mean weight on each block of keys ({b}×{b})")
    return atlas_data(scan.overview, chosen=chosen, scale="row", palette=palette, group=scan.architecture.group,
                      score=score, sort=score is not None, title=title, base=1, font_px=font_px)


def block_name(names: list[str], start: int, stop: int) -> str:
    """Pieces start … stop − 1 as a hover names them: their positions, and the first and last piece quoted (a piece's
    name shows a space as ·)."""
    if stop - start == 1:
        return f"#{start} “{_short(names[start])}”"
    return f"#{start}–{stop - 1}, from “{_short(names[start])}” to “{_short(names[stop - 1])}”"


def packed(values: np.ndarray) -> str:
    """float32 numbers as base64 (little-endian), as the browser's float32Of reads them."""
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f4").tobytes()).decode("ascii")


def overview_data(scan, layer: int, head: int, region: tuple[range, range] | None = None, *,
                  palette: str = "viridis", font_px: int = FONT_PX, max_px: int = 560) -> dict:
    """What the overview (overview.mjs) draws of one head: its overview (B, B), the mean over each block of queries of
    its weight on each block of keys (a row sums to 1), each block's pieces named for hover; with `region` (row blocks,
    key blocks: tile_region), also that region's exact weights (its first TILE_PIECES pieces a side, drawn_region),
    each piece named. Pieces' names are set as text in the browser, never as HTML."""
    values = scan.overview[layer, head]  # (B, B)
    count, n, b = values.shape[0], len(scan), scan.block
    names = labels(scan.pieces.labels())
    data = dict(
        title=f"Layer {layer + 1}, head {head + 1}: each block's mean share over {n:,} pieces ({count}×{count} blocks "
              f"of {b})",
        values=packed(values), count=int(count), block=int(b), n=n, largest=float(values.max()) or 1.0,
        spans=[block_name(names, a * b, min(n, (a + 1) * b)) for a in range(count)],
        causal=bool(scan.architecture.causal), palette=palette_stops(palette), font_px=int(font_px), max_px=int(max_px),
        file=f"attnviz_long_L{layer + 1}H{head + 1}", tile=None)
    if region is not None:
        rows, cols = drawn_region(scan, *region)
        queries, keys = range(rows.start * b, min(n, rows.stop * b)), range(cols.start * b, min(n, cols.stop * b))
        weights = scan.tile(layer, head, queries, keys)  # (r, c)
        data["tile"] = dict(
            title=f"Layer {layer + 1}, head {head + 1}: the exact weights of queries {queries.start}–{queries.stop - 1} "
                  f"on keys {keys.start}–{keys.stop - 1}",
            queries=[queries.start, queries.stop], keys=[keys.start, keys.stop], weights=packed(weights),
            largest=float(weights.max()) or 1.0, row_names=names[queries.start:queries.stop],
            key_names=names[keys.start:keys.stop])
    return data


TILE_PIECES = 512  # pieces a side of a region's exact weights drawn at once (512 × 512 float32: 1.4 MB of base64)


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
    """The part of a region of blocks overview_data's tile holds: its first TILE_PIECES pieces a side."""
    most = max(1, TILE_PIECES // scan.block)
    return range(rows.start, min(rows.stop, rows.start + most)), range(cols.start, min(cols.stop, cols.start + most))


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
    return dict(pieces=chunks, weights=packed(row), query=int(query), largest=float(row.max()) or 1.0,
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
        kept = [(k, w) for k, w in zip(scan.strongest_keys[layer, head, query], scan.strongest_weights[layer, head, query])
                if w > 0 and not (past_first and k == 0)]
        for k, weight in kept[:top]:
            found.append(dict(layer=layer + 1, head=head + 1, key=int(k), weight=float(weight),
                              piece=scan.pieces.labels()[int(k)], **around(scan.pieces, int(k))))
    return sorted(found, key=lambda row: -row["weight"])


def around(pieces, k: int) -> dict[str, str]:
    """The text on either side of piece k ({"before", "after"}, CONTEXT_CHARS each)."""
    a, b = pieces.spans[k]
    return dict(before=pieces.text[max(0, a - CONTEXT_CHARS):a], after=pieces.text[b:b + CONTEXT_CHARS])


def answer_rows(asked, written_labels: list[str], starred=()) -> list[dict]:
    """attnviz.needle.ask's answer as a table's rows, one a written piece (its label in `written_labels`): the piece of
    the text it was copied from, the text around that piece, and the heads that read it ("L19H8", ★ after those of
    `starred` [(layer, head), …], from 0)."""
    labels, rows = asked.pieces.labels(), []
    for piece, copy in zip(written_labels, asked.copies):
        if copy.position is None:
            rows.append({"written": piece, "copied from": "not from the text", "text before": "", "text after": "",
                         "heads": ""})
            continue
        text = around(asked.pieces, copy.position)
        rows.append({"written": piece, "copied from": f"#{copy.position} {labels[copy.position]}",
                     "text before": text["before"], "text after": text["after"],
                     "heads": ", ".join(f"L{l + 1}H{h + 1}" + (" ★" if (l, h) in starred else "") for l, h in copy.heads)})
    return rows


def needle_grid(result, title: str):
    """A pass-key grid (attnviz.needle.NeedleGrid): yellow where the key came back; the hover says each document's
    length and depth, its key and what the model wrote (escaped: plotly reads some HTML in a hover)."""
    import html

    from attnviz.figures.matrices import matrix_heatmap

    figure = matrix_heatmap(result.found.astype(float), [f"{length:,} pieces" for length in result.lengths],
                            [f"depth {d:g}" for d in result.depths], title=title, bounded=True, scale_bar=False,
                            height=260, whole_rows=True)
    said = [[f"{length:,} pieces, the needle at depth {depth:g}<br>key {html.escape(result.keys[a][b])}: "
             f"{'found' if result.found[a, b] else 'not found'}<br>wrote: “{html.escape(result.answers[a][b].strip()[:80])}”"
             for b, depth in enumerate(result.depths)] for a, length in enumerate(result.lengths)]
    figure.data[0].update(text=said, hovertemplate="%{text}<extra></extra>")
    return figure


def census_data(found, chosen: tuple[int, int], font_px: int = FONT_PX, openable: bool = True) -> dict:
    """What the census map (census.mjs) draws: every head's numbers (attnviz.models.census.Census, flat, layer by
    layer), the rules' thresholds it starts from and their statements; the browser classifies and counts again as a
    threshold moves. `openable`: whether a head's cell opens it (a page with a place for its evidence)."""
    CLASSES, CLASS_NAMES = found.CLASSES, found.CLASS_NAMES
    layers, heads = found.sink.shape
    flat = lambda a: [float(v) for v in np.asarray(a, np.float64).ravel()]  # noqa: E731  whole: the same thresholds
    rules = found.rules
    return {"title": f"What each of the {layers * heads:,} heads does over these {found.n:,} pieces",
            "layers": layers, "heads": heads, "kv_group": found.kv_group, "n": found.n, "base": 1,
            "chosen": list(chosen), "font_px": font_px, "classes": list(CLASSES), "openable": openable,
            "names": [CLASS_NAMES[c] for c in CLASSES],
            "fields": {name: flat(getattr(found, name)) for name in ("sink", "recent", "distant", "previous", "local",
                                                                     "entropy")},
            "wu": None if found.wu is None else flat(found.wu),
            "rules": {name: getattr(rules, name) for name in ("sinks", "recent", "local_span", "previous", "local",
                                                             "streaming", "retrieval", "focus", "wu")},
            "statements": rules.statements()}


EVIDENCE_LINES = 12  # the strongest keys and offsets a head's evidence names


def census_evidence(scan, found, layer: int, head: int) -> list[tuple[str, np.ndarray, list[str], str]]:
    """A head's evidence for its class, as three sets of bars (title, values, labels, the table's corner): its
    strongest vertical lines (keys, each a share of all its weight), its strongest slashes (offsets i − j), and
    MInference's patterns' recall at the census's budget (a decoder's; an encoder's weight by distance instead)."""
    PATTERNS, PATTERN_NAMES = found.PATTERNS, found.PATTERN_NAMES
    n = len(scan)
    names = scan.pieces.labels()
    verticals = scan.verticals[layer, head].astype(np.float64)  # (n,)
    slashes = scan.slashes[layer, head].astype(np.float64)  # (2n − 1,)
    total = max(float(slashes.sum()), 1e-30)
    keys = np.argsort(-verticals, kind="stable")[:EVIDENCE_LINES]
    offsets = np.argsort(-slashes, kind="stable")[:EVIDENCE_LINES]
    out = [("Strongest keys (verticals)", (verticals[keys] / total).astype(np.float32),
            [f"#{k} “{_short(names[k])}”" for k in keys], "share \\ key"),
           ("Strongest offsets (slashes)", (slashes[offsets] / total).astype(np.float32),
            [f"i − j = {d - (n - 1)}" for d in offsets], "share \\ offset")]
    if found.recalls:
        budget = found.rules.budget
        out.append((f"Recall at {budget} keys", np.array([found.recalls[p][layer, head] for p in PATTERNS],
                                                                  np.float32),
                    [PATTERN_NAMES[p] for p in PATTERNS], "recall \\ pattern"))
    else:
        shares = np.array([found.sink[layer, head], found.recent[layer, head], found.distant[layer, head]], np.float32)
        out.append(("Where long rows read", shares, ["the first pieces", "the recent window", "beyond"],
                    "share \\ where"))
    return out


def census_evidence_words(found, layer: int, head: int, kind: str) -> str:
    """The head's class and the numbers its rule read, in words (after its name: "Layer 3, head 5: ")."""
    r = found.rules
    article = "an" if kind[0] in "aeiou" else "a"
    near = found.sink[layer, head] + found.recent[layer, head]
    said = (f"{article} {kind} head, {near:.0%} of each long row's weight on the first {r.sinks} pieces and the "
            f"{r.recent} up to the query, {found.distant[layer, head]:.0%} beyond; "
            f"{found.previous[layer, head]:.0%} on the piece before, {found.local[layer, head]:.0%} within "
            f"{r.local_span}; a mean entropy of {found.entropy[layer, head]:.1f} nats")
    if found.wu is not None:
        said += f"; Wu et al.'s retrieval score {found.wu[layer, head]:.2f}"
    if found.recalls:
        best = found.PATTERNS[found.best_pattern[layer, head]]
        said += (f". Its best pattern at {r.budget} keys a query: {found.PATTERN_NAMES[best]}, keeping "
                 f"{found.recalls[best][layer, head]:.0%} of its weight")
    return said + "."


def evidence_bars(values: np.ndarray, labels: list[str], title: str):
    """One set of a head's evidence as bars: each a share of the head's weight (a pattern's recall, of the long rows')."""
    from attnviz.figures.charts import weight_bars

    return weight_bars(values, labels, title=title, axis="recall" if title.startswith("Recall") else "share",
                       whole=True)


def beside_map(values: np.ndarray, rows: list[str], cols: list[str], title: str):
    """One side of a paper's file beside a document (attnviz.models.head_files.beside): a layers × heads map of
    values in [0, 1]."""
    from attnviz.figures.matrices import matrix_heatmap

    return matrix_heatmap(values, rows, cols, title=title, bounded=True, width="half", height=520)
