"""What the generation timeline draws (attnviz/browser/timeline.mjs): every step of a model's writing (attnviz.models.generate) sent
once, so that scrubbing and play run in the page with no round trip."""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np

from attnviz.figures.layout import FONT_PX, _finite, palette_stops


WHOLE_LIMIT = 600_000  # weights sent at most for the whole lower triangle of every head (1.6 MB as base64 uint16)


def packed_rows(weights: np.ndarray, first_row: int, causal: bool = True) -> str:
    """weights (H, t, m) of one layer, rows first_row … t − 1 of each head over keys 0 … i where the layer is causal
    (the upper triangle is 0 by the mask, so it is not sent), else over every key, as uint16 (weight × 65535, error
    ≤ 7.7e-6), base64: head after head, row after row."""
    t, m = weights.shape[-2:]
    rows, keys = np.tril_indices(t) if causal else np.indices((t, m)).reshape(2, -1)
    kept = rows >= first_row
    cells = _finite(weights)[:, rows[kept], keys[kept]]  # (H, cells) row-major
    quantised = np.round(np.clip(cells, 0.0, 1.0) * 65535).astype("<u2")  # (H, cells)
    return base64.b64encode(quantised.tobytes()).decode()


def timeline_data(generation, labels: list[str], piece_labels, layer: int, *, head: int = 0, font_px: int = FONT_PX,
                  title: str = "", sampler: str = "", palette: str = "viridis", kind: str = "self", base: int = 1) -> dict:
    """The timeline's data: the pieces' `labels` (the prompt's, then the written ones), `layer`'s weights (from 0) as
    lower triangles (every row, or where that passes WHOLE_LIMIT numbers, the rows the steps computed), and each
    step's offer. Step s reads pieces 0 … P + s − 1 (P the prompt's pieces): its query is
    the last of them, and it writes piece P + s. `piece_labels(ids)` labels the offered pieces; `head` (from 0) is
    shown first. An encoder–decoder's generation shows `kind` "decoder" (its causal self-attention) or "cross" (each
    written piece's row over the source pieces, labelled `keys`)."""
    cross = kind == "cross"
    attention = generation.run.attention.get(kind) if kind != "self" else generation.run.main
    weights = attention.weights[layer]  # (H, n, n), or (H, t, source) across
    steps = []
    for step in generation.steps:
        kept = set(int(i) for i in step.kept)
        offered = [int(i) for i in step.offered]
        steps.append(dict(offered=piece_labels(offered), probs=[round(float(p), 4) for p in _finite(step.probs)],
                          kept=[i in kept for i in offered], kept_count=len(kept),
                          chosen_offered=offered.index(step.chosen) if step.chosen in offered else -1, p_chosen=round(float(step.p_chosen), 4),
                          p_drawn=round(float(step.p_drawn), 4)))
    heads, n, m = weights.shape
    whole = heads * n * m if cross else heads * n * (n + 1) // 2
    first_row = 0 if whole <= WHOLE_LIMIT else generation.prompt - 1  # else the steps' rows only
    rows = packed_rows(weights, first_row, causal=not cross)
    packed = json.dumps([labels, steps, layer], separators=(",", ":"))
    version = hashlib.blake2b((packed + rows).encode(), digest_size=12).hexdigest()
    return dict(version=version, tokens=[str(t) for t in labels], prompt=int(generation.prompt), layer=int(layer),
                heads=int(heads), head=int(head), weights=rows, first_row=int(first_row), steps=steps, base=int(base), font_px=font_px,
                stopped=generation.stopped, sampler=sampler, palette=palette_stops(palette), cross=cross,
                keys=attention.keys.labels() if cross else None,
                title=title or f"Writing {len(steps)} pieces, layer {layer + base}")


def payload_bytes(data: dict) -> int:
    """The bytes of the timeline's data as the page receives it (JSON)."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
