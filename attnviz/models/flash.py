"""The scan's attention and summaries in one fused GPU kernel, written in Triton (which the CUDA build of torch brings).

Each program holds BLOCK_M queries of one head and reads the keys they may see BLOCK_N at a time, twice, computing
each block's scores q·kᵀ in registers and writing none to memory:
1. a running maximum m and l = Σ e^{s − m} (float64) per query, rescaled as m moves (tests/onepass.py: that
   arithmetic in torch), and each query's strongest scores kept in registers, merged block by block;
2. with each row's m and l final, the exact weights α = e^{s − m} / l of each block: αV (compensated sums), the
   entropy's Σ α(s − m) (float64), each block of the overview's share, each query's weight on the first key, and
   each key's and each offset's share (the census's verticals and slashes, added atomically).
The normalisation is applied once, at the end of the first reading; the second reads the same scores again rather than
keep, for every query, a sum for every block of keys: at 131,072 pieces that would be 16 GiB a layer.

Float32 throughout, no TF32 (tl.dot's "ieee" precision). The keys a query may read (causal, a sliding window either
way), ALiBi's bias, a soft cap and a learned sink are applied as engine.rules applies them; DeBERTa's relative terms
are not, and `declined` says so. On a machine without a GPU the kernel runs in Triton's interpreter when
TRITON_INTERPRET=1, which is how CI tests its arithmetic (tests/test_flash.py)."""

from __future__ import annotations

import functools
import math
import os

import torch

from attnviz.models.engine import rules
from attnviz.models.engine.layout import Architecture

try:
    import triton
    import triton.language as tl
    from triton.errors import TritonError
except ImportError:  # the CPU build of torch comes without Triton
    triton = tl = None

TILE = 64  # queries a program, and keys read at a time, where the overview's block allows (the scan's 128 does)
SMALLEST = 16  # tl.dot's least size: an overview block that is no multiple of it is declined
SETTING = "ATTNVIZ_FLASH"  # "0": the scan on a GPU takes torch's passes
_failed: str | None = None  # why Triton could not build or launch the kernel in this process, once it could not


class Failed(Exception):
    """Triton could not build or launch the kernel here (a GPU it does not know, too little shared memory): the scan
    takes torch's passes for this layer and the rest of the process, and `declined` says why."""


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def tile(block: int) -> int:
    """The kernel's queries a program and keys a step for an overview of `block`: the largest power of two up to TILE
    that divides it (0 where none of SMALLEST or more does)."""
    size = min(TILE, block & -block)
    return size if size >= SMALLEST else 0


def declined(arch: Architecture, query: torch.Tensor, block: int) -> str | None:
    """Why the kernel does not take a layer of `arch` whose queries are `query`, summarised by blocks of `block`, in
    words; None where it does."""
    if tl is None:
        return "Triton is not installed (the CPU build of torch comes without it)."
    if os.environ.get(SETTING, "") == "0":
        return f"{SETTING}=0 turns the fused kernel off."
    if _failed is not None:
        return f"Triton could not build or launch the kernel here ({_failed}), so the scan takes torch's passes."
    if query.device.type != "cuda" and not interpreting():
        return "the model is on the CPU, where the scan has its own C kernel (fused.py)."
    if arch.relative_span:
        return ("DeBERTa's relative terms read a table of position keys and queries by distance bucket; the kernel "
                "does not write them, so the scan takes torch's passes.")
    if not tile(block):
        return f"the overview's block ({block}) is no multiple of {SMALLEST}, the least the kernel reads at a time."
    return None


def _next_power(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def attend(arch: Architecture, index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           summaries, sink: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `index`'s attention of queries (H, n, dh), scaled by 1/√dh, over keys and values (KV, n, dh), in the
    kernel: (αV (H, n, dh), each query's log-sum-exp (H, n) float64), with `summaries` (scan.Summaries) filled as the
    scan's torch passes fill them. `sink` (H,): a learned sink's logit per head, or None."""
    heads, n, dh = query.shape
    block, dtype = summaries.block, query.dtype
    size = tile(block)
    device, width = query.device, _next_power(max(dh, SMALLEST))
    query, key, value = (t.float().contiguous() for t in (query, key, value))  # (H or KV, n, dh)
    keys_rule = rules.keys(arch, index)
    slopes = (rules.alibi_slopes(heads).to(device) if arch.alibi else torch.zeros(heads, device=device))  # (H,)
    sinks = (sink.float().to(device) if sink is not None else torch.zeros(heads, device=device))  # (H,)
    count = summaries.keys_kept
    kept = _next_power(count)
    output = torch.empty((heads, n, dh), dtype=torch.float32, device=device)  # (H, n, dh)
    normaliser = torch.empty((heads, n), dtype=torch.float64, device=device)  # (H, n)
    entropy = torch.empty((heads, n), dtype=torch.float64, device=device)  # (H, n) in nats, the sink counted
    first = torch.zeros((heads, n), dtype=torch.float32, device=device)  # (H, n) α[q, 0]
    overview = torch.zeros_like(summaries.overview)  # (H, B, B) Σ over each block's queries of its keys' weights
    strongest_weights = torch.empty((heads, n, kept), dtype=torch.float32, device=device)  # (H, n, kept)
    strongest_keys = torch.empty((heads, n, kept), dtype=torch.int32, device=device)  # (H, n, kept)
    verticals = torch.zeros((heads, n), dtype=torch.float32, device=device)  # (H, n) Σ_q α[q, k]
    slashes = torch.zeros((heads, 2 * n - 1), dtype=torch.float32, device=device)  # (H, 2n − 1) Σ_q α[q, q − d]
    grid = (math.ceil(n / size), heads)
    try:
        _kernel(interpreting())[grid](
            query, key, value, output, normaliser, entropy, first, overview, strongest_weights, strongest_keys, verticals, slashes,
            slopes, sinks, n, dh, heads // arch.kv_heads, keys_rule.window or 0, float(arch.score_cap or 1.0), block, overview.shape[-1],
            CAUSAL=keys_rule.causal, WINDOW=bool(keys_rule.window), ALIBI=bool(arch.alibi), CAP=bool(arch.score_cap),
            SINK=sink is not None, D=width, BLOCK_M=size, BLOCK_N=size, KEPT=kept,
            num_warps=4 if width <= 64 else 8)  # a head of 128 dimensions keeps twice the registers a program
    except TritonError as error:  # raised before the kernel wrote anything: nothing to undo
        global _failed
        _failed = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
        raise Failed(_failed) from error
    summaries.entropy[...] = entropy
    summaries.strongest_weights[...] = strongest_weights[..., :count]
    summaries.strongest_keys[...] = strongest_keys[..., :count]
    counts = torch.full((overview.shape[-1],), float(block), device=device)  # (B,) queries in each block
    counts[-1] = n - block * (overview.shape[-1] - 1)
    summaries.overview[...] = overview / counts[None, :, None]
    summaries.first += first[:, 1:].double().sum(-1)
    summaries.verticals[:, :n] += verticals
    summaries.slashes += slashes
    return output.to(dtype), normaliser


@functools.lru_cache(maxsize=2)
def _kernel(interpret: bool):
    """The kernel, compiled by Triton for the GPU, or run by its interpreter (numpy, on the CPU) where `interpret`."""
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction
        return InterpretedFunction(_summarise)
    return triton.jit(_summarise)


if triton is not None:
    # The reductions' steps, as tl.max, tl.sum and tl.argmax use them: called through tl.reduce, they run the same
    # when compiled, and Triton's interpreter runs them with numpy even where Triton was imported for the GPU (where it
    # cannot call tl.max itself).
    _MAX, _MIN = tl.standard._elementwise_max, tl.standard._elementwise_min
    _SUM, _ARGMAX = tl.standard._sum_combine, tl.standard._argmax_combine_tie_break_left


def _summarise(Q, K, V, O, LSE, ENT, FIRST, OVER, KEPTW, KEPTK, VERT, SLASH, SLOPES, SINKS,
               n, dh, group, window, cap, block, count,
               CAUSAL: tl.constexpr, WINDOW: tl.constexpr, ALIBI: tl.constexpr, CAP: tl.constexpr,
               SINK: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               KEPT: tl.constexpr):
    """One program: queries q0 … q0 + BLOCK_M − 1 of one head, over the keys they may read, read twice (see above).
    Q (H, n, dh), K and V (KV, n, dh) float32; out: O (H, n, dh), LSE and ENT (H, n) float64, FIRST (H, n), OVER
    (H, count, count) summed, KEPTW and KEPTK (H, n, KEPT), VERT (H, n) and SLASH (H, 2n − 1) summed: each key's and
    each offset's weight (offset d = i − j at d + n − 1)."""
    head = tl.program_id(1)
    q0 = tl.program_id(0) * BLOCK_M
    kv = head // group
    rows = q0 + tl.arange(0, BLOCK_M)  # (M,) the queries' positions
    live = rows < n  # (M,)
    dims = tl.arange(0, D)  # (D,) dh padded to a power of two
    slots = tl.arange(0, KEPT)  # (KEPT,)
    lanes = tl.arange(0, BLOCK_N)  # (N,)
    query = tl.load(Q + head * n * dh + rows[:, None] * dh + dims[None, :],
                    mask=live[:, None] & (dims[None, :] < dh), other=0.0)  # (M, D)
    lo = 0  # the keys any of the block's queries may read: lo … hi − 1
    hi = n
    if CAUSAL:
        hi = tl.minimum(q0 + BLOCK_M, n)
        if WINDOW:
            lo = tl.maximum(q0 - window + 1, 0)
    elif WINDOW:
        lo = tl.maximum(q0 - window, 0)
        hi = tl.minimum(q0 + BLOCK_M + window, n)
    lo = (lo // BLOCK_N) * BLOCK_N
    slope = tl.load(SLOPES + head)
    m = tl.full([BLOCK_M], -1.0e30, tl.float32)  # (M,) the largest score so far
    l = tl.full([BLOCK_M], 0.0, tl.float64)  # (M,) Σ e^{s − m}
    # (M, KEPT) the strongest scores, strongest first; -3e38 marks an empty place and a taken score, below any score
    best = tl.full([BLOCK_M, KEPT], -3.0e38, tl.float32)
    best_keys = tl.full([BLOCK_M, KEPT], 0, tl.int32)  # (M, KEPT)
    inverse = tl.full([BLOCK_M], 0.0, tl.float32)  # (M,) 1 / l, once l is final
    acc = tl.full([BLOCK_M, D], 0.0, tl.float32)  # (M, D) αV
    lost = tl.full([BLOCK_M, D], 0.0, tl.float32)  # (M, D) what acc's sums rounded away (Kahan)
    moment = tl.full([BLOCK_M], 0.0, tl.float64)  # (M,) Σ α(s − m)
    for reading in tl.static_range(2):
        for start in range(lo, hi, BLOCK_N):
            cols = start + lanes  # (N,) the keys' positions
            key = tl.load(K + kv * n * dh + cols[:, None] * dh + dims[None, :],
                          mask=(cols[:, None] < n) & (dims[None, :] < dh), other=0.0)  # (N, D)
            scores = tl.dot(query, tl.trans(key), input_precision="ieee")  # (M, N) q·k/√dh, no TF32
            if ALIBI:
                scores = scores + slope * (cols[None, :] - rows[:, None]).to(tl.float32)  # (M, N) −m_h(i − j)
            if CAP:
                x = scores / cap  # (M, N)
                size = tl.abs(x)  # (M, N)
                x2 = x * x  # (M, N)
                # tanh: its series where e^{−2|x|} would cancel against 1, else (1 − e^{−2|x|}) / (1 + e^{−2|x|})
                series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))))
                t = tl.exp(-2.0 * size)  # (M, N)
                closed = tl.where(x < 0, -1.0, 1.0) * (1.0 - t) / (1.0 + t)  # (M, N)
                scores = cap * tl.where(size < 0.25, series, closed)  # (M, N)
            allowed = (cols[None, :] < n) & live[:, None]  # (M, N)
            if CAUSAL:
                allowed = allowed & (cols[None, :] <= rows[:, None])
                if WINDOW:
                    allowed = allowed & (cols[None, :] > rows[:, None] - window)
            elif WINDOW:
                allowed = allowed & (cols[None, :] - rows[:, None] <= window) & (rows[:, None] - cols[None, :] <= window)
            scores = tl.where(allowed, scores, -1.0e30)  # (M, N)
            if reading == 0:
                largest = tl.reduce(scores, 1, _MAX)  # (M,)
                moved = tl.maximum(m, largest)  # (M,)
                l = l * tl.exp(m - moved).to(tl.float64) + tl.reduce(tl.exp(scores - moved[:, None]), 1, _SUM).to(tl.float64)
                m = moved
                if tl.reduce(largest - tl.reduce(best, 1, _MIN), 0, _MAX) > 0:  # some query's strongest keys change
                    rest = scores  # (M, N) the block's scores not yet taken
                    lane_of = rows[:, None] * 0 + lanes[None, :]  # (M, N) each score's lane
                    slot_of = rows[:, None] * 0 + slots[None, :]  # (M, KEPT)
                    kept = best  # (M, KEPT) the strongest so far not yet taken
                    merged = tl.full([BLOCK_M, KEPT], -3.0e38, tl.float32)  # (M, KEPT)
                    merged_keys = tl.full([BLOCK_M, KEPT], 0, tl.int32)  # (M, KEPT)
                    for i in tl.static_range(KEPT):
                        a, a_at = tl.reduce((rest, lane_of), 1, _ARGMAX)  # (M,) each: on a tie the first
                        b, b_at = tl.reduce((kept, slot_of), 1, _ARGMAX)  # (M,) each
                        fresh = a > b  # (M,) on a tie the earlier key, already kept
                        b_key = tl.reduce(tl.where(slot_of == b_at[:, None], best_keys, 0), 1, _SUM)  # (M,)
                        merged = tl.where(slot_of == i, tl.where(fresh, a, b)[:, None], merged)
                        merged_keys = tl.where(slot_of == i, tl.where(fresh, start + a_at, b_key)[:, None],
                                               merged_keys)
                        rest = tl.where(fresh[:, None] & (lane_of == a_at[:, None]), -3.0e38, rest)
                        kept = tl.where(fresh[:, None] | (slot_of != b_at[:, None]), kept, -3.0e38)
                    best = merged
                    best_keys = merged_keys
            else:
                value = tl.load(V + kv * n * dh + cols[:, None] * dh + dims[None, :],
                                mask=(cols[:, None] < n) & (dims[None, :] < dh), other=0.0)  # (N, D)
                weights = tl.exp(scores - m[:, None]) * inverse[:, None]  # (M, N) α, 0 where hidden
                weights = tl.where(live[:, None], weights, 0.0)  # (M, N)
                part = tl.dot(weights, value, input_precision="ieee") - lost  # (M, D)
                total = acc + part  # (M, D)
                lost = (total - acc) - part
                acc = total
                moment += tl.reduce(weights * (scores - m[:, None]), 1, _SUM).to(tl.float64)  # (M,)
                share = tl.reduce(tl.reduce(weights, 1, _SUM), 0, _SUM)  # the block's weight on these keys
                tl.atomic_add(OVER + (head * count + q0 // block) * count + start // block, share)
                tl.atomic_add(VERT + head * n + cols, tl.reduce(weights, 0, _SUM), mask=cols < n)  # by key
                offsets = rows[:, None] - cols[None, :] + (n - 1)  # (M, N) each weight's slash
                tl.atomic_add(SLASH + head * (2 * n - 1) + offsets, weights, mask=allowed)
                if start == 0:
                    first = tl.reduce(tl.where(lanes[None, :] == 0, weights, 0.0), 1, _SUM)  # (M,) α[q, 0]
                    tl.store(FIRST + head * n + rows, first, mask=live)
        if reading == 0:
            if SINK:
                sink = tl.load(SINKS + head)
                moved = tl.maximum(m, sink)  # (M,)
                l = l * tl.exp(m - moved).to(tl.float64) + tl.exp(sink - moved).to(tl.float64)
                m = moved
            inverse = (1.0 / l).to(tl.float32)
    log_l = tl.log(l)  # (M,) float64
    if SINK:
        sink_weight = tl.exp(sink - m) * inverse  # (M,) the sink's α, one more outcome
        moment += (sink_weight * (sink - m)).to(tl.float64)
    tl.store(LSE + head * n + rows, m.to(tl.float64) + log_l, mask=live)
    tl.store(ENT + head * n + rows, log_l - moment, mask=live)
    # e^{(s − m) − log l}: s − m is exact near the maximum (tests/onepass.py)
    strongest = tl.exp((best - m[:, None]) - log_l.to(tl.float32)[:, None])  # (M, KEPT), 0 where hidden
    out = head * n * KEPT + rows[:, None] * KEPT + slots[None, :]  # (M, KEPT)
    tl.store(KEPTW + out, strongest, mask=live[:, None])
    tl.store(KEPTK + out, best_keys, mask=live[:, None])
    tl.store(O + head * n * dh + rows[:, None] * dh + dims[None, :], acc, mask=live[:, None] & (dims[None, :] < dh))
