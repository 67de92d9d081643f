"""A row of attention summarised in one pass over its keys, block by block, as FlashAttention keeps a softmax: the
arithmetic a fused GPU kernel for the scan does, written in torch so that it runs and is tested on any machine.

For each query, over blocks of keys in turn, nothing but a few numbers a row is kept:
- m, the largest score so far, and l = Σ e^{s − m}: when a block raises m to m′, l becomes l·e^{m − m′} + the block's;
- the entropy's moment, M = Σ e^{s − m}(s − m), moved to m′ as e^{m − m′}(M + (m − m′)·l): shifted, so no large
  score cancels against the log-sum-exp;
- each block's own sum Σ_{k in block} e^{s − m}, rescaled with l, for the overview;
- the strongest `top` scores and their keys.
At the end, once: log Σ e^s = m + log l, each weight e^{s − m} / l, the entropy log l − M / l (nats). A learned sink
(gpt-oss) is one more score in the normaliser, read by no key. A hidden key's score is −∞; a row with every key
hidden has no weights: its log-sum-exp is −∞ and its entropy, block sums and strongest weights are 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class OnePass:
    """One pass's summaries of rows of scores (..., r, n): log_sum_exp (..., r), entropy (..., r) in nats, block_sums
    (..., r, B) each key block's share of the row's weight, strongest_weights and strongest_keys (..., r, top), strongest first."""

    log_sum_exp: torch.Tensor
    entropy: torch.Tensor
    block_sums: torch.Tensor
    strongest_weights: torch.Tensor
    strongest_keys: torch.Tensor


def one_pass(scores: torch.Tensor, block: int, top: int, sink: torch.Tensor | None = None) -> OnePass:
    """The summaries of each row of `scores` (..., r, n), −∞ where a key is hidden, read `block` keys at a time in
    the scores' own dtype; `sink` (...,) or a number: a learned sink's logit in each row's normaliser."""
    *lead, r, n = scores.shape
    dtype, device = scores.dtype, scores.device
    m = torch.full((*lead, r), float("-inf"), dtype=dtype, device=device)  # (..., r) the largest score so far
    l = torch.zeros_like(m)  # (..., r) Σ e^{s − m}
    moment = torch.zeros_like(m)  # (..., r) Σ e^{s − m}(s − m)
    sums = []  # per block (..., r), each relative to the m of its time: rescaled at the end
    marks = []  # the m each block's sum was taken against
    best = torch.full((*lead, r, 0), float("-inf"), dtype=dtype, device=device)  # (..., r, ≤ top)
    best_keys = torch.zeros((*lead, r, 0), dtype=torch.long, device=device)
    for start in range(0, n, block):
        s = scores[..., start:start + block]  # (..., r, c)
        moved = torch.maximum(m, s.amax(-1))  # (..., r)
        scale = _exp_between(m, moved)  # (..., r) e^{m − m′}, 0 from an empty start
        e = _exp_between(s, moved[..., None])  # (..., r, c) e^{s − m′}, 0 where hidden
        shift = torch.where(torch.isfinite(moved), m - moved, torch.zeros_like(m))  # (..., r) m − m′
        shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # an empty start carries no moment
        moment = scale * (moment + shift * l) + torch.where(e > 0, e * (s - moved[..., None]), torch.zeros_like(e)).sum(-1)
        l = l * scale + e.sum(-1)  # (..., r)
        m = moved
        sums.append(e.sum(-1))
        marks.append(moved)
        keys = torch.arange(start, start + s.shape[-1], device=device).expand(*s.shape)  # (..., r, c)
        candidates = torch.cat([best, s], -1)  # (..., r, ≤ top + c)
        chosen = torch.topk(candidates, min(top, candidates.shape[-1]), -1)  # (..., r, ≤ top)
        best, best_keys = chosen.values, torch.cat([best_keys, keys], -1).gather(-1, chosen.indices)
    if sink is not None:
        sink = torch.as_tensor(sink, dtype=dtype, device=device).expand(torch.Size(lead))[..., None]  # (..., 1)
        moved = torch.maximum(m, sink)  # (..., r)
        scale, e = _exp_between(m, moved), _exp_between(sink.expand_as(m), moved)  # (..., r) each
        moment = scale * (moment + torch.where(torch.isfinite(m), m - moved, torch.zeros_like(m)) * l) + e * (sink - moved)
        l, m = l * scale + e, moved
    empty = l == 0  # (..., r) every key hidden
    safe = torch.where(empty, torch.ones_like(l), l)  # (..., r)
    log_sum_exp = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(safe))  # (..., r)
    entropy = torch.where(empty, torch.zeros_like(l), torch.log(safe) - moment / safe)  # (..., r)
    block_sums = torch.stack([total * _exp_between(mark, m) for total, mark in zip(sums, marks)], -1) / safe[..., None]
    # e^{(s − m) − log l}: s − m is exact for scores near the maximum, where e^{s − log Σ} would carry log Σ's rounding
    # (at scores of 10⁴, float32's step there is 10⁻³)
    shifted = torch.where(empty[..., None], torch.full_like(best, float("-inf")), best - m[..., None])  # (..., r, top)
    strongest_weights = _exp_between(shifted, torch.log(safe)[..., None])  # (..., r, top), 0 where hidden
    return OnePass(log_sum_exp, entropy, block_sums, strongest_weights, best_keys)


def _exp_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """e^{a − b}, elementwise: 0 where a is −∞ (a hidden score, or no score yet), whatever b is."""
    return torch.where(torch.isfinite(a), torch.exp(a - torch.where(torch.isfinite(b), b, torch.zeros_like(b))),
                       torch.zeros_like(a))
