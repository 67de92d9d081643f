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

from attnviz.models import engine, flash, fused
from attnviz._deprecated import warn
from attnviz.cache import memory_bound
from attnviz.models.pieces import Pieces

SCAN_MEMORY_SETTING = "ATTNVIZ_SCAN_MEMORY"  # or `attnviz --scan-memory`: what a server's scan may keep
REQUEST_BYTES = 2**30  # by default a scan grows the server by at most this much: one request's share
FREE_SHARE = 0.5  # and by at most this share of the memory the machine had free when the server started
BLOCK = 128  # queries a step, and the overview's block of keys
STRONGEST = 8  # each query's strongest keys kept
CHUNK = 64  # keys a chunk, in the search for each query's strongest keys
FLOOR = -80.0  # on a CPU, s′ = s − its row's largest is taken as at least this: e^{-80} ≈ 2e-35, so that no e^{s′} is
# subnormal, and no input of exp lies past its fast range: either made those passes many times slower there
GPU_QUERIES = 512  # queries a step on a GPU, a multiple of the block: larger products keep it busy (bench_scan_gpu.py)


@dataclass(eq=False)
class Scan:
    """What a scan keeps of a model's attention over `pieces` (n of them). Layers and heads count from 0.

    overview (L, H, B, B), B = ⌈n / block⌉: the mean, over the queries of block a, of Σ_{k in block b} α[q, k]; each
    row sums to 1 (to 1 − the share of a learned sink, gpt-oss's). sink (L, H): the mean over queries q ≥ 1 of α[q, 0].
    entropy (L, H, n): each query's −Σ_k α log α, in nats (a learned sink counted as one more outcome). strongest_keys,
    strongest_weights (L, H, n, s): each query's s strongest keys (int16 up to 32,768 pieces: key_type), strongest first.
    verticals (L, H, n), slashes (L, H, 2n − 1): each key's weight and each offset's, summed over the queries.
    next_logits (vocab,): a decoder's logits at the last position, else None. tile(layer, head, queries, keys): exact
    weights."""

    model: str
    pieces: Pieces
    block: int
    overview: np.ndarray
    sink: np.ndarray
    entropy: np.ndarray
    strongest_keys: np.ndarray
    strongest_weights: np.ndarray
    next_logits: np.ndarray | None
    architecture: engine.Architecture
    queries: list[torch.Tensor]  # per layer (H, n, dh) on the CPU, scaled by 1/√dh and turned by position
    keys: list[torch.Tensor]  # per layer (KV, n, dh) on the CPU
    normalisers: np.ndarray  # (L, H, n) float64: each query's log Σ_k e^{score}, over the keys it may read
    relative: list[tuple[torch.Tensor | None, torch.Tensor | None]] | None = None  # DeBERTa: each layer's position keys
    # and queries (2k, H·dh) on the CPU, for its scores' relative terms
    verticals: np.ndarray | None = None  # (L, H, n) float32: Σ_q α[q, k], each key's weight summed over the queries
    slashes: np.ndarray | None = None  # (L, H, 2n − 1) float32: Σ_q α[q, q − d], each offset d's, at d + n − 1

    @property
    def layers(self) -> int:
        return self.overview.shape[0]

    @property
    def top_keys(self) -> np.ndarray:
        warn("Scan.top_keys", "Scan.strongest_keys")
        return self.strongest_keys

    @property
    def top_weights(self) -> np.ndarray:
        warn("Scan.top_weights", "Scan.strongest_weights")
        return self.strongest_weights

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
        if self.relative is not None:  # DeBERTa's two relative terms
            position_key, position_query = (None if t is None else engine.of_head(t, head, arch.head_dim).double()
                                            for t in self.relative[layer])
            scores += engine.relative_terms(arch, position_key, position_query, query[None], key[None],
                                            torch.arange(rows.start, rows.stop), torch.arange(cols.start, cols.stop),
                                            scaled=True)[0]  # (r, c)
        scores = engine.shaped(arch, scores, torch.arange(rows.start, rows.stop), head, cols.start)  # (r, c)
        weights = torch.exp(scores - torch.from_numpy(self.normalisers[layer, head, rows.start:rows.stop])[:, None])
        allowed = engine.allowed_keys(arch, layer, torch.arange(rows.start, rows.stop), cols.stop)  # (r, stop) or None
        if allowed is not None:
            weights = weights.masked_fill(~allowed[:, cols.start:], 0.0)  # (r, c)
        return weights.float().numpy()


@dataclass(frozen=True)
class ScanBound:
    """How many pieces a server's scan may read. By default, the model's whole context where a scan of it grows the
    server by at most REQUEST_BYTES and FREE_SHARE of the memory free at its start (peak_bytes), else the most
    pieces that do; a bound the server's owner sets is what a scan may keep (`kept` bytes, kept_bytes), or none."""

    kept: int | None  # bytes, the owner's bound; None: the whole context (unless `default`)
    words: str  # where the bound comes from, in words
    default: bool = False

    def pieces(self, arch: engine.Architecture, free: int | None) -> int:
        """The most pieces of `arch`'s context a scan may read, `free` the bytes free at the server's start (None:
        unknown, one request's share alone)."""
        if self.default:
            grown = REQUEST_BYTES if free is None else min(REQUEST_BYTES, int(free * FREE_SHARE))
            return _most(arch, lambda n: peak_bytes(arch, n) <= grown)
        return arch.context if self.kept is None else most_pieces(arch, self.kept)

    def limit_words(self, free: int | None) -> str:
        """Why a scan stops short of the context, in words."""
        if not self.default:
            return f"this server keeps a scan within {self.words}"
        room = "" if free is None or free * FREE_SHARE >= REQUEST_BYTES else (
            f", and by at most half of the {free / 2**30:.1f} GiB this machine had free when the server started")
        return f"a scan of more would grow this server by more than 1 GiB{room}"


DEFAULT_BOUND = ScanBound(None, "the default: the model's context where a scan of it grows the server by at most "
                                "1 GiB", default=True)


def scan_memory(argv: list[str], environ: dict[str, str]) -> ScanBound:
    """The server's ScanBound, from `--scan-memory SIZE` in argv (the attnviz command passes it), else
    ATTNVIZ_SCAN_MEMORY, else DEFAULT_BOUND. SIZE: what a scan may keep ('2GiB', '800MB', bytes), or 'all'.
    ValueError, in words, for anything else."""
    given = [value for flag, value in zip(argv, argv[1:]) if flag == "--scan-memory"]
    where, text = (("--scan-memory", given[-1]) if given else
                   (SCAN_MEMORY_SETTING, environ[SCAN_MEMORY_SETTING]) if environ.get(SCAN_MEMORY_SETTING, "").strip() else
                   (None, None))
    if where is None:
        return DEFAULT_BOUND
    try:
        size = memory_bound(text)
    except ValueError as error:
        raise ValueError(f"{where} {error}.") from None
    return ScanBound(size, f"{where} {'all' if size is None else text.strip()}")


def key_type(n: int) -> torch.dtype:
    """The type of a scan's strongest keys over n pieces: 16 bits where they fit (a scan of SmolLM2's 8,192 pieces
    keeps 34 MiB less than with 32)."""
    return torch.int16 if n <= 2**15 else torch.int32


def kept_bytes(arch: engine.Architecture, n: int, block: int = BLOCK, strongest: int = STRONGEST) -> int:
    """The bytes a scan of n pieces keeps: each layer's queries and keys (float32), normalisers (float64), entropy,
    strongest keys and their weights, overview, sink, verticals and slashes."""
    key_bytes = key_type(n).itemsize
    per_layer = (4 * (arch.heads + arch.kv_heads) * arch.head_dim * n
                 + arch.heads * n * (8 + 4 + (4 + key_bytes) * min(strongest, n))
                 + 4 * arch.heads * (math.ceil(n / block) ** 2 + 1)
                 + 4 * arch.heads * (n + 2 * n - 1))  # the verticals and slashes
    return arch.layers * per_layer


def working_bytes(arch: engine.Architecture, n: int, block: int = BLOCK) -> int:
    """The bytes a CPU scan of n pieces works in beside what it keeps, at its largest (in its last layer): the
    block's scores (H × block × n), the layer's input and output (n × d each), the heads' outputs and the queries as
    projected, before they are scaled (H × n × dh each), float32. Measured (bench_scan_memory.py): SmolLM2 at 8,192
    pieces peaked 100 MiB over what it keeps; this says 108 MiB."""
    return 4 * n * (arch.heads * block + 2 * arch.d_model + 2 * arch.heads * arch.head_dim)


def peak_bytes(arch: engine.Architecture, n: int, block: int = BLOCK, strongest: int = STRONGEST) -> int:
    """How much a scan of n pieces grows the process by at its largest: what it keeps and what it works in."""
    return kept_bytes(arch, n, block, strongest) + working_bytes(arch, n, block)


def most_pieces(arch: engine.Architecture, budget: int, block: int = BLOCK, strongest: int = STRONGEST) -> int:
    """The most pieces (up to the model's context) whose scan keeps at most `budget` bytes."""
    return _most(arch, lambda n: kept_bytes(arch, n, block, strongest) <= budget)


def _most(arch: engine.Architecture, fits) -> int:
    """The most pieces n, 1 … the model's context, for which fits(n) (which holds for fewer when it holds for n)."""
    low, high = 1, arch.context
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
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
    """The scan's summaries of one layer, filled block of queries by block: first each query's strongest keys, from
    the block's scores (strongest), then the rest from its weights (add). A block of queries may hold several blocks of
    the overview. They stay on the scan's device until the layer is done: a copy to the CPU a block would make the CPU
    wait for the GPU block after block."""

    def __init__(self, heads: int, n: int, block: int, strongest: int, device: torch.device | str = "cpu",
                 into: dict[str, np.ndarray] | None = None):
        """`into`, on the CPU: the scan's arrays of this layer (overview, entropy, strongest_keys, strongest_weights), zeroed, which
        the summaries fill in place rather than in tensors of their own that the scan would stack at its end (a second
        copy of them all at once)."""
        self.n, self.block, self.keys_kept = n, block, min(strongest, n)
        count = math.ceil(n / block)
        shapes = {"overview": ((heads, count, count), torch.float32), "entropy": ((heads, n), torch.float32),
                  "strongest_keys": ((heads, n, self.keys_kept), key_type(n)), "strongest_weights": ((heads, n, self.keys_kept), torch.float32)}
        for name, (shape, dtype) in shapes.items():  # (H, B, B), (H, n), (H, n, s) × 2
            setattr(self, name, torch.from_numpy(into[name]) if into is not None else
                    torch.zeros(shape, dtype=dtype, device=device))
        self.first = torch.zeros(heads, dtype=torch.float64, device=device)  # (H,) Σ over queries q ≥ 1 of α[q, 0]
        # (H, n + pad) Σ_q α[q, k] by key, the verticals; (H, 2n − 1) Σ_q α[q, q − d] by offset d at d + n − 1, the
        # slashes: float64 while the layer's blocks add to them
        self.verticals = torch.zeros((heads, n + (-n % CHUNK)), dtype=torch.float64, device=device)
        self.slashes = torch.zeros((heads, 2 * n - 1), dtype=torch.float64, device=device)
        self._strongest_scores = None  # (H, r, s): the block's strongest scores, until its normalisers are known

    def on_host(self) -> "Summaries":
        """The summaries queued for the CPU (engine.to_host); numpy arrays once `numpy` is called after
        engine.copied. The verticals lose their padding keys, and they and the slashes become float32."""
        self.verticals = self.verticals[:, : self.n]
        for name in ("verticals", "slashes"):
            setattr(self, name, engine.to_host(getattr(self, name), torch.float32))
        for name in ("overview", "first", "entropy", "strongest_keys", "strongest_weights"):
            setattr(self, name, engine.to_host(getattr(self, name)))
        return self

    def numpy(self) -> "Summaries":
        for name in ("overview", "first", "entropy", "strongest_keys", "strongest_weights", "verticals", "slashes"):
            setattr(self, name, getattr(self, name).numpy())
        return self

    def lines(self, start: int, exps: torch.Tensor, inverse: torch.Tensor) -> None:
        """Adds a block's weights α = exps · inverse, exps (H, r, k) of queries start … start + r − 1 and inverse
        (H, r, 1), into the verticals (by key) and the slashes (by offset i − j). A slash is a diagonal: each row i is
        copied r − 1 − i places to the right into a buffer of rows k + r long, where every column then holds one
        offset, start + r − 1 − t in column t, and the buffer's weighted column sums are the block's slashes."""
        heads, r, k = exps.shape
        rows = inverse.transpose(-2, -1)  # (H, 1, r)
        self.verticals[:, :k] += (rows @ exps)[:, 0]  # (H, k)
        moved = exps.new_zeros(heads * r * (k + r))  # (H·r·(k + r),)
        torch.as_strided(moved, (heads, r, k), (r * (k + r), k + r - 1, 1), r - 1).copy_(exps)  # row i moved r − 1 − i
        by_column = (rows @ moved.view(heads, r, k + r))[:, 0]  # (H, k + r): column t, offset start + r − 1 − t
        last = start + r - 1 + self.n - 1  # column 0's place in the slashes
        first, final = max(0, last - (2 * self.n - 2)), min(k + r - 1, last)  # the columns whose offsets exist
        self.slashes[:, last - final: last - first + 1] += by_column[:, first: final + 1].flip(-1)  # (H, ·)

    def strongest(self, start: int, scores: torch.Tensor) -> torch.Tensor:
        """Each query's `keys_kept` strongest keys from the block's scores (H, r, k), k a multiple of CHUNK; returns
        each row's largest score (H, r, 1), the softmax's shift. Exact without a top-k over all k keys: a key among a
        row's s strongest lies in one of the s chunks of CHUNK keys with the largest maxima."""
        heads, r, k = scores.shape
        count = k // CHUNK
        chunks = scores.view(heads, r, count, CHUNK).amax(-1).topk(min(self.keys_kept, count), -1).indices  # (H, r, t)
        rows = torch.arange(heads * r, device=scores.device).view(heads, r, 1) * count  # (H, r, 1) each row's first chunk
        candidates = scores.view(-1, CHUNK).index_select(0, (chunks + rows).view(-1))  # (H·r·t, CHUNK)
        best = candidates.view(heads, r, -1).topk(min(self.keys_kept, chunks.shape[-1] * CHUNK), -1)  # (H, r, s′ ≤ s)
        keys = chunks.gather(-1, best.indices // CHUNK) * CHUNK + best.indices % CHUNK  # (H, r, s′)
        return self.note(start, best.values, keys)

    def note(self, start: int, best: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Keeps a block's strongest scores (H, r, s′) and their keys, strongest first; returns each row's largest
        (H, r, 1)."""
        self.strongest_keys[:, start:start + best.shape[1], : keys.shape[-1]] = keys
        self._strongest_scores = best
        return best[..., :1]  # (H, r, 1)

    def add(self, start: int, exps: torch.Tensor, sums: torch.Tensor, total: torch.Tensor, moment: torch.Tensor,
            normaliser: torch.Tensor, sink: torch.Tensor | None = None) -> None:
        """The rest from the block's e^{s′} (H, r, k), s′ = s − each row's largest, their sums by chunk of CHUNK keys
        (H, r, k / CHUNK), each row's Z′ = Σ e^{s′} (H, r, 1), so that α = e^{s′} / Z′, Σ e^{s′} s′ (H, r) and its
        log-sum-exp (H, r). A learned sink's s′ (H, r, 1), where the model has one, is in Z′; the entropy counts it as
        one more outcome."""
        heads, r = exps.shape[:2]
        rows = slice(start, start + r)
        inverse = 1.0 / total  # (H, r, 1)
        entropy = torch.log(total[..., 0]) - moment * inverse[..., 0]  # (H, r): log Z′ − Σ α s′
        if sink is not None:
            entropy -= (torch.exp(sink) * sink * inverse)[..., 0]  # (H, r): the sink's α s′ too
        self.entropy[:, rows] = entropy
        strongest = torch.exp(self._strongest_scores.double() - normaliser[..., None])  # (H, r, s′)
        self.strongest_weights[:, rows, : strongest.shape[-1]] = strongest
        count = self.overview.shape[-1]
        # the overview's blocks of keys from the chunks' sums where a block is whole chunks, else from each key's e^{s′}
        summed, width = (sums, self.block // CHUNK) if self.block % CHUNK == 0 else (exps, self.block)
        for a in range(0, r, self.block):  # each block of the overview's queries in this block of queries
            b = min(r, a + self.block)
            shares = (inverse[:, a:b].transpose(-2, -1) @ summed[:, a:b])[:, 0]  # (H, k / CHUNK or k): Σ_q α by column
            padded = torch.nn.functional.pad(shares, (0, -shares.shape[-1] % width))  # (H, whole blocks · width)
            by_block = padded.view(heads, -1, width).sum(-1)  # (H, ⌈k / block⌉)
            self.overview[:, (start + a) // self.block, : by_block.shape[-1]] = by_block[:, :count] / (b - a)
        first = (exps[..., 0] * inverse[..., 0])[:, 1 if start == 0 else 0:]  # (H, r or r − 1): α[q, 0], q ≥ 1
        self.first += first.sum(-1)

    @property
    def sink(self) -> np.ndarray:
        return (self.first / max(self.n - 1, 1)).astype(np.float32)  # (H,), once numpy


def hide(arch: engine.Architecture, index: int, start: int, rows: torch.Tensor, scores: torch.Tensor, n: int,
         floor: float | None = None) -> None:
    """Sets to `floor`, in place, the entries (H, r, k) of the keys that the block of queries at positions `rows` (r,),
    starting at column `start`, may not read (those the mask hides and the padding keys at n and after): their scores
    to the dtype's lowest finite number (the default), or their e^{s′} to 0. Without a window, only the block's own
    columns can lie ahead of a query."""
    floor = torch.finfo(scores.dtype).min if floor is None else floor
    if not arch.causal:
        scores[..., n:] = floor
        allowed = engine.allowed_keys(arch, index, rows, scores.shape[-1])  # (r, k), or None without a window
        if allowed is not None:
            scores.masked_fill_(~allowed, floor)
        return
    first = engine.rules.keys(arch, index).first_hidden(start)
    allowed = engine.allowed_keys(arch, index, rows, scores.shape[-1], first)  # (r, k − first)
    scores[..., first:].masked_fill_(~allowed, floor)  # (H, r, k − first)


def attend_blocks(arch: engine.Architecture, index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  positions: torch.Tensor, size: int, visit=None, summaries: Summaries | None = None,
                  params: engine.LayerWeights | None = None,
                  intervention: engine.Intervention | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `index`'s attention of queries (H, n, dh), already scaled by 1/√dh, over keys and values (KV, n, dh), taken
    `size` queries at a time: (αV (H, n, dh), each query's log-sum-exp (H, n)). `summaries`, where given, are filled
    block by block; `visit(start, exps, total)` sees each block's e^{s − max} (H, r, k), k the keys it may read up to its
    last query, and their sums Z′ (H, r, 1), the weights being α = exps / Z′, before they are dropped. Where the
    layer's `params` have them, a learned sink (H,) (gpt-oss) joins each Z′ as one more e^{s′}, with no value, so the
    weights sum to 1 − its share, and DeBERTa's relative terms join each score.

    The keys are padded to whole chunks of CHUNK (weight 0), and every block's scores and exponentials are written into
    the same two buffers: a fresh H × size × n tensor a block costs more in page faults than the exponential does. On a
    CPU, each block's passes over its scores (the strongest keys, the exponentials and their sums) run in one compiled
    kernel where it can be built (fused.py), else one torch kernel a pass. On a GPU, a scan's layer (summaries, no
    visit, no intervention) is one fused Triton kernel where flash.declined finds nothing against it (flash.py)."""
    heads, n, dh = query.shape
    group = heads // arch.kv_heads
    sink = None if params is None else params.sink  # (H,) or None
    if (summaries is not None and visit is None and intervention is None
            and flash.declined(arch, query, summaries.block) is None):
        try:
            return flash.attend(arch, index, query, key, value, summaries, sink)  # (H, n, dh), (H, n)
        except flash.Failed:  # declined from now on, and says why; this layer takes the passes below
            pass
    width = n + (-n % CHUNK)
    relative = params is not None and engine.relative(params)
    padded = torch.nn.functional.pad(key, (0, 0, 0, width - n))  # (KV, width, dh)
    key_t = padded.transpose(-2, -1).contiguous()  # (KV, dh, width)
    padded = padded if relative else None  # only DeBERTa's relative terms read the keys again
    keys = torch.arange(width, device=key.device)  # (width,)
    value = torch.nn.functional.pad(value, (0, 0, 0, width - n))  # (KV, width, dh)
    scores_buffer = query.new_empty(heads * min(size, n) * width)  # (H·size·width,)
    exps_buffer = None  # (H·size·width,) torch's passes only: the compiled kernel writes e^{s′} over the scores
    outputs = query.new_empty((heads, n, dh))  # (H, n, dh)
    normalisers = torch.empty((heads, n), dtype=torch.float64, device=query.device)  # (H, n)
    cpu = query.device.type == "cpu"  # where subnormals and exp's inputs far below 0 slow the passes (FLOOR)
    for start in range(0, n, size):
        stop = min(n, start + size)
        r, seen = stop - start, stop if arch.causal else n  # the keys any query of the block may read
        k = seen + (-seen % CHUNK)
        scores = scores_buffer[: heads * r * k].view(heads, r, k)  # (H, r, k)
        stacked = query[:, start:stop].reshape(arch.kv_heads, group * r, dh)  # (KV, G·r, dh)
        torch.bmm(stacked, key_t[:, :, :k], out=scores.view(arch.kv_heads, group * r, k))  # (H, r, k)
        if relative:
            scores += engine.relative_terms(arch, params.position_key, params.position_query, query[:, start:stop],
                                            padded[:, :k], positions[start:stop], keys[:k], scaled=True)  # (H, r, k)
        engine.shaped(arch, scores, positions[start:stop])
        hide(arch, index, start, positions[start:stop], scores, n)
        compiled = fused.usable(scores)
        if not compiled and exps_buffer is None:
            exps_buffer = torch.empty_like(scores_buffer)  # (H·size·width,)
        exps = scores if compiled else exps_buffer[: heads * r * k].view(heads, r, k)  # (H, r, k)
        if compiled:
            kept = summaries.keys_kept if summaries is not None else 1
            lines = None if summaries is None else (start, n, summaries.verticals, summaries.slashes,
                                                    None if sink is None else sink.float().contiguous())
            # (H, r, s) × 2, (H, r, 1), (H, r), (H, r, k / CHUNK); exps written, and the lines added
            best, strongest, total, moment, sums = fused.block(scores, exps, kept, CHUNK, FLOOR, lines)
            largest = summaries.note(start, best, strongest) if summaries is not None else best  # (H, r, 1)
        else:
            largest = (summaries.strongest(start, scores) if summaries is not None
                       else scores.amax(-1, keepdim=True))  # (H, r, 1)
            shifted = scores.sub_(largest)  # (H, r, k)
            if cpu:
                shifted.clamp_(min=FLOOR)  # (H, r, k)
            torch.exp(shifted, out=exps)  # (H, r, k)
            if cpu:
                hide(arch, index, start, positions[start:stop], exps, n, 0.0)  # the hidden keys' e^{s′}: exactly 0
            sums = exps.view(heads, r, -1, CHUNK).sum(-1)  # (H, r, k / CHUNK)
            total = sums.sum(-1, keepdim=True)  # (H, r, 1); α = e^{s′} / Z′, never divided out in full
            moment = None if summaries is None else shifted.mul_(exps).sum(-1)  # (H, r) Σ e^{s′} s′
        sunk = None if sink is None else sink.to(largest.dtype)[:, None, None] - largest  # (H, r, 1) the sink's s′
        total = total if sunk is None else total + torch.exp(sunk)  # (H, r, 1)
        normaliser = largest[..., 0].double() + torch.log(total[..., 0].double())  # (H, r), float64: see Scan.tile
        normalisers[:, start:stop] = normaliser
        changed = None if intervention is None else intervention.weights(
            index, exps[..., :seen] / total, positions[start:stop])  # (H, r, seen) or None: a knockout, say
        if changed is not None:
            if visit is not None:
                visit(start, changed, torch.ones_like(total))
            outputs[:, start:stop] = engine.grouped_values(changed, value[:, :seen])  # (H, r, dh)
            continue
        if visit is not None:
            visit(start, exps[..., :seen], total)
        outputs[:, start:stop] = engine.grouped_values(exps, value[:, :k]) / total  # (H, r, dh)
        if summaries is not None:
            summaries.add(start, exps, sums, total, moment, normaliser, sunk)
            if not compiled:
                summaries.lines(start, exps, 1.0 / total)
    return outputs, normalisers  # (H, n, dh), (H, n)


@dataclass
class Blocked:
    """The scan's attention strategy for the engine's one layer body (engine.layer's `attention`): the layer's
    queries taken `size` at a time (attend_blocks), no n × n matrix held. `summaries`, where given, are filled block
    by block; `visit(start, exps, total)` hears of each block's rows (attend_blocks). An intervention handed to it
    changes each block's rows before they meet V (its weights: a knockout), and the layer changes the heads' outputs
    (an ablation), as in every other layer. A scan's summaries describe the model's own weights, so they take no
    intervention. Gives a BlockedAttention."""

    size: int
    summaries: Summaries | None = None
    visit: object = None

    def attend(self, arch: engine.Architecture, params: engine.LayerWeights, index: int, query: torch.Tensor,
               key: torch.Tensor, value: torch.Tensor, positions: torch.Tensor,
               intervention: engine.Intervention | None = None) -> "BlockedAttention":
        if self.summaries is not None and intervention is not None:
            raise ValueError("A scan's summaries describe the model's own weights: run an intervention without them.")
        scaled = query / math.sqrt(query.shape[-1])  # (H, n, dh) as the scaled-dot scorer scales it
        del query  # the projected queries, once scaled: the layer handed over its only reference
        output, normalisers = attend_blocks(arch, index, scaled, key, value, positions, self.size, self.visit,
                                            self.summaries, params, intervention)  # (H, n, dh), (H, n)
        return BlockedAttention(output, scaled, key, value, normalisers, self.summaries)


@dataclass
class BlockedAttention:
    """What a layer's Blocked attention gave: the heads' outputs αV (H, n, dh), the queries scaled by 1/√dh (H, n, dh),
    the keys and values (KV, n, dh), each query's log-sum-exp (H, n), and the summaries, where it filled some."""

    output: torch.Tensor
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    normalisers: torch.Tensor
    summaries: Summaries | None = None


def scan(arch: engine.Architecture, weights: engine.Weights, pieces: Pieces, name: str, *, block: int = BLOCK,
         strongest: int = STRONGEST, progress=None, step: int | None = None) -> Scan:
    """Every head's attention over `pieces`, summarised (Scan), each query's `strongest` keys kept (at least 1:
    Model.scan checks it). `progress(done, total)` hears of each step of queries of each layer. `step`: the queries taken at a time, a multiple of `block` (by default the block on a
    CPU, GPU_QUERIES on a GPU)."""
    device = weights.embeddings.device
    n = len(pieces.ids)
    size = step or (block if device.type == "cpu" else block * max(1, GPU_QUERIES // block))  # queries a step
    if size % block:
        raise ValueError(f"a scan's step ({size}) must be a multiple of its block ({block}).")
    total, done = arch.layers * math.ceil(n / size), 0

    def advance():
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    found, queries, keys, normalisers = [], [], [], []  # per layer
    kept = kept_arrays(arch, n, block, strongest) if device.type == "cpu" else None  # filled in place, layer by layer
    with torch.inference_mode():
        positions = torch.arange(n, device=device)  # (n,)
        x = engine.embed(arch, weights, torch.tensor(pieces.ids, device=device), positions)  # (n, d)
        whole = []  # whether each layer's attention is the GPU kernel's, which takes it whole: progress after it

        def summarised(i):  # each layer's attention, its blocks summarised
            into = None if kept is None else {name: kept[name][i] for name in LAYER_ARRAYS}
            whole.append(flash.declined(arch, x, block) is None)
            visit = None if progress is None or whole[-1] else (lambda start, exps, total: advance())
            return Blocked(size, Summaries(arch.heads, n, block, strongest, device, into), visit)

        for i, x, a, _ in engine.run_layers(arch, weights, x, positions, attention=summarised, trace=False):
            for _ in range(math.ceil(n / size) if whole[-1] and progress is not None else 0):
                advance()
            found.append(a.summaries.on_host())
            queries.append(engine.to_host(a.query, torch.float32))
            keys.append(engine.to_host(a.key, torch.float32))
            if kept is not None:
                kept["normalisers"][i] = a.normalisers.numpy()
            else:
                normalisers.append(engine.to_host(a.normalisers))
            del a
        next_logits = engine.logits(weights, x[-1:])[0].float().cpu().numpy() if arch.causal else None  # (vocab,)
        engine.copied(device)
        found = [summaries.numpy() for summaries in found]
        if kept is None:
            kept = {name: np.stack([getattr(layer, name) for layer in found]) for name in LAYER_ARRAYS}
            kept["normalisers"] = np.stack([normaliser.numpy() for normaliser in normalisers])
        kept["sink"] = np.stack([layer.sink for layer in found])  # (L, H)
        lines = {name: np.stack([getattr(layer, name) for layer in found]) for name in ("verticals", "slashes")}

    relative = [tuple(None if t is None else t.float().cpu() for t in (b.position_key, b.position_query))
                for b in weights.layers] if arch.relative_span else None
    return Scan(name, pieces, block, kept["overview"], kept["sink"], kept["entropy"], kept["strongest_keys"],
                kept["strongest_weights"], next_logits, arch, queries, keys, kept["normalisers"], relative,
                lines["verticals"], lines["slashes"])


LAYER_ARRAYS = ("overview", "entropy", "strongest_keys", "strongest_weights")  # a scan's summaries, each (L, H, …)


def kept_arrays(arch: engine.Architecture, n: int, block: int, strongest: int) -> dict[str, np.ndarray]:
    """The scan's summaries of every layer, zeroed, for a CPU scan to fill in place: overview (L, H, B, B), entropy
    (L, H, n), strongest_keys and strongest_weights (L, H, n, s), normalisers (L, H, n) float64."""
    count, kept, shape = math.ceil(n / block), min(strongest, n), (arch.layers, arch.heads)
    return {"overview": np.zeros((*shape, count, count), np.float32), "entropy": np.zeros((*shape, n), np.float32),
            "strongest_keys": np.zeros((*shape, n, kept), np.dtype(str(key_type(n)).removeprefix("torch."))),
            "strongest_weights": np.zeros((*shape, n, kept), np.float32),
            "normalisers": np.zeros((*shape, n), np.float64)}
