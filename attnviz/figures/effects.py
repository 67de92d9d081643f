"""What the effects panels draw (attnviz.effects): the routes graph's data for the browser (attnviz/browser/routes.mjs) and the
importance measures as a matrix of final numbers."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from attnviz.figures.heads import atlas_data
from attnviz.figures.layout import FONT_PX, _finite
from attnviz.figures.matrices import matrix_data

ROUTE_FLOOR = 0.01  # edges below this share are not sent: the slider starts there
ROUTE_EDGES = 20_000  # at most this many edges are sent (the floor rises until they fit)
# The thresholds a link may hold: 0.01 … 0.5 on a log scale (a step of about 10 %), where shares cluster near the floor.
ROUTE_THRESHOLDS = tuple(float(f"{t:.3g}") for t in np.geomspace(ROUTE_FLOOR, 0.5, 41))


def route_steps(shares: np.ndarray, floor: float) -> list[float]:
    """The slider's stops for these shares (L, n, n): the thresholds from the floor up to the first one above the
    largest share between two different pieces. Past it only each piece's own stream is left, so the slider's
    travel spans the thresholds that change the drawing, and its last stop shows that single line."""
    n = shares.shape[-1]
    between = shares[:, ~np.eye(n, dtype=bool)] if n > 1 else np.zeros(1)  # (L, n·(n − 1)) edges j → i, j ≠ i
    top = float(between.max(initial=0.0))
    stops = [t for t in ROUTE_THRESHOLDS if floor <= t <= top]
    above = next((t for t in ROUTE_THRESHOLDS if t > max(top, floor)), ROUTE_THRESHOLDS[-1])
    return sorted(set([max(floor, ROUTE_FLOOR), *stops, above]))


def routes_data(pieces: np.ndarray, attention: np.ndarray, residual: np.ndarray, tokens: list[str], *,
                threshold: float, chosen: tuple[int, int], start: int | None = None, font_px: int = FONT_PX,
                title: str = "") -> dict:
    """What routes.mjs draws: every piece → piece edge [layer, source, target, share, head] of `pieces` (L, n, n) above
    the floor, head the one carrying most of it (attention (L, n, H, n)) or -1 where the residual stream carries most;
    `chosen` (layer, head) from 0 is drawn apart; layers and heads are labelled from 1."""
    layers, n = pieces.shape[:2]
    floor = ROUTE_FLOOR
    shares = _finite(pieces)
    while (shares >= floor).sum() > ROUTE_EDGES:
        floor *= 1.5
    layer, target, source = np.nonzero(shares >= floor)
    carried = attention[layer, target, :, source]  # (E, H)
    by_residual = (source == target) & (residual[layer, target] >= carried.sum(-1))
    head = np.where(by_residual, -1, carried.argmax(-1))
    edges = [[int(l), int(j), int(i), round(float(shares[l, i, j]), 4), int(h)]
             for l, i, j, h in zip(layer, target, source, head)]
    packed = json.dumps(edges, separators=(",", ":"))
    version = hashlib.blake2b((packed + "\x00".join(tokens)).encode(), digest_size=12).hexdigest()
    return dict(version=version, layers=int(layers), n=int(n), tokens=[str(t) for t in tokens], edges=edges,
                threshold=float(max(threshold, floor)), start=int(n - 1 if start is None else start),
                steps=route_steps(shares, floor),
                chosen=[int(c) for c in chosen], base=1, font_px=font_px, floor=floor,
                title=title or f"Routes to “{tokens[-1]}” through {layers} layers")


def importance_data(measures: dict[str, np.ndarray], names: dict[str, str], tokens: list[str], *, title: str,
                    font_px: int = FONT_PX) -> tuple[dict, np.ndarray]:
    """The importance measures as rows over the pieces, each divided by its largest |value| so that rows of different
    units share one colour scale: (the browser matrix's data, the (measures, n) values drawn)."""
    rows = np.stack([_finite(np.asarray(v, np.float64)) for v in measures.values()])  # (M, n)
    top = np.abs(rows).max(1, keepdims=True)
    drawn = (rows / np.where(top > 0, top, 1.0)).astype(np.float32)  # (M, n) in −1 … 1
    data = matrix_data(drawn, [names[k] for k in measures], tokens, title=title, what="÷ its row's largest |value|",
                       axes=("measure", "piece"), scale="max", font_px=font_px, height=80 + 34 * len(measures),
                       file="attnviz_importance", whole_rows=True)
    return data, drawn


def effect_atlas_data(effects: np.ndarray, chosen: tuple[int, int], *, decoder: bool, removed: str, piece: str = "",
                      base: int = 1, **style) -> tuple[dict, str]:
    """The head atlas of every head removed in turn (attnviz.effects.every_head), for the page and the notebook alike:
    one square a head, coloured by its effect (L, H): a decoder's Δ log p on a diverging scale centred on 0, an
    encoder's 1 − cos at `piece` from 0 to its largest. `removed` says how a head was removed (effects.HOWS), `base`
    whether heads count from 1 (the app) or 0 (the library); `style` goes to atlas_data (font_px, palette). Returns
    the data and the measure's name."""
    what = "effect on the next piece: Δ log p" if decoder else f"effect on “{piece}”: 1 − cos"
    blank = np.zeros((*effects.shape, 1, 1), np.float32)  # one square a head: the thumbnails are its colour
    data = atlas_data(blank, chosen=chosen, score=(what, effects), colour="measure", signed=decoder, base=base,
                      title=f"Every head removed in turn ({removed}): {what} (layers down, heads across, from {base})",
                      **style)
    return data, what
