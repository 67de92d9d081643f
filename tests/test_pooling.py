import math

import numpy as np
import pytest
import torch

from attnviz.functional import attend, gaussian
from attnviz.pooling import (
    blobs, classify, dot_variance, fit_bandwidth, loo_loss, nadaraya_watson, salary_data,
    softmax_entropy,
)


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov", "scaled_dot"])
def test_nadaraya_watson_is_the_closed_form_weighted_mean(kernel):
    x, y = salary_data(30, 2000, "linear", 1)
    queries = np.array([2.1, 2.9, 3.6])
    predictions, weights = nadaraya_watson(queries, x, y, kernel, 0.3)
    for q, prediction in zip(queries, predictions):
        u = (q - x) / 0.3
        k = {"gaussian": np.exp(-u**2 / 2), "boxcar": (np.abs(u) <= 1).astype(float),
             "epanechnikov": np.clip(1 - u**2, 0, None), "scaled_dot": np.exp(q * x / 0.3 - np.max(q * x / 0.3))}[kernel]
        assert prediction == pytest.approx(np.sum(k * y) / np.sum(k), rel=1e-9)
    np.testing.assert_allclose(weights.sum(1), 1)


def test_gaussian_pooling_equals_attend_with_the_gaussian_score():
    x, y = salary_data(25, 1000, "convex", 2)
    q = np.linspace(2, 4, 9)
    predictions, _ = nadaraya_watson(q, x, y, "gaussian", 0.2)
    result = attend(torch.tensor(q)[:, None], torch.tensor(x)[:, None], torch.tensor(y)[:, None], scoring=gaussian(0.2))
    np.testing.assert_allclose(predictions, result.output[:, 0].numpy(), rtol=1e-12)


def test_fitted_sigma_lowers_the_leave_one_out_loss():
    x, y = salary_data(50, 3000, "saturating", 3)
    fit = fit_bandwidth(x, y, start=1.0)
    xt, yt = torch.tensor(x), torch.tensor((y - y.mean()) / y.std())
    before = float(loo_loss(torch.tensor(math.log(1.0)), xt, yt))
    after = float(loo_loss(torch.tensor(math.log(fit.sigma)), xt, yt))
    assert after < before
    assert fit.losses[-1] < fit.losses[0]
    assert abs(math.log(fit.sigma / fit.grid_sigma)) < 0.2  # gradient descent lands near the grid's best


def test_fit_reports_every_step_as_it_goes():
    x, y = salary_data(20, 2000, "saturating", 1)
    seen = []
    fit = fit_bandwidth(x, y, steps=12, on_step=lambda step, losses, sigmas: seen.append((step, list(losses), list(sigmas))))
    assert [s for s, _, _ in seen] == list(range(1, 13))
    assert all(len(losses) == len(sigmas) == step for step, losses, sigmas in seen)
    assert seen[-1][1] == fit.losses and seen[-1][2] == fit.sigmas and fit.sigma == fit.sigmas[-1]
    yt = torch.tensor((y - y.mean()) / y.std(ddof=1))  # as the fit standardises: torch.std is the sample std
    # the loss reported at step s is the loss at the σ reached after step s − 1 (σ = 1 before the first)
    for s, sigma in ((1, 1.0), (7, fit.sigmas[5])):
        assert seen[-1][1][s - 1] == pytest.approx(float(loo_loss(torch.tensor(math.log(sigma)), torch.tensor(x), yt)), rel=1e-6)


def test_hard_classification_is_one_nearest_neighbour():
    rng = np.random.default_rng(0)
    points, labels = rng.normal(size=(40, 2)), rng.integers(0, 4, 40)
    queries = rng.normal(size=(100, 2))
    hard = classify(queries, points, labels, 4, sigma=0.7, hard=True).argmax(1)
    nearest = labels[np.argmin(((queries[:, None] - points[None]) ** 2).sum(-1), 1)]
    np.testing.assert_array_equal(hard, nearest)
    soft = classify(queries, points, labels, 4, sigma=0.7, hard=False)
    np.testing.assert_allclose(soft.sum(1), 1)


def test_blobs_are_seeded():
    a, la = blobs(5, 3, 0.5, 1)
    b, lb = blobs(5, 3, 0.5, 1)
    assert np.array_equal(a, b) and np.array_equal(la, lb) and a.shape == (15, 2)


def test_dot_product_variance_is_d():
    dims = [4, 64, 512]
    variance = dot_variance(dims, 20000, seed=0)
    np.testing.assert_allclose(variance, dims, rtol=0.10)


def test_scaling_keeps_softmax_entropy_level():
    dims = [4, 64, 512]
    scaled = softmax_entropy(dims, keys=32, queries=500, scaled=True, seed=0)
    unscaled = softmax_entropy(dims, keys=32, queries=500, scaled=False, seed=0)
    assert np.ptp(scaled) < 0.2 and unscaled[-1] < unscaled[0] / 3
