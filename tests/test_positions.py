"""Position encodings against their formulas written out, and self-attention's blindness to word order."""

import math

import numpy as np
import pytest
import torch

from attnviz.positions import cosine_similarity, permutation, rotary_similarity, rotate, sinusoidal
from attnviz.sentence import Config, run


def test_sinusoidal_equals_the_formula():
    n, d = 12, 7  # an odd d: the last dimension is a sine
    pe = sinusoidal(n, d).numpy()  # (n, d)
    expected = np.array([[math.sin(p / 10000 ** (i / d)) if i % 2 == 0 else math.cos(p / 10000 ** ((i - 1) / d))
                          for i in range(d)] for p in range(n)])
    np.testing.assert_allclose(pe, expected, atol=1e-6)


def test_rotary_equals_complex_multiplication_and_keeps_lengths():
    """RoPE written as complex numbers: the pair (x_2i, x_2i+1) as x_2i + i·x_2i+1, times e^(i·p·θ_i)."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 9, 8, generator=generator, dtype=torch.float64)  # (H, n, d)
    turned = rotate(x, torch.arange(9))  # (H, n, d)
    z = torch.view_as_complex(x.reshape(2, 9, 4, 2).contiguous())  # (H, n, d/2)
    theta = 10000 ** (-torch.arange(4, dtype=torch.float64) * 2 / 8)  # (d/2,)
    expected = torch.view_as_real(z * torch.polar(torch.ones(9, 4, dtype=torch.float64), torch.arange(9.0)[:, None] * theta))
    torch.testing.assert_close(turned, expected.reshape(2, 9, 8))
    torch.testing.assert_close(turned.norm(dim=-1), x.norm(dim=-1))
    odd = torch.randn(5, 7, generator=generator)  # (n, 7): the 7th dimension has no pair and is kept
    torch.testing.assert_close(rotate(odd, torch.arange(5))[:, 6], odd[:, 6])


@pytest.mark.parametrize("scoring", ["dot", "scaled_dot", "cosine", "gaussian"])
def test_rotary_scores_depend_only_on_the_offset(scoring):
    """Every position shifted by a constant: the same scores (≤ 1e-5), for the scorers built on qᵀk or ‖q − k‖."""
    from attnviz.functional import make_scorer

    generator = torch.Generator().manual_seed(2)
    query, key = torch.randn(10, 16, generator=generator), torch.randn(10, 16, generator=generator)  # (n, d) each
    scorer = make_scorer(scoring, 16, 16)
    at_zero = scorer(rotate(query, torch.arange(10)), rotate(key, torch.arange(10)))  # (n, n)
    shifted = scorer(rotate(query, torch.arange(10) + 37), rotate(key, torch.arange(10) + 37))  # (n, n)
    torch.testing.assert_close(shifted, at_zero, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(at_zero, scorer(query, key), atol=1e-3)  # the rotation did change them


def test_rotary_similarity_is_a_function_of_the_offset():
    similarity = rotary_similarity(8, 16)  # (8, 8)
    for offset in range(-7, 8):
        assert np.ptp(np.diagonal(similarity, offset)) < 1e-6
    u = torch.ones(8, 16)  # the same vector at every position
    turned = rotate(u, torch.arange(8)).numpy()  # (8, 16)
    np.testing.assert_allclose(similarity, cosine_similarity(turned), atol=1e-6)
    assert similarity[0, 0] == pytest.approx(1)


def test_self_attention_is_blind_to_word_order_until_positions_are_added():
    """The same rows in another order: weights permuted exactly (≤ 1e-6) with no positions; not with either encoding."""
    generator = np.random.default_rng(3)
    x = generator.normal(size=(6, 50)).astype(np.float32)  # (n, d)
    order = [4, 0, 5, 2, 1, 3]
    assert permutation(list("abcdef"), [list("abcdef")[i] for i in order]) == order
    for config in (Config(), Config(projection="random", d_k=8, heads=2, bias=True, scoring="additive")):
        a, b = run(x, config).weights, run(x[order], config).weights  # (H, n, n) each
        np.testing.assert_allclose(b, a[:, order][:, :, order], atol=1e-6)
    for positions in ("sinusoidal", "rotary"):
        a, b = run(x, Config(positions=positions)).weights, run(x[order], Config(positions=positions)).weights
        assert np.abs(b - a[:, order][:, :, order]).max() > 1e-3, positions


def test_sinusoidal_and_rotary_attention_against_the_formulas():
    x = np.random.default_rng(4).normal(size=(5, 6)).astype(np.float64)  # (n, d)
    pe = np.array([[math.sin(p / 10000 ** (i / 6)) if i % 2 == 0 else math.cos(p / 10000 ** ((i - 1) / 6)) for i in range(6)]
                   for p in range(5)])  # (n, d)
    summed = x + pe
    logits = summed @ summed.T / math.sqrt(6)  # (n, n)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(run(x.astype(np.float32), Config(positions="sinusoidal")).weights[0],
                               expected / expected.sum(1, keepdims=True), atol=1e-6)
    turned = rotate(torch.from_numpy(x), torch.arange(5)).numpy()  # (n, d)
    logits = turned @ turned.T / math.sqrt(6)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(run(x.astype(np.float32), Config(positions="rotary")).weights[0],
                               expected / expected.sum(1, keepdims=True), atol=1e-6)


def test_permutation_matches_repeated_words_in_order_and_refuses_other_words():
    assert permutation(["the", "cat", "saw", "the", "dog"], ["the", "dog", "saw", "the", "cat"]) == [0, 4, 2, 3, 1]
    assert permutation(["dog", "bites", "man"], ["man", "bites", "dog"]) == [2, 1, 0]
    assert permutation(["a", "b"], ["a", "c"]) is None and permutation(["a"], ["a", "a"]) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_positions_on_cuda_match_the_cpu(positions):
    """Every tensor of the encodings on the engine's device (rotary's angles once stayed on the CPU)."""
    x = np.random.default_rng(5).normal(size=(40, 50)).astype(np.float32)  # (n, d)
    config = Config(positions=positions, projection="random", heads=2, d_k=16, bias=True)
    cpu, cuda = run(x, config, torch.device("cpu")), run(x, config, torch.device("cuda"))
    assert cuda.device.startswith("cuda")
    np.testing.assert_allclose(cuda.weights, cpu.weights, atol=1e-5)
