"""What each head of a run looks at on average (after Clark et al., 2019), and the rollout across layers.

    from attnviz import models
    model = models.load("minilm")
    run = model.run("When he saw his owner, the dog was happy, so he wagged his tail")
    models.head_summaries(run.weights, run.pieces.tokens)["previous"]  # (layers, heads)
    models.rollout(run)                                                 # (n, n)
"""

from __future__ import annotations

import unicodedata

import numpy as np
import torch

from attnviz.functional import entropy
from attnviz.encdec import rollout as _rollout
from attnviz.models.result import Run


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


SUMMARIES = {
    "cls": "to the first piece",
    "sep": "to the last piece",
    "self": "to itself",
    "previous": "to the previous piece",
    "next": "to the next piece",
    "punctuation": "to punctuation",
    "entropy": "entropy (nats)",
}


def summary_names(labels: list[str]) -> dict[str, str]:
    """SUMMARIES with the text's own first and last pieces named ("to the first piece [CLS]")."""
    return {**SUMMARIES, "cls": f"to the first piece {labels[0]}", "sep": f"to the last piece {labels[-1]}"}


def head_summaries(weights: np.ndarray, tokens: list[str]) -> dict[str, np.ndarray]:
    """For each head (layers, heads): the mean weight per query to the first piece ([CLS] in BERT), to the last ([SEP]),
    to itself, to the previous and the next piece, to punctuation, and the mean entropy of its rows (Clark et al.)."""
    n = weights.shape[-1]
    rows = np.arange(n)  # (n,)
    punct = np.array([is_punctuation(t) for t in tokens])  # (n,)
    w = torch.from_numpy(weights)  # (L, H, n, n)
    zero = np.zeros(weights.shape[:2], np.float32)  # (L, H)
    return {
        "cls": weights[..., :, 0].mean(-1),
        "sep": weights[..., :, n - 1].mean(-1),
        "self": weights[..., rows, rows].mean(-1),
        "previous": weights[..., rows[1:], rows[1:] - 1].mean(-1) if n > 1 else zero,
        "next": weights[..., rows[:-1], rows[:-1] + 1].mean(-1) if n > 1 else zero,
        "punctuation": weights[..., punct].sum(-1).mean(-1),
        "entropy": entropy(w).mean(-1).numpy(),
    }


def rollout(run: Run) -> np.ndarray:
    """(n, n) attention rollout of the head-averaged weights through every layer (Abnar and Zuidema, 2020)."""
    return _rollout([torch.from_numpy(layer.mean(0)) for layer in run.weights]).numpy()
