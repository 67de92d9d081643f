"""Attention pooling: Nadaraya–Watson regression and classification, and the scoring-function measurements.

Keys are the training inputs x_i, values their labels y_i, queries new points. With the Gaussian
kernel this is exactly softmax attention with the score −(q−k)²/2σ².
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from attnviz.functional import attend, entropy, gaussian, make_scorer

KERNELS = ("gaussian", "boxcar", "epanechnikov", "scaled_dot")
TRUE_FUNCTIONS = {
    "linear": lambda gpa: 30_000 + 12_000 * gpa,
    "convex": lambda gpa: 40_000 + 2_500 * gpa**2,
    "saturating": lambda gpa: 45_000 + 30_000 * (1 - np.exp(-1.5 * (gpa - 2.0))),
}


def salary_data(n: int, noise: float, function: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n GPAs uniform in [2, 4] and salaries = f(GPA) + N(0, noise²), sorted by GPA."""
    rng = np.random.default_rng(seed)
    gpa = np.sort(rng.uniform(2.0, 4.0, n))  # (n,)
    salary = TRUE_FUNCTIONS[function](gpa) + rng.normal(0.0, noise, n)  # (n,)
    return gpa, salary


def kernel_weights(query: np.ndarray, key: np.ndarray, kernel: str, bandwidth: float) -> np.ndarray:
    """Pooling weights (M, N): row i is K((q_i − x_j)/h) normalised over j.

    gaussian and scaled_dot go through the engine's softmax; boxcar and Epanechnikov have no
    exponential, so their normalisation is a plain division (a row with no key in reach gets zeros).
    """
    q = torch.as_tensor(query, dtype=torch.float64)[:, None]  # (M, 1)
    k = torch.as_tensor(key, dtype=torch.float64)[:, None]  # (N, 1)
    values = torch.eye(len(key), dtype=torch.float64)  # (N, N): output = weights
    if kernel == "gaussian":
        return attend(q, k, values, scoring=gaussian(bandwidth)).weights.numpy()
    if kernel == "scaled_dot":
        return attend(q, k, values, scoring=make_scorer("scaled_dot", 1, 1), temperature=bandwidth).weights.numpy()
    u = np.abs(query[:, None] - key[None, :]) / bandwidth  # (M, N)
    raw = (u <= 1).astype(float) if kernel == "boxcar" else np.clip(1 - u**2, 0, None) * 0.75  # (M, N)
    total = raw.sum(1, keepdims=True)  # (M, 1)
    return np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)


def nadaraya_watson(query, key, value, kernel: str, bandwidth: float) -> tuple[np.ndarray, np.ndarray]:
    """(predictions (M,), weights (M, N)): f̂(q) = Σ_j α(q, x_j) y_j."""
    weights = kernel_weights(np.asarray(query, float), np.asarray(key, float), kernel, bandwidth)  # (M, N)
    return weights @ np.asarray(value, float), weights


def loo_loss(log_sigma: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Leave-one-out squared error of Gaussian pooling: each point predicted from all the others."""
    sigma = log_sigma.exp()
    n = x.shape[0]
    own = torch.eye(n, dtype=torch.bool, device=x.device)  # (n, n)
    result = attend(x[:, None], x[:, None], y[:, None], scoring=gaussian(sigma), mask=~own)  # σ may be a tensor that carries a gradient
    return ((result.output[:, 0] - y) ** 2).mean()


@dataclass
class BandwidthFit:
    sigma: float
    start_sigma: float
    losses: list[float]  # scaled loss per step
    sigmas: list[float]  # σ after each step
    grid_sigma: float
    device: str


def fit_bandwidth(x, y, *, start: float = 1.0, steps: int = 150, lr: float = 0.05, device=None,
                  on_step: Callable[[int, list[float], list[float]], None] | None = None) -> BandwidthFit:
    """Learn σ by gradient descent (Adam on log σ) on the leave-one-out loss, and find the grid's best σ.
    `on_step(step, losses, sigmas)` is called after every step, with the curves so far, to draw them live."""
    device = device or torch.device("cpu")
    xt = torch.as_tensor(x, dtype=torch.float64, device=device)  # (n,)
    yt = torch.as_tensor(y, dtype=torch.float64, device=device)  # (n,)
    scale = yt.std().clamp_min(1e-12)
    yt = (yt - yt.mean()) / scale  # unit-free loss, so one learning rate suits salaries and small numbers alike
    log_sigma = torch.tensor(math.log(start), dtype=torch.float64, device=device, requires_grad=True)
    optimizer = torch.optim.Adam([log_sigma], lr=lr)
    losses, sigmas = [], []
    for step in range(steps):
        optimizer.zero_grad()
        loss = loo_loss(log_sigma, xt, yt)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        sigmas.append(float(log_sigma.detach().exp()))
        if on_step is not None:
            on_step(step + 1, losses, sigmas)
    grid = np.logspace(-2.5, 0.5, 121)
    with torch.no_grad():
        grid_losses = [float(loo_loss(torch.tensor(math.log(s), dtype=torch.float64, device=device), xt, yt)) for s in grid]
    return BandwidthFit(sigmas[-1] if sigmas else start, start, losses, sigmas, float(grid[int(np.argmin(grid_losses))]),
                        str(device))


# ---------------------------------------------------------------- classification


def blobs(n_per_class: int, classes: int, spread: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """2-D points around `classes` centres on a circle, with integer labels."""
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * np.arange(classes) / classes
    centres = np.stack([np.cos(angles), np.sin(angles)], 1) * 2  # (C, 2)
    labels = np.repeat(np.arange(classes), n_per_class)  # (n,)
    points = centres[labels] + rng.normal(0, spread, (len(labels), 2))  # (n, 2)
    return points, labels


def classify(query: np.ndarray, points: np.ndarray, labels: np.ndarray, classes: int, *, sigma: float, hard: bool) -> np.ndarray:
    """Class probabilities (M, C): attention over the training points with one-hot values."""
    values = torch.nn.functional.one_hot(torch.as_tensor(labels), classes).double()  # (N, C)
    q = torch.as_tensor(query, dtype=torch.float64)  # (M, 2)
    k = torch.as_tensor(points, dtype=torch.float64)  # (N, 2)
    return attend(q, k, values, scoring=gaussian(sigma), hard=hard).output.numpy()  # (M, C)


# ---------------------------------------------------------------- why divide by √d


def dot_variance(dims, samples: int, seed: int) -> np.ndarray:
    """Sample variance of q·k for q, k with i.i.d. N(0, 1) entries, for each d. Theory: d."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for d in dims:
        q = torch.randn(samples, d, generator=generator, dtype=torch.float64)  # (S, d)
        k = torch.randn(samples, d, generator=generator, dtype=torch.float64)  # (S, d)
        out.append(float((q * k).sum(-1).var()))
    return np.array(out)


def softmax_entropy(dims, *, keys: int, queries: int, scaled: bool, seed: int) -> np.ndarray:
    """Mean entropy of softmax(q·k) or softmax(q·k/√d) rows over `keys` random keys, for each d."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for d in dims:
        q = torch.randn(queries, d, generator=generator, dtype=torch.float64)  # (M, d)
        k = torch.randn(keys, d, generator=generator, dtype=torch.float64)  # (N, d)
        weights = attend(q, k, k, scoring="scaled_dot" if scaled else "dot", need_scores=False).weights  # (M, N)
        out.append(float(entropy(weights).mean()))
    return np.array(out)
