"""Reading a decoder's next piece (any decoder attnviz.models loads; the built-in is SmolLM2-135M-Instruct): the
distribution a sampler draws the next piece from, under temperature, top-k and top-p, and the most likely pieces.

    from attnviz import models
    from attnviz.decoder import next_distribution, top_pieces
    model = models.load("smollm2")
    run = model.run("When he saw his owner, the dog was")
    probs = next_distribution(torch.from_numpy(run.next_logits), temperature=0.7, top_k=50, top_p=0.95)
    ids, labels = top_pieces(model, probs.numpy(), 5)
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.models import Model


def next_distribution(logits_row: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(vocab,) the probabilities a sampler draws the next token from: softmax(logits / T), kept to the top_k most
    likely (0: all) and to the smallest set whose mass reaches top_p, renormalised. T = 0 is greedy (one-hot)."""
    logits_row = logits_row.float()
    if temperature <= 0:
        return torch.nn.functional.one_hot(logits_row.argmax(), logits_row.numel()).float()  # (vocab,)
    probs = torch.softmax(logits_row / temperature, -1)  # (vocab,)
    order = torch.argsort(probs, descending=True)  # (vocab,)
    ranked = probs[order]  # (vocab,)
    keep = torch.ones_like(ranked, dtype=torch.bool)  # (vocab,)
    if top_k > 0:
        keep[top_k:] = False
    if top_p < 1.0:
        before = torch.cumsum(ranked, 0) - ranked  # (vocab,) the mass of the tokens ranked above
        keep &= before < top_p  # the first token always stays
    kept = torch.zeros_like(probs)  # (vocab,)
    kept[order[keep]] = ranked[keep]
    return kept / kept.sum()


def sampler_text(temperature: float, top_k: int = 0, top_p: float = 1.0, seed: int | None = None) -> str:
    """The sampler next_distribution draws from, in words ("T = 0.7, top-k 50, top-p 0.95, seed 3"); the seed only
    where it matters (T > 0)."""
    if temperature <= 0:
        return "T = 0: greedy"
    return (f"T = {temperature:g}" + (f", top-k {top_k}" if top_k else "") + (f", top-p {top_p:g}" if top_p < 1 else "")
            + (f", seed {seed}" if seed is not None else ""))


def top_pieces(model: Model, probs: np.ndarray, k: int) -> tuple[np.ndarray, list[str]]:
    """The `k` most likely next pieces of a distribution (vocab,), those with any probability, most likely first:
    their ids and labels."""
    top = np.argsort(-probs, kind="stable")[:k]  # (≤k,)
    top = top[probs[top] > 0]
    return top, model.reader.labels([int(i) for i in top])
