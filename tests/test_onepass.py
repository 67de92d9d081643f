"""onepass.py (beside this test), the one-pass arithmetic a fused kernel for the scan does, against the float64 softmax
written out, on random rows and on the rows that break a careless one: rising (the maximum moves at every block),
falling, tied, fully hidden, one key visible, scores far below the maximum, huge scores, and a learned sink."""

import math

import numpy as np
import pytest
import torch

from onepass import one_pass

U32 = 2.0 ** -24
LAMBDA = 4.0  # as tests/tolerance.py: λ√n·u bounds a float32 sum of n terms in any order


def rows(n: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, n, generator=generator)
    hidden[:, n // 3:] = float("-inf")  # a causal row's later keys
    far = torch.full((3, n), -1e4)
    far[:, n // 2] = 0.0  # one key far above the rest: their e^{s − m} underflow to 0
    one = torch.full((3, n), float("-inf"))
    one[:, 7] = 2.5
    return {
        "random": 5 * torch.randn(4, n, generator=generator),
        "rising": torch.arange(n, dtype=torch.float32).repeat(2, 1) / 7,
        "falling": -torch.arange(n, dtype=torch.float32).repeat(2, 1) / 7,
        "tied": torch.full((2, n), 3.25),
        "hidden": hidden,
        "every key hidden": torch.full((2, n), float("-inf")),
        "one key": one,
        "far below": far,
        "huge": 1e4 + torch.randn(2, n, generator=generator),
    }


def truth(scores: torch.Tensor, block: int, top: int, sink=None):
    """The float64 softmax of each row written out: (log Σ e^s, weights, entropy, block sums, top weights)."""
    s = scores.double()  # (r, n)
    full = s if sink is None else torch.cat([s, torch.full((s.shape[0], 1), float(sink), dtype=torch.float64)], -1)
    lse = torch.logsumexp(full, -1)  # (r,)
    every = torch.exp(full - lse[:, None]).nan_to_num(0.0)  # (r, n [+ 1]); a fully hidden row: 0
    weights = every[:, :s.shape[1]]  # (r, n)
    entropy = -(every * torch.log(every.clamp_min(1e-300))).sum(-1)  # (r,) the sink one more outcome
    blocks = torch.stack([weights[:, b:b + block].sum(-1) for b in range(0, s.shape[1], block)], -1)  # (r, B)
    return lse, weights, entropy, blocks, torch.topk(weights, top, -1).values


@pytest.mark.parametrize("name", list(rows(300)))
@pytest.mark.parametrize("block", [16, 64, 1000])
@pytest.mark.parametrize("sink", [None, 1.5])
def test_one_pass_equals_the_float64_softmax_written_out(name, block, sink):
    scores = rows(300)[name]
    n, top = scores.shape[1], 8
    found = one_pass(scores, block, top, sink=sink)
    lse, weights, entropy, blocks, strongest_weights = truth(scores, block, top, sink)
    within = LAMBDA * math.sqrt(n) * U32  # relative: one float32 sum of n terms, in blocks, in any order
    finite = torch.isfinite(lse)
    assert torch.equal(torch.isfinite(found.log_sum_exp), finite)  # −∞ exactly where every key is hidden
    ulp = torch.where(finite, lse.abs(), torch.zeros_like(lse)) * U32  # log Σ's own rounding, beside its sum's
    assert ((found.log_sum_exp.double() - lse).abs()[finite] <= within + 2 * ulp[finite]).all()
    assert ((found.strongest_weights.double() - strongest_weights).abs() <= within * strongest_weights + 1e-12).all()
    assert ((found.block_sums.double() - blocks).abs() <= within + 1e-12).all()
    assert ((found.entropy.double() - entropy).abs() <= within * (1 + entropy) + 1e-6).all()
    chosen = weights.gather(-1, found.strongest_keys)  # the keys it names hold the weights it reports
    assert ((chosen - strongest_weights).abs() <= within * strongest_weights + 1e-12).all()
    if sink is None:
        sums = found.block_sums.sum(-1)
        assert torch.allclose(sums[finite], torch.ones_like(sums[finite]), atol=within)  # each row's weights sum to 1
    if name == "every key hidden":
        assert (found.entropy == 0).all() and (found.strongest_weights == 0).all() and (found.block_sums == 0).all()


def test_the_order_of_the_blocks_changes_nothing_but_rounding():
    """A row read in blocks of 1 (the maximum moves at nearly every key) equals the row read whole."""
    scores = 3 * torch.randn(5, 257, generator=torch.Generator().manual_seed(3))
    one_by_one, whole = one_pass(scores, 1, 4), one_pass(scores, 257, 4)
    assert torch.equal(one_by_one.strongest_keys, whole.strongest_keys)
    assert torch.allclose(one_by_one.log_sum_exp, whole.log_sum_exp, atol=LAMBDA * math.sqrt(257) * U32 * 10)
    assert torch.allclose(one_by_one.entropy, whole.entropy, atol=LAMBDA * math.sqrt(257) * U32 * 10)


def test_the_scans_summaries_are_what_one_pass_gives_on_its_scores(tmp_path):
    """The scan (its C kernel where built, else torch's passes) and the one-pass arithmetic agree on a model's rows:
    each query's normaliser, entropy and strongest weights, Mistral's sliding window included."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import tiny_models

    from attnviz import models
    from attnviz.models import engine

    model = models.load(tiny_models.build("mistral", tmp_path), device="cpu")
    text = ""
    for sentence in tiny_models.CORPUS * 4:  # as many sentences as the model's context holds
        if len(model.reader(f"{text} {sentence}", limit=10**6)) > model.context:
            break
        text = f"{text} {sentence}".strip()
    scan = model.scan(text, block=16, strongest=5)
    n, arch = len(scan), model.arch
    for layer in range(scan.layers):
        query = scan.queries[layer].double()  # (H, n, dh) already over √dh
        key = scan.keys[layer].double().repeat_interleave(arch.heads // arch.kv_heads, 0)  # (H, n, dh)
        scores = query @ key.transpose(-2, -1)  # (H, n, n)
        allowed = engine.allowed_keys(arch, layer, torch.arange(n), n)  # (n, n)
        scores = scores.masked_fill(~allowed, float("-inf")).float()
        found = one_pass(scores, 16, 5)
        within = LAMBDA * math.sqrt(n) * U32
        assert np.abs(found.log_sum_exp.double().numpy() - scan.normalisers[layer]).max() <= within * 10
        assert np.abs(found.entropy.numpy() - scan.entropy[layer]).max() <= within * 10
        assert np.abs(found.strongest_weights.numpy() - scan.strongest_weights[layer]).max() <= within
