import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnviz.embeddings import embed, tokenize
from attnviz.sentence import Config, ScoresOverflow, max_tokens_setting, run, steps, temperature_grid

DOG = "When he saw his owner, the dog was happy, so he wagged his tail"


@pytest.fixture(scope="module")
def x(glove):
    return embed(tokenize(DOG), glove).vectors  # (16, 50)


def test_identity_view_matches_sdpa(x):
    view = run(x, Config(), device=torch.device("cpu"))
    xt = torch.from_numpy(x)
    expected = F.scaled_dot_product_attention(xt, xt, xt)
    np.testing.assert_allclose(view.output, expected.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(view.mixture, view.weights[0].astype(np.float64) @ x, rtol=1e-5, atol=1e-6)  # m_i = Σ_j α_ij x_j
    assert view.weights.shape == (1, 16, 16) and view.device == "cpu"


def test_random_projection_heads_and_causal(x):
    config = Config(projection="random", d_k=8, heads=4, bias=True, mask="causal", seed=5)
    view = run(x, config, device=torch.device("cpu"))
    assert view.weights.shape == (4, 16, 16) and view.output.shape == (16, 50)
    np.testing.assert_allclose(view.weights.sum(-1), 1, rtol=1e-5)
    assert np.all(np.triu(view.weights, 1) == 0)
    for h in range(4):
        q, k, v = (torch.from_numpy(a[h]) for a in (view.query, view.key, view.value))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        np.testing.assert_allclose(view.head_output[h], expected.numpy(), rtol=1e-4, atol=1e-5)
    mean = view.weights.astype(np.float64).mean(0)  # (16, 16) the head average
    np.testing.assert_allclose(view.mixture, mean @ x, rtol=1e-4, atol=1e-5)  # of the inputs X, not of V


def test_hiding_every_key_reports_blocked_rows(x):
    view = run(x, Config(mask="keys", hidden=tuple(range(16))), device=torch.device("cpu"))
    assert view.blocked_rows == list(range(16))
    assert not np.isnan(view.weights).any() and np.all(view.weights == 0)


@pytest.mark.parametrize("config", [
    Config(),
    Config(temperature=0.5, mask="causal"),
    Config(projection="random", heads=2, d_k=4, bias=True, scoring="scaled_dot", temperature=2.0),
    Config(scoring="cosine", hard=True),
    Config(projection="random", d_k=6, scoring="additive"),
])
def test_steps_reproduce_the_engine(x, config):
    """Each step's matrix, pushed through the formula the step shows, gives the next step's matrix."""
    view = run(x, config, device=torch.device("cpu"))
    walk = {s.title.split(" (")[0]: s for s in steps(view, head=config.heads - 1)}
    h = config.heads - 1
    np.testing.assert_array_equal(walk["Input X"].matrix, x)
    for name, array in (("Q", view.query), ("K", view.key), ("V", view.value)):
        np.testing.assert_array_equal(walk[name].matrix, array[h])
    if config.scoring == "scaled_dot":
        raw = walk["Raw dot products"].matrix
        np.testing.assert_allclose(raw / math.sqrt(view.query.shape[-1]), walk["Scaled scores"].matrix, rtol=1e-5, atol=1e-6)
        logits = walk["Scaled scores"].matrix
    else:
        logits = walk["Scores"].matrix
    if config.temperature != 1.0:
        logits = walk["Temperature"].matrix
        np.testing.assert_allclose(logits, view.scores[h] / config.temperature)
    allowed = walk["Mask"].matrix.astype(bool)
    masked = np.where(allowed, logits, -np.inf)
    if config.hard:
        expected = np.eye(16)[masked.argmax(-1)]
    else:
        expected = np.exp(masked - masked.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(walk["Weights"].matrix, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(walk["Output"].matrix, walk["Weights"].matrix @ walk["V"].matrix, rtol=1e-4, atol=1e-5)
    assert ("Heads combined" in walk) == (config.heads > 1)
    for step in walk.values():
        assert r"\mathbb{R}^{%d \times %d}" % step.matrix.shape in step.latex or "Mask" in step.title


def test_temperature_grid_is_log_spaced():
    grid = temperature_grid()
    assert grid[0] == 0.01 and grid[-1] == 100 and 1.0 in grid
    assert np.all(np.diff(np.log10(grid)) > 0) and np.all(np.diff(np.log10(grid)) < 0.45)


def test_row_entropy_of_the_head_average(x):
    view = run(x, Config(projection="random", heads=3, d_k=4), device=torch.device("cpu"))
    row = view.weights.mean(0)[5]
    assert view.entropy(5) == pytest.approx(-(row * np.log(row)).sum(), rel=1e-5)
    np.testing.assert_array_equal(view.mean_weights, view.weights.mean(0))


@pytest.mark.parametrize("value, cap, problem", [
    (None, 4096, False), ("", 4096, False), ("512", 512, False), (" 64 ", 64, False), ("4096", 4096, False),
    ("abc", 4096, True), ("0", 4096, True), ("-5", 4096, True), ("4097", 4096, True), ("1e3", 4096, True), ("nan", 4096, True),
])
def test_max_tokens_setting_is_validated(value, cap, problem):
    got, why = max_tokens_setting(value)
    assert got == cap and (why is not None) == problem
    if problem:
        assert repr(value) in why and "1 to 4,096" in why


@pytest.mark.parametrize("config", [
    Config(), Config(scoring="gaussian", sigma=2.0, mask="causal"),
    Config(scoring="additive", projection="random", heads=3, d_k=4, bias=True, additive_hidden=7),
    Config(projection="random", heads=4, d_k=5, mask="keys", hidden=(1, 3), temperature=0.5),
    Config(scoring="cosine", projection="random", heads=2, d_k=3, hard=True),
])
def test_one_head_at_a_time_equals_all_heads_at_once(config):
    x = np.random.default_rng(1).standard_normal((9, 6)).astype(np.float32)  # (n, d_model)
    full, light = run(x, config), run(x, config, keep_heads=False)
    assert light.weights is None and light.scores is None
    for name in ("mean_weights", "head_output", "output", "mixture", "allowed"):
        np.testing.assert_allclose(getattr(light, name), getattr(full, name), rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(full.mean_weights, full.weights.mean(0), rtol=1e-6)
    window = (slice(2, 7), slice(1, 5))
    for head in range(config.heads):
        np.testing.assert_allclose(light.scores_block(head, *window), full.scores[head][window], rtol=1e-5, atol=1e-5)
    assert light.nbytes < full.nbytes


def test_scores_past_float32_name_the_largest_inputs():
    x = np.ones((4, 3), np.float32)  # (n, d)
    x[2] = 1e19  # q·k = 3e38 fits float32, but ÷τ = 0.01 does not
    with pytest.raises(ScoresOverflow) as error:
        run(x, Config(scoring="dot", temperature=0.01))
    assert error.value.rows[0] == 2 and error.value.longest == pytest.approx(math.sqrt(3) * 1e19)
    assert run(x, Config(scoring="cosine")).weights is not None  # cosine divides the lengths out first


def test_explore_runs_the_pages_pipeline_and_problem_says_why_it_cannot(glove):
    """The Self-attention page's pipeline, in the library: a sentence's weights equal softmax(QKᵀ/√d) written out over
    its GloVe vectors, and each input it cannot draw gets its own message."""
    from attnviz.sentence import explore, problem

    found = explore("The dog was happy", glove, Config())
    x = torch.from_numpy(np.stack([glove[w] for w in ["the", "dog", "was", "happy"]]))  # (4, 50)
    expected = torch.softmax(x @ x.T / math.sqrt(50), -1)  # (4, 4)
    assert np.abs(found.view.weights[0] - expected.numpy()).max() < 1e-6 and problem(found, 10) is None
    assert problem(explore("  ?! ", glove, Config(), drop_punctuation=True), 10)[0].startswith("The sentence has no words")
    assert "the limit is 3" in problem(explore("one two three four", glove, Config(), max_tokens=3), 3)[0]
    assert "'random' policy" in problem(explore("qzxv wvqz", glove, Config()), 10)[0]
    assert "leaves none" in problem(explore("qzxv wvqz", glove, Config(), oov="drop"), 10)[0]
    assert explore("qzxv wvqz", glove, Config(), oov="random").view is not None  # each unknown word a vector of its own
    huge = {"big": np.full(50, 1e20, np.float32), "dog": glove["dog"]}
    vectors = type("Vectors", (), {"key_to_index": huge, "vector_size": 50, "norms": None,
                                   "__getitem__": lambda self, w: huge[w]})()
    message, user_error = problem(explore("big dog", vectors, Config()), 10)
    assert "larger than float32 can hold" in message and "'big'" in message and user_error
