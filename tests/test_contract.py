"""The attention contract (engine.attention): scores → shaped → the keys a query may read → softmax with a sink → αV.

Each strategy behind it (attnviz.functional's grouped_attend, causal_attend's blocks, explicit_attend, the scan's
attend_blocks, and the scan's C kernel) against the contract written out here from the formulas, one head at a time
in float64, for every mechanism a family adds: an encoder's every key, a decoder's causal mask, grouped K/V heads,
sliding windows (a decoder's and ModernBERT's either side), ALiBi (BLOOM, 6 heads: slopes for a count that is not a
power of two), Gemma 2's soft cap, gpt-oss's learned sinks, DeBERTa's relative terms, and padding keys. The layers'
rules and tables come from tiny models of each family; the queries, keys and values are random."""

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from tolerance import LAMBDA, U32  # noqa: E402

from attnviz import models  # noqa: E402
from attnviz.functional import grouped_attend  # noqa: E402
from attnviz.models import engine, fused, scan  # noqa: E402

# family: (the layer whose rules are tested, what it has)
CASES = {
    "bert": (0, "every key"),
    "modernbert": (1, "a window either side"),
    "gpt2": (0, "causal"),
    "mistral": (0, "causal, a window, grouped K/V heads"),
    "bloom": (0, "ALiBi, 6 heads"),
    "gemma2": (0, "a soft cap and a window"),
    "gpt_oss": (0, "a learned sink and a window"),
    "deberta-v2": (0, "relative terms"),
}
N = 300  # past engine.CAUSAL_BLOCK, so causal_attend takes several blocks; BLOCK below is no divisor of it
BLOCK = 70


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    """family: (Architecture, LayerWeights, layer index), from a tiny model of it."""
    root = tmp_path_factory.mktemp("contract")
    out = {}
    for family, (index, _) in CASES.items():
        model = models.load(tiny_models.build(family, root), device="cpu")
        out[family] = model.arch, model.weights.layers[index], index
    return out


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slopes written out (Press et al. 2021): 2^(−8h/p) for h = 1 … p, p the largest power of two ≤ H, then
    2^(−8(2i + 1)/(2p)) for the H − p heads left."""
    p = 2 ** int(math.log2(heads))
    return [2 ** (-8 * h / p) for h in range(1, p + 1)] + [2 ** (-8 * (2 * i + 1) / (2 * p)) for i in range(heads - p)]


def written_out(arch, params, index, query, key, value, real=None):
    """The contract one head at a time in float64, from the formulas: (weights (H, n, n), αV (H, n, dh), each row's
    log Σ e^a over the keys it reads, the sink's e^{s_h} included (H, n)). A row that may read no key (a padding
    query whose window holds only padding) gets no weight."""
    heads, n, dh = query.shape
    group = heads // arch.kv_heads
    i = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1) the query's position
    j = torch.arange(n, dtype=torch.float64)[None, :]  # (1, n) the key's
    window = arch.windows[index] if arch.windows else None
    allowed = torch.ones(n, n, dtype=torch.bool)  # (n, n)
    if arch.causal:
        allowed &= j <= i
    if window:
        allowed &= (j > i - window) if arch.causal else ((i - j).abs() <= window)
    if real is not None:
        allowed &= real[None, :]
    relative = engine.relative(params)
    if relative:
        distance = engine.relative_index(arch, torch.arange(n), torch.arange(n))  # (n, n) the bucketed row δ + k
    weights, outputs, normalisers = [], [], []
    for h in range(heads):
        q, k, v = query[h].double(), key[h // group].double(), value[h // group].double()  # (n, dh) each
        a = q @ k.T / math.sqrt(dh)  # (n, n)
        if relative:
            for table, side in ((params.position_key, "c2p"), (params.position_query, "p2c")):
                if table is None:
                    continue
                rows = engine.of_head(table, h, dh).double()[distance]  # (n, n, dh) the table's row for each δ(i, j)
                a = a + (torch.einsum("id,ijd->ij", q, rows) if side == "c2p" else torch.einsum("jd,ijd->ij", k, rows)) / math.sqrt(dh)
        if arch.alibi:
            a = a - alibi_slopes(heads)[h] * (i - j)  # (n, n)
        if arch.score_cap:
            a = arch.score_cap * torch.tanh(a / arch.score_cap)  # (n, n)
        a = a.masked_fill(~allowed, -math.inf)  # (n, n)
        if params.sink is not None:
            a = torch.cat([a, torch.full((n, 1), float(params.sink[h]), dtype=torch.float64)], 1)  # (n, n + 1)
        top = a.amax(1, keepdim=True)  # (n, 1)
        e = torch.exp(a - top)  # (n, n or n + 1)
        total = e.sum(1, keepdim=True)  # (n, 1)
        w = torch.nan_to_num(e / total)[:, :n]  # (n, n) the sink's column dropped; a row that reads no key: zeros
        weights.append(w)
        outputs.append(w @ v)  # (n, dh)
        normalisers.append((top + torch.log(total))[:, 0])  # (n,)
    return torch.stack(weights), torch.stack(outputs), torch.stack(normalisers)


def inputs(arch, dtype=torch.float64, seed=0):
    """Random queries (H, N, dh), keys and values (KV, N, dh) of a typical size, at positions 0 … N − 1."""
    g = torch.Generator().manual_seed(seed)
    dh = arch.head_dim
    query = torch.randn(arch.heads, N, dh, generator=g, dtype=torch.float64) * 1.5
    key = torch.randn(arch.kv_heads, N, dh, generator=g, dtype=torch.float64) * 1.5
    value = torch.randn(arch.kv_heads, N, dh, generator=g, dtype=torch.float64)
    return query.to(dtype), key.to(dtype), value.to(dtype), torch.arange(N)


def in_dtype(params, dtype):
    """The layer's relative tables in `dtype`, as the layer's own weights would be in a run of that dtype."""
    tables = {name: getattr(params, name).to(dtype) for name in ("position_key", "position_query")
              if getattr(params, name) is not None}
    return dataclasses.replace(params, **tables)


def close(actual, desired, what: str, tolerance: float = 1e-10):
    worst = float((actual.double() - desired).abs().max())
    assert worst <= tolerance, f"{what}: off by {worst:.3g} (tolerance {tolerance:.3g})"


def test_the_alibi_slopes_written_out_are_the_engines():
    for heads in (1, 4, 6, 8, 12, 16, 20):
        assert np.allclose(engine.alibi_slopes(heads).numpy(), alibi_slopes(heads), rtol=1e-6), heads


@pytest.mark.parametrize("family", CASES)
def test_every_strategy_keeps_the_contract(layers, family):
    """In float64, so that only the order of the sums may differ: the contract's dispatcher, the written-out scores
    (explicit_attend), the dense path where it applies (no sink, no relative terms), the causal blocks where the layer
    is causal, and the scan's blocks without the kernel, each against the contract written out."""
    arch, params, index = layers[family]
    params = in_dtype(params, torch.float64)
    query, key, value, positions = inputs(arch)
    weights, output, normaliser = written_out(arch, params, index, query, key, value)
    got = engine.attention(arch, params, index, query, key, value, positions)
    close(got.weights, weights, "the contract's weights")
    close(got.output, output, "the contract's αV")
    mask = engine.allowed_keys(arch, index, positions, N)
    explicit = engine.explicit_attend(arch, params, query, key, value, positions, mask)
    close(explicit.weights, weights, "explicit_attend's weights")
    close(explicit.output, output, "explicit_attend's αV")
    if params.sink is None and not engine.relative(params):
        dense = grouped_attend(query, key, value, scoring=engine.scorer(arch, positions), mask=mask, need_scores=False)
        close(dense.weights, weights, "grouped_attend's weights")
        close(dense.output, output, "grouped_attend's αV")
    if arch.causal:
        out = torch.empty(arch.heads, N, N, dtype=torch.float64)
        blocks = engine.causal_attend(arch, index, query, key, value, positions, out, params.sink)
        close(out, weights, "causal_attend's weights")
        close(blocks.output, output, "causal_attend's αV")
    scanned, logsumexp = scan.attend_blocks(arch, index, query / math.sqrt(arch.head_dim), key, value, positions, BLOCK,
                                            params=params)
    close(scanned, output, "the scan's αV")
    close(logsumexp, normaliser, "the scan's log-sum-exp")


@pytest.mark.parametrize("family", CASES)
def test_padding_keys_are_read_by_no_query(layers, family):
    """Texts padded to one length (batch_weights): no query reads a padding key, under every rule."""
    arch, params, index = layers[family]
    params = in_dtype(params, torch.float64)
    query, key, value, positions = inputs(arch, seed=1)
    real = torch.ones(N, dtype=torch.bool)
    real[-37:] = False  # the last 37 pieces are padding
    weights, output, _ = written_out(arch, params, index, query, key, value, real)
    got = engine.attention(arch, params, index, query[None], key[None], value[None], positions, real=real[None])
    close(got.weights[0], weights, "the padded weights")
    close(got.output[0], output, "the padded αV")
    assert float(got.weights[0][..., ~real].abs().max()) == 0.0


@pytest.mark.parametrize("family", CASES)
def test_the_kernel_keeps_the_contract_in_float32(layers, family, monkeypatch):
    """The scan's C kernel (fused.c) and its torch passes, in float32, against the contract in float64. A score is a
    float32 sum of dh products, off by at most λ√dh·u·Σ|q_a k_a| (tolerance.py's rounding bound), plus one rounding
    of each shaping step; a log-sum-exp adds its sum's λ√n·u; αV, a sum of n weights times values, adds λ√n·u·max|v|."""
    arch, params, index = layers[family]
    query, key, value, positions = inputs(arch, dtype=torch.float32, seed=2)
    _, output, normaliser = written_out(arch, params, index, query, key, value)
    dh = arch.head_dim
    size = (query.double().abs() @ key.double().abs().repeat_interleave(arch.heads // arch.kv_heads, 0).transpose(1, 2)).max() / math.sqrt(dh)
    score_error = LAMBDA * math.sqrt(dh) * U32 * float(size) + 4 * U32 * float(size)  # the sum, then its shaping steps
    if engine.relative(params):
        score_error *= 3  # three such sums
    sum_error = LAMBDA * math.sqrt(N) * U32
    lse_tolerance = score_error + sum_error
    out_tolerance = (2 * score_error + 2 * sum_error) * float(value.abs().max())
    paths = {"torch passes": False} | ({"C kernel": True} if fused.library() is not None else {})
    for path, kernel in paths.items():
        if not kernel:
            monkeypatch.setattr(fused, "usable", lambda scores: False)
        scanned, logsumexp = scan.attend_blocks(arch, index, query / math.sqrt(dh), key, value, positions, BLOCK,
                                                params=params)
        monkeypatch.undo()
        close(logsumexp, normaliser, f"{path}: the log-sum-exp", lse_tolerance)
        close(scanned, output, f"{path}: αV", out_tolerance)


def lines_written_out(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each key's weight summed over the queries (H, N), and each offset d = i − j's (H, 2N − 1), d at d + N − 1,
    from the written-out weights (H, N, N) one diagonal at a time."""
    verticals = weights.sum(1)  # (H, N)
    slashes = torch.stack([torch.diagonal(weights, -d, 1, 2).sum(-1) for d in range(-(N - 1), N)], -1)  # (H, 2N − 1)
    return verticals, slashes


def lines_tolerance(weights: torch.Tensor, relative: float) -> float:
    """A sum of up to N weights, each off by `relative` of itself, and rounded in float32 N times."""
    return float(relative * weights.sum(1).max() + N * U32 * weights.sum(1).max())


@pytest.mark.parametrize("family", CASES)
def test_the_verticals_and_slashes_keep_the_contract(layers, family, monkeypatch):
    """The census's sums, in the scan's one pass: each key's weight summed over the queries (a vertical line) and
    each offset's (a slash), by torch's passes and by the C kernel, in float32, against the weights written out in
    float64. A learned sink's share is in no line."""
    arch, params, index = layers[family]
    query, key, value, positions = inputs(arch, dtype=torch.float32, seed=4)
    weights, _, _ = written_out(arch, params, index, query, key, value)  # (H, N, N)
    verticals, slashes = lines_written_out(weights)
    dh = arch.head_dim
    size = (query.double().abs() @ key.double().abs().repeat_interleave(arch.heads // arch.kv_heads, 0).transpose(1, 2)).max() / math.sqrt(dh)
    score_error = (LAMBDA * math.sqrt(dh) * U32 * float(size) + 4 * U32 * float(size)) * (3 if engine.relative(params) else 1)
    relative = 2 * score_error + LAMBDA * math.sqrt(N) * U32  # a weight's: its score's and its log-sum-exp's
    paths = {"torch passes": False} | ({"C kernel": True} if fused.library() is not None else {})
    for path, kernel in paths.items():
        if not kernel:
            monkeypatch.setattr(fused, "usable", lambda scores: False)
        summaries = scan.Summaries(arch.heads, N, BLOCK, 5)
        scan.attend_blocks(arch, index, query / math.sqrt(dh), key, value,
                           positions, BLOCK, summaries=summaries, params=in_dtype(params, torch.float32))
        monkeypatch.undo()
        close(summaries.verticals[:, :N], verticals, f"{path}: the verticals", lines_tolerance(weights, relative))
        close(summaries.verticals[:, N:], torch.zeros(1), f"{path}: the padding keys' verticals")
        close(summaries.slashes, slashes, f"{path}: the slashes", lines_tolerance(weights, relative))
        if arch.causal:
            close(summaries.slashes[:, : N - 1], torch.zeros(1), f"{path}: no query reads a key after it")


@pytest.mark.parametrize("family", [family for family in CASES if family != "deberta-v2"])
def test_the_gpu_kernel_keeps_the_contract_in_float32(layers, family, interpreted):
    """The scan's Triton kernel (flash.py, in Triton's interpreter), in float32, against the contract in float64: αV
    and the log-sum-exp as the C kernel is held (tolerances derived as there), and the summaries it alone writes, from
    the written-out weights: a weight α is e^{a − log Σ}, off by its score's error and the log-sum-exp's, relatively."""
    arch, params, index = layers[family]
    query, key, value, positions = inputs(arch, dtype=torch.float32, seed=3)
    weights, output, normaliser = written_out(arch, params, index, query, key, value)  # (H, N, N), (H, N, dh), (H, N)
    dh, block, top = arch.head_dim, 64, 5
    size = (query.double().abs() @ key.double().abs().repeat_interleave(arch.heads // arch.kv_heads, 0).transpose(1, 2)).max() / math.sqrt(dh)
    score_error = LAMBDA * math.sqrt(dh) * U32 * float(size) + 4 * U32 * float(size)
    sum_error = LAMBDA * math.sqrt(N) * U32
    lse_tolerance = score_error + sum_error
    relative = score_error + lse_tolerance  # a weight's relative error
    summaries = scan.Summaries(arch.heads, N, block, top)
    scanned, logsumexp = scan.attend_blocks(arch, index, query / math.sqrt(dh), key, value, positions, block,
                                            summaries=summaries, params=params)
    close(logsumexp, normaliser, "the log-sum-exp", lse_tolerance)
    close(scanned, output, "αV", (2 * score_error + 2 * sum_error) * float(value.abs().max()))
    every = torch.cat([weights, 1 - weights.sum(-1, keepdim=True)], -1) if params.sink is not None else weights
    logs = torch.log(every.clamp_min(1e-300))  # (H, N, N [+ 1]) log α, the sink's share one more outcome
    entropy = -(every * logs).sum(-1)  # (H, N)
    spread = (every * (logs - logs.amax(-1, keepdim=True)).abs()).sum(-1)  # (H, N) Σ α |a − max a|
    close(summaries.entropy, entropy, "the entropy", float((relative * (1 + spread)).max()))
    strongest = weights.topk(top, -1).values  # (H, N, top)
    close(summaries.strongest_weights, strongest, "the strongest weights", relative * float(strongest.max()))
    named = weights.gather(-1, summaries.strongest_keys.long())  # (H, N, top) the written-out weights of the keys it names
    close(named, strongest, "the weights of the keys it names", relative * float(strongest.max()))
    count = math.ceil(N / block)
    blocks = torch.nn.functional.pad(weights, (0, 0, 0, count * block - N)).view(arch.heads, count, block, N)
    by_block = torch.nn.functional.pad(blocks.sum(2), (0, count * block - N)).view(arch.heads, count, count, block)
    overview = by_block.sum(-1) / torch.tensor([min(block, N - a * block) for a in range(count)])[None, :, None]
    close(summaries.overview, overview, "the overview", relative)
    close(summaries.first, weights[:, 1:, 0].sum(-1), "the first key's share", relative * N)
    verticals, slashes = lines_written_out(weights)
    close(summaries.verticals[:, :N], verticals, "the verticals", lines_tolerance(weights, relative))
    close(summaries.slashes, slashes, "the slashes", lines_tolerance(weights, relative))
