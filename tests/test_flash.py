"""The scan's GPU kernel (attnviz.models.flash), its Triton source run by Triton's interpreter on the CPU (the
`interpreted` fixture), against the float64 softmax written out on the rows that break a careless one-pass softmax,
and a whole scan through it against the scan's CPU path. test_contract.py holds it to the attention contract for every
family's rules. On a CUDA GPU the compiled kernel is tested too."""

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tolerance import LAMBDA, U32  # noqa: E402

from attnviz import models  # noqa: E402
from attnviz.models import flash, scan  # noqa: E402

N, DH, BLOCK, TOP = 300, 16, 64, 8
KINDS = ("random", "rising", "falling", "tied", "far below", "huge")


def patterns() -> torch.Tensor:
    """(kinds, N) float32: one row of scores of each kind over the N keys."""
    generator = torch.Generator().manual_seed(0)
    far = torch.full((N,), -1e4)
    far[N // 2] = 0.0  # one key far above the rest: their e^{s − m} underflow to 0
    return torch.stack([
        5 * torch.randn(N, generator=generator),
        torch.arange(N, dtype=torch.float32) / 7,  # the maximum moves at every block of keys
        -torch.arange(N, dtype=torch.float32) / 7,
        torch.full((N,), 3.25),
        far,
        1e4 + torch.randn(N, generator=generator),  # float32's step there is 10⁻³
    ])


def arch(causal: bool, window: int | None = None) -> SimpleNamespace:
    """What the kernel reads of an Architecture: one head, its rules."""
    return SimpleNamespace(relative_span=0, alibi=False, score_cap=None, kv_heads=1, heads=1, causal=causal,
                           windows=(window,))


def exact_scores() -> tuple[torch.Tensor, torch.Tensor]:
    """Queries (1, N, DH) and keys (1, N, DH) whose products are the patterns exactly: query q is the one-hot of its
    kind, q mod kinds, and key j holds each kind's score for j in that kind's place."""
    rows = patterns()  # (kinds, N)
    kinds = torch.arange(N) % len(KINDS)  # (N,)
    query = torch.nn.functional.one_hot(kinds, DH).float()[None]  # (1, N, DH)
    key = torch.zeros(1, N, DH)
    key[0, :, :len(KINDS)] = rows.T  # (N, kinds)
    return query, key


@pytest.mark.parametrize("causal", [False, True], ids=["every key", "causal"])
@pytest.mark.parametrize("sink", [None, 1.5])
def test_the_kernel_equals_the_float64_softmax_on_rows_that_break_a_careless_one(causal, sink, interpreted):
    """Every kind of row, whole (an encoder) and causal (hidden keys, query 0 reading one key), with and without a
    learned sink. The scores are exact, so the only error is the exponentials' and the sums': a relative δ = λ√n·u
    on each weight."""
    query, key = exact_scores()
    value = torch.randn(1, N, DH, generator=torch.Generator().manual_seed(1))
    summaries = scan.Summaries(1, N, BLOCK, TOP)
    output, normaliser = flash.attend(arch(causal), 0, query, key, value, summaries,
                                      None if sink is None else torch.tensor([sink]))
    scores = (query.double() @ key.double().transpose(1, 2))[0]  # (N, N) exact
    if causal:
        scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    full = scores if sink is None else torch.cat([scores, torch.full((N, 1), sink, dtype=torch.float64)], 1)
    lse = torch.logsumexp(full, -1)  # (N,)
    every = torch.exp(full - lse[:, None])  # (N, N [+ 1])
    weights = every[:, :N]  # (N, N)
    delta = LAMBDA * math.sqrt(N) * U32
    assert float((normaliser[0] - lse).abs().max()) <= delta
    logs = torch.log(every.clamp_min(1e-300))
    entropy = -(every * logs).sum(-1)  # (N,)
    spread = (every * (logs - logs.amax(-1, keepdim=True)).abs()).sum(-1)  # (N,) Σ α |s − max s|
    assert bool(((summaries.entropy[0].double() - entropy).abs() <= delta * (1 + spread)).all())
    strongest = weights.topk(TOP, -1).values  # (N, TOP)
    assert bool(((summaries.strongest_weights[0].double() - strongest).abs() <= (delta + 2 * U32) * strongest + 1e-30).all())
    named = weights.gather(-1, summaries.strongest_keys[0].long())  # (N, TOP)
    assert bool(((named - strongest).abs() <= (delta + 2 * U32) * strongest + 1e-30).all())
    assert float((output[0].double() - weights @ value[0].double()).abs().max()) <= 2 * delta * float(value.abs().max())
    count = math.ceil(N / BLOCK)
    for a in range(count):
        for b in range(count):
            share = weights[a * BLOCK:(a + 1) * BLOCK, b * BLOCK:(b + 1) * BLOCK].sum(-1).mean()
            assert abs(float(summaries.overview[0, a, b]) - float(share)) <= 2 * delta * float(share) + 1e-12, (a, b)
    first = weights[1:, 0].sum()
    assert abs(float(summaries.first[0]) - float(first)) <= 2 * delta * float(first) + 1e-12
    tied = torch.arange(N) % len(KINDS) == KINDS.index("tied")
    if not causal:  # a tied row's strongest keys are its first ones, each 1/N (1/(N + e^{s_sink − s}) with a sink)
        assert bool((summaries.strongest_keys[0][tied] == torch.arange(TOP, dtype=torch.int32)).all())


def test_a_window_hides_whole_blocks_of_keys(interpreted):
    """A sliding window shorter than a block: most of a late query's blocks of keys are hidden whole, and the keys it
    reads start inside a block."""
    query, key = exact_scores()
    value = torch.randn(1, N, DH, generator=torch.Generator().manual_seed(2))
    summaries = scan.Summaries(1, N, BLOCK, TOP)
    output, normaliser = flash.attend(arch(True, 37), 0, query, key, value, summaries)
    i, j = torch.arange(N)[:, None], torch.arange(N)[None, :]
    scores = (query.double() @ key.double().transpose(1, 2))[0].masked_fill(~((j <= i) & (j > i - 37)), float("-inf"))
    weights = torch.softmax(scores, -1)  # (N, N)
    delta = LAMBDA * math.sqrt(N) * U32
    assert float((normaliser[0] - torch.logsumexp(scores, -1)).abs().max()) <= delta
    assert float((output[0].double() - weights @ value[0].double()).abs().max()) <= 2 * delta * float(value.abs().max())
    named = summaries.strongest_weights[0] > 0  # (N, TOP) a query reading fewer than TOP keys names hidden ones at weight 0
    assert bool((summaries.strongest_keys[0][named] > (i - 37).expand(N, TOP)[named]).all())


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """A tiny Llama-like model: grouped K/V heads (8 on 2), a sliding window, rotary positions."""
    from test_scan import build

    return models.load(build("mistral", tmp_path_factory.mktemp("flash")), device="cpu")


def test_a_scan_through_the_kernel_is_the_scan_of_the_cpu_path(mistral, interpreted, monkeypatch):
    from test_scan import long_text

    pieces = mistral.scan(long_text(mistral, 300), block=128).pieces  # three blocks, the last short
    heard = []
    fused = scan.scan(mistral.arch, mistral.weights, pieces, "m", block=128,
                      progress=lambda done, total: heard.append((done, total)))
    steps = mistral.arch.layers * math.ceil(len(pieces.ids) / 128)
    assert heard == [(done, steps) for done in range(1, steps + 1)]  # the progress bar hears each layer's steps
    monkeypatch.setenv(flash.SETTING, "0")
    cpu = scan.scan(mistral.arch, mistral.weights, pieces, "m", block=128)
    for name in ("overview", "sink", "entropy", "strongest_weights", "normalisers", "next_logits"):
        assert np.abs(getattr(fused, name) - getattr(cpu, name)).max() <= 1e-5, name  # float32 rounding alone
    n = len(cpu)
    weights = cpu.tile(1, 5, slice(0, n), slice(0, n))  # (n, n)
    picked = np.take_along_axis(weights, fused.strongest_keys[1, 5].astype(np.int64), -1)  # (n, top)
    assert np.abs(picked - fused.strongest_weights[1, 5]).max() <= 1e-5


def test_the_kernel_says_why_it_declines_a_layer(monkeypatch):
    query = torch.zeros(2, 4, 8)
    plain = SimpleNamespace(relative_span=0)
    monkeypatch.setattr(flash, "tl", None)
    assert "Triton is not installed" in flash.declined(plain, query, 128)
    monkeypatch.undo()
    if flash.tl is None:
        pytest.skip("Triton is not installed")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv(flash.SETTING, raising=False)
    assert "on the CPU" in flash.declined(plain, query, 128)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert flash.declined(plain, query, 128) is None
    assert "relative terms" in flash.declined(SimpleNamespace(relative_span=8), query, 128)
    assert "no multiple of 16" in flash.declined(plain, query, 100)
    assert [flash.tile(b) for b in (128, 48, 32, 100, 8)] == [64, 16, 32, 0, 0]
    monkeypatch.setenv(flash.SETTING, "0")
    assert "turns the fused kernel off" in flash.declined(plain, query, 128)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent one, README: GPU)")
def test_on_cuda_the_compiled_kernel_gives_the_cpus_scan(tmp_path):
    from test_scan import build, long_text

    folder = build("mistral", tmp_path)
    cpu_model, gpu_model = models.load(folder, device="cpu"), models.load(folder, device="cuda")
    assert flash.declined(gpu_model.arch, torch.zeros(1, device="cuda"), 128) is None
    text = long_text(cpu_model, 1024)
    gpu, cpu = gpu_model.scan(text, block=128), cpu_model.scan(text, block=128)
    for name in ("overview", "sink", "entropy", "strongest_weights", "normalisers", "next_logits"):
        assert np.abs(getattr(gpu, name) - getattr(cpu, name)).max() <= 1e-5, name


def test_a_kernel_triton_cannot_build_leaves_the_scan_to_torchs_passes(mistral, interpreted, monkeypatch):
    """Where Triton cannot build or launch the kernel (a GPU it does not know, too little shared memory), the scan still
    completes, through torch's passes, with the same numbers, and declined says why from then on."""
    from test_scan import long_text
    from triton.compiler.errors import CompilationError

    class Unbuildable:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise CompilationError("kernel.py", None, "no such instruction on this GPU")
            return launch

    pieces = mistral.scan(long_text(mistral, 200), block=128).pieces
    monkeypatch.setattr(flash, "_kernel", lambda interpret: Unbuildable())
    monkeypatch.setattr(flash, "_failed", None)
    heard = []
    fallen = scan.scan(mistral.arch, mistral.weights, pieces, "m", block=128,
                       progress=lambda done, total: heard.append(done))
    assert "Triton could not build or launch the kernel here (CompilationError" in flash.declined(
        mistral.arch, torch.zeros(1), 128)
    assert heard == list(range(1, len(heard) + 1)) and len(heard) == mistral.arch.layers * 2
    monkeypatch.setattr(flash, "_failed", None)
    monkeypatch.setenv(flash.SETTING, "0")
    cpu = scan.scan(mistral.arch, mistral.weights, pieces, "m", block=128)
    for name in ("overview", "entropy", "strongest_weights", "normalisers", "next_logits"):
        assert np.array_equal(getattr(fallen, name), getattr(cpu, name)), name
