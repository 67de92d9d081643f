"""A whole document through a model: every head's attention over up to the model's own context, summarised block by
block, exact, without the full matrix.

A run keeps every layer's weights (L, H, n, n), which at SmolLM2's own context of 8,192 pieces would be 67 GiB. A
scan computes each layer's attention one block of queries at a time, keeps what the pages draw of it (each block's
mean weight on each block of keys, the first piece's share, each query's entropy and strongest keys) and, to give any
tile's exact weights later, each layer's queries, keys and each query's log-sum-exp. No n × n matrix is ever held for
more than one block of queries of one layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models import engine
from attnviz.models.pieces import Pieces

BLOCK = 128  # queries a step, and the overview's block of keys
TOP = 8  # each query's strongest keys kept


@dataclass(eq=False)
class Scan:
    """What a scan keeps of a model's attention over `pieces` (n of them). Layers and heads count from 0.

    overview (L, H, B, B), B = ⌈n / block⌉: the mean, over the queries of block a, of Σ_{k in block b} α[q, k]; each
    row sums to 1. sink (L, H): the mean over queries q ≥ 1 of α[q, 0]. entropy (L, H, n): each query's −Σ_k α log α,
    in nats. top_keys, top_weights (L, H, n, top): each query's strongest keys, strongest first. next_logits
    (vocab,): a decoder's logits at the last position, else None. tile(layer, head, queries, keys): exact weights."""

    model: str
    pieces: Pieces
    block: int
    overview: np.ndarray
    sink: np.ndarray
    entropy: np.ndarray
    top_keys: np.ndarray
    top_weights: np.ndarray
    next_logits: np.ndarray | None
    architecture: engine.Architecture
    queries: list[torch.Tensor]  # per layer (H, n, dh) on the CPU, scaled by 1/√dh and turned by position
    keys: list[torch.Tensor]  # per layer (KV, n, dh) on the CPU
    normalisers: np.ndarray  # (L, H, n) float64: each query's log Σ_k e^{score}, over the keys it may read

    @property
    def layers(self) -> int:
        return self.overview.shape[0]

    @property
    def heads(self) -> int:
        return self.overview.shape[1]

    def __len__(self) -> int:
        return len(self.pieces)

    def tile(self, layer: int, head: int, queries: slice | range, keys: slice | range) -> np.ndarray:
        """The exact weights α[q, k] (len(queries), len(keys)) float32 of `head` in `layer`: e^{q·k/√dh − log Σ}, from
        the kept queries, keys and normalisers; 0 where the mask hides a key."""
        n = len(self)
        if not (0 <= layer < self.layers and 0 <= head < self.heads):
            raise ValueError(f"layer must be from 0 to {self.layers - 1} and head from 0 to {self.heads - 1}, "
                             f"got layer {layer}, head {head}.")
        rows, cols = _span(queries, n, "queries"), _span(keys, n, "keys")
        arch = self.architecture
        query = self.queries[layer][head, rows.start:rows.stop].double()  # (r, dh)
        key = self.keys[layer][arch.kv_head(head), cols.start:cols.stop].double()  # (c, dh)
        scores = query @ key.T  # (r, c)
        weights = torch.exp(scores - torch.from_numpy(self.normalisers[layer, head, rows.start:rows.stop])[:, None])
        allowed = engine.allowed_keys(arch, layer, torch.arange(rows.start, rows.stop), cols.stop)  # (r, stop) or None
        if allowed is not None:
            weights = weights.masked_fill(~allowed[:, cols.start:], 0.0)  # (r, c)
        return weights.float().numpy()


def kept_bytes(arch: engine.Architecture, n: int, block: int = BLOCK, top: int = TOP) -> int:
    """The bytes a scan of n pieces keeps: each layer's queries and keys (float32), normalisers (float64), entropy,
    strongest keys and their weights, overview and sink."""
    per_layer = (4 * (arch.heads + arch.kv_heads) * arch.head_dim * n + arch.heads * n * (8 + 4 + 8 * min(top, n))
                 + 4 * arch.heads * (math.ceil(n / block) ** 2 + 1))
    return arch.layers * per_layer


def most_pieces(arch: engine.Architecture, budget: int, block: int = BLOCK, top: int = TOP) -> int:
    """The most pieces (up to the model's context) whose scan keeps at most `budget` bytes."""
    low, high = 1, arch.context
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if kept_bytes(arch, middle, block, top) <= budget else (low, middle - 1)
    return low


def _span(which: slice | range, n: int, what: str) -> range:
    """A contiguous run of positions 0 … n − 1, checked."""
    if isinstance(which, slice):
        if which.step not in (None, 1):
            raise ValueError(f"{what}: a tile is a contiguous block (step 1), not {which}.")
        which = range(*which.indices(n))
    if not isinstance(which, range) or which.step != 1 or len(which) == 0 or which.start < 0 or which.stop > n:
        raise ValueError(f"{what} must be a non-empty run of positions within 0 … {n - 1}, got {which!r}.")
    return which


class Summaries:
    """The scan's summaries of one layer, filled block of queries by block (the block's weights (H, r, k))."""

    def __init__(self, heads: int, n: int, block: int, top: int):
        self.n, self.block, self.top = n, block, min(top, n)
        count = math.ceil(n / block)
        self.overview = np.zeros((heads, count, count), np.float32)  # (H, B, B)
        self.first = np.zeros(heads, np.float64)  # (H,) Σ over queries q ≥ 1 of α[q, 0]
        self.entropy = np.zeros((heads, n), np.float32)  # (H, n)
        self.top_keys = np.zeros((heads, n, self.top), np.int32)  # (H, n, top)
        self.top_weights = np.zeros((heads, n, self.top), np.float32)  # (H, n, top)

    def add(self, start: int, weights: torch.Tensor, entropy: torch.Tensor) -> None:
        heads, r, k = weights.shape
        a = start // self.block
        padded = torch.nn.functional.pad(weights, (0, -k % self.block))  # (H, r, ⌈k / block⌉·block)
        by_block = padded.view(heads, r, -1, self.block).sum(-1).mean(1)  # (H, ⌈k / block⌉)
        self.overview[:, a, : by_block.shape[-1]] = by_block.float().cpu().numpy()
        rows = slice(start, start + r)
        first = weights[:, 1:, 0] if start == 0 else weights[:, :, 0]  # (H, r or r − 1): queries q ≥ 1
        self.first += first.sum(-1).double().cpu().numpy()
        self.entropy[:, rows] = entropy.float().cpu().numpy()  # (H, r)
        best = torch.topk(weights, min(self.top, k), dim=-1)  # (H, r, top)
        self.top_keys[:, rows, : best.indices.shape[-1]] = best.indices.cpu().numpy()
        self.top_weights[:, rows, : best.values.shape[-1]] = best.values.float().cpu().numpy()

    @property
    def sink(self) -> np.ndarray:
        return (self.first / max(self.n - 1, 1)).astype(np.float32)  # (H,)


def softmax_and_normaliser(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scores) over the last dimension, and each row's log Σ e^{score} (its log-sum-exp, float64: a tile's
    weight is e^{score − it}, and float32 rounding of a sum near 300 would move the weight by 3e-5), in one pass."""
    top = scores.amax(-1, keepdim=True)  # (..., 1)
    weights = torch.exp(scores - top)  # (..., k)
    total = weights.sum(-1, keepdim=True)  # (..., 1)
    weights /= total
    return weights, (top.double() + torch.log(total.double())).squeeze(-1)  # (..., k), (...)


def attend_blocks(arch: engine.Architecture, index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  positions: torch.Tensor, size: int, visit=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `index`'s attention of queries (H, n, dh), already scaled by 1/√dh, over keys and values (KV, n, dh), taken
    `size` queries at a time: (αV (H, n, dh), each query's log-sum-exp (H, n)). `visit(start, weights, scores,
    normaliser)` sees each block's weights and scores (H, r, k), k the keys it may read up to its last query, before
    they are dropped."""
    heads, n, dh = query.shape
    group = heads // arch.kv_heads
    outputs, normalisers = [], []
    for start in range(0, n, size):
        stop = min(n, start + size)
        seen = stop if arch.causal else n  # the keys any query of the block may read
        r = stop - start
        stacked = query[:, start:stop].reshape(arch.kv_heads, group * r, dh)  # (KV, G·r, dh)
        scores = (stacked @ key[:, :seen].transpose(-2, -1)).view(heads, r, seen)  # (H, r, seen)
        allowed = engine.allowed_keys(arch, index, positions[start:stop], seen)  # (r, seen) or None
        if allowed is not None:  # a finite floor, not −∞: its weight is exactly 0, and 0 · floor is 0 in Σ α s
            scores.masked_fill_(~allowed, torch.finfo(scores.dtype).min)  # (H, r, seen)
        weights, normaliser = softmax_and_normaliser(scores)  # (H, r, seen), (H, r)
        normalisers.append(normaliser)
        if visit is not None:
            visit(start, weights, scores, normaliser)
        outputs.append(engine.grouped_values(weights, value[:, :seen]))  # (H, r, dh)
    return torch.cat(outputs, 1), torch.cat(normalisers, 1)  # (H, n, dh), (H, n)


def blocked_layer(arch: engine.Architecture, block: engine.Block, index: int, x: torch.Tensor, positions: torch.Tensor,
                  size: int, visit=None, intervention: engine.Intervention | None = None):
    """One layer over inputs x (n, d), its attention taken `size` queries at a time (attend_blocks): (x after the
    layer, the queries (H, n, dh) scaled by 1/√dh, the keys and values (KV, n, dh), the normalisers (H, n)).
    `intervention`'s head_output, where given, changes the heads' outputs before W_o (an ablation)."""
    h = x if arch.post_norm else block.attention_norm(x)  # (n, d)
    query, key, value = engine.project(arch, block, h, positions)  # (H, n, dh), (KV, n, dh) × 2
    query = query / math.sqrt(query.shape[-1])  # (H, n, dh) as the scaled-dot scorer scales it
    output, normalisers = attend_blocks(arch, index, query, key, value, positions, size, visit)  # (H, n, dh), (H, n)
    if intervention is not None:
        changed = intervention.head_output(index, output)  # (H, n, dh) or None
        output = output if changed is None else changed
    return engine.after_attention(arch, block, x, output), query, key, value, normalisers


def scan_layer(arch: engine.Architecture, block: engine.Block, index: int, x: torch.Tensor, positions: torch.Tensor,
               size: int, summaries: Summaries, on_block=None):
    """One layer over inputs x (n, d) (blocked_layer), each block's weights summarised: (x after the layer, the
    queries (H, n, dh) scaled by 1/√dh, the keys (KV, n, dh), the normalisers (H, n))."""

    def visit(start, weights, scores, normaliser):
        entropy = normaliser.float() - (weights * scores).sum(-1)  # (H, r): −Σ α log α = log Z − Σ α s
        summaries.add(start, weights, entropy)
        if on_block is not None:
            on_block()

    x, query, key, _, normalisers = blocked_layer(arch, block, index, x, positions, size, visit)
    return x, query, key, normalisers


def scan(arch: engine.Architecture, weights: engine.Weights, pieces: Pieces, name: str, *, block: int = BLOCK,
         top: int = TOP, progress=None) -> Scan:
    """Every head's attention over `pieces`, summarised (Scan). `progress(done, total)` hears of each block of
    queries of each layer."""
    device = weights.embeddings.device
    cpu = torch.device("cpu")
    n = len(pieces.ids)
    count = math.ceil(n / block)
    total, done = arch.layers * count, 0

    def step():
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    found, queries, keys, normalisers = [], [], [], []  # per layer
    with torch.inference_mode():
        positions = torch.arange(n, device=device)  # (n,)
        x = engine.embed(arch, weights, torch.tensor(pieces.ids, device=device), positions)  # (n, d)
        for i, layer_weights in enumerate(weights.blocks):
            found.append(Summaries(arch.heads, n, block, top))
            x, query, key, normaliser = scan_layer(arch, layer_weights, i, x, positions, block, found[-1], step)
            queries.append(query.float().to(cpu))
            keys.append(key.float().to(cpu))
            normalisers.append(normaliser.cpu().numpy())
        next_logits = engine.logits(weights, x[-1:])[0].float().cpu().numpy() if arch.causal else None  # (vocab,)

    def stacked(what: str) -> np.ndarray:  # (L, ...) of each layer's summary
        return np.stack([getattr(layer, what) for layer in found])

    return Scan(name, pieces, block, stacked("overview"), stacked("sink"), stacked("entropy"), stacked("top_keys"),
                stacked("top_weights"), next_logits, arch, queries, keys, np.stack(normalisers))
