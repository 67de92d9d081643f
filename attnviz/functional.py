"""The torch attention engine: scoring functions, masks, softmax or hard weights, projections, heads.

Shapes follow torch's `F.scaled_dot_product_attention`: query (..., Tq, d), key (..., Tk, d),
value (..., Tk, dv). A boolean mask means True = may attend, as in SDPA.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


def pick_device() -> torch.device:
    """CUDA when there is one, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


SMALL_WORK_TOKENS = 1024  # below this many tokens, CPU work runs on one of torch's threads (see cpu_threads)
_THREADS = torch.get_num_threads()  # as configured when the engine was imported: the count for larger work


@contextmanager
def cpu_threads(tokens: int, device: torch.device):
    """torch's intra-op threads for work over `tokens` tokens on `device`: one below SMALL_WORK_TOKENS, else as
    configured. Measured on our 2-core machine (README, bench_load --solo): under 1,024 tokens a second thread
    saves under half a millisecond of the engine's time while its workers, spinning after each parallel step,
    cost a run about 12 ms of CPU; at 4,096 tokens two threads take the engine from 65 to 38 ms. Set for the
    calling thread only, and put back after."""
    want = 1 if tokens < SMALL_WORK_TOKENS else _THREADS
    before = torch.get_num_threads()
    if device.type != "cpu" or want == before:
        yield
        return
    torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- scoring functions

SCORING_NAMES = ("dot", "scaled_dot", "cosine", "general", "additive", "gaussian")

# The parameters' shapes, said beside each formula (kept out of it so it fits a narrow column).
PARAMETERS = {
    "general": "M: d_q × d_k, seeded random.",
    "additive": "W_q: h × d_q, W_k: h × d_k, w: length h; seeded random.",
    "gaussian": "σ: the kernel's width.",
    "scaled_dot": "d: the length of q and k.",
}
FORMULAS = {
    "dot": r"a(q,k) = q^\top k",
    "scaled_dot": r"a(q,k) = \frac{q^\top k}{\sqrt{d}}",
    "cosine": r"a(q,k) = \frac{q^\top k}{\lVert q \rVert\,\lVert k \rVert}",
    "general": r"a(q,k) = q^\top M k",
    "additive": r"a(q,k) = w^\top \tanh(W_q q + W_k k)",
    "gaussian": r"a(q,k) = -\frac{\lVert q-k \rVert^2}{2\sigma^2}",
}


@dataclass(frozen=True)
class Parts:
    """One score a(q, k) taken apart (the neuron view): aligned rows over `unit`s (the dimensions of q and k, or the
    additive scorer's hidden units), and `terms`, one per unit, whose sum is the score. `rule` says in LaTeX how the
    terms are made from the rows and summed. Where a model shapes the sum s into its score (ALiBi's position bias, a
    soft cap), `then` says how in LaTeX and `shaped` is the score."""

    unit: str
    rows: list[tuple[str, torch.Tensor]]  # (name, (m,)) each
    terms: torch.Tensor  # (m,)
    rule: str
    then: str = ""
    shaped: float | None = None

    @property
    def total(self) -> float:
        """s, the sum of the terms."""
        return float(self.terms.sum())

    @property
    def score(self) -> float:
        return self.total if self.shaped is None else self.shaped


@dataclass(frozen=True)
class Scorer:
    """A named scoring function a(q, k) with its formula. Called as scorer(query, key) -> (..., Tq, Tk).
    `parts(q, k)` takes one score of a query (d_q,) and a key (d_k,) apart (Parts)."""

    name: str
    formula: str  # LaTeX
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    parts: Callable[[torch.Tensor, torch.Tensor], Parts] | None = None

    def __call__(self, query: torch.Tensor, key: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The scores (..., Tq, Tk); with `out`, written into it (dot products straight from the matrix product)."""
        if out is None:
            return self.fn(query, key)
        if self.name in ("dot", "scaled_dot"):
            _check_same_dim(query, key, self.name)
            if self.name == "scaled_dot":
                query = query / math.sqrt(query.shape[-1])  # (..., Tq, d) as scaled_dot_scores scales it
            return torch.matmul(query, key.transpose(-2, -1), out=out)  # (..., Tq, Tk)
        return out.copy_(self.fn(query, key))


def dot_parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
    product = q * k  # (d,)
    return Parts("dimension", [("q", q), ("k", k), ("q ∘ k", product)], product, r"a = \sum_i q_i k_i")


def scaled_dot_parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
    product = q * k  # (d,)
    return Parts("dimension", [("q", q), ("k", k), ("q ∘ k", product)], product / math.sqrt(q.shape[-1]),
                 r"a = \sum_i \frac{q_i k_i}{\sqrt{%d}}" % q.shape[-1])


def cosine_parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
    product = q * k  # (d,)
    norms = float(q.norm() * k.norm())
    terms = product / norms if norms > 0 else torch.zeros_like(product)  # a zero (OOV) vector scores 0, as F.normalize
    return Parts("dimension", [("q", q), ("k", k), ("q ∘ k", product)], terms,
                 r"a = \sum_i \frac{q_i k_i}{\lVert q \rVert\,\lVert k \rVert},\ \lVert q \rVert\,\lVert k \rVert = %.4g" % norms)


def _check_same_dim(query: torch.Tensor, key: torch.Tensor, name: str) -> None:
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"'{name}' scoring needs queries and keys of the same size, got d_q={query.shape[-1]} "
            f"and d_k={key.shape[-1]}. Use 'general' (qᵀMk) or 'additive' scoring for different sizes."
        )


def dot_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    _check_same_dim(query, key, "dot")
    return query @ key.transpose(-2, -1)  # (..., Tq, Tk)


def scaled_dot_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    _check_same_dim(query, key, "scaled_dot")
    # Scaling the (Tq, d) queries, not the (Tq, Tk) product, saves a pass over the largest tensor.
    return (query / math.sqrt(query.shape[-1])) @ key.transpose(-2, -1)  # (..., Tq, Tk)


def cosine_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    _check_same_dim(query, key, "cosine")
    # F.normalize leaves a zero vector at zero, so a zero (OOV) word scores 0 against everything.
    return F.normalize(query, dim=-1) @ F.normalize(key, dim=-1).transpose(-2, -1)  # (..., Tq, Tk)


def general(matrix: torch.Tensor) -> Scorer:
    """Bilinear qᵀMk with M of shape (d_q, d_k)."""

    def fn(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return query @ matrix.to(query) @ key.transpose(-2, -1)  # (..., Tq, dq)(dq, dk)(..., dk, Tk) -> (..., Tq, Tk)

    def parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
        turned = q @ matrix.to(q)  # (dk,) qᵀM
        return Parts("dimension of k", [("qᵀM", turned), ("k", k), ("(qᵀM) ∘ k", turned * k)], turned * k,
                     r"a = \sum_j (q^\top M)_j\, k_j")

    return Scorer("general", FORMULAS["general"], fn, parts)


# A pairwise scorer builds a (..., rows, Tk, width) tensor before it reduces it to scores. At 4,096 tokens
# that is gigabytes at once, so it is built a block of query rows at a time, within this many bytes.
PAIRWISE_BLOCK_BYTES = 64 * 2**20


def by_query_rows(query: torch.Tensor, key: torch.Tensor, width: int, pairwise) -> torch.Tensor:
    """pairwise(query rows, key) -> (..., rows, Tk) over blocks of query rows whose (..., rows, Tk, width)
    intermediate fits PAIRWISE_BLOCK_BYTES. Every score is computed exactly as in one call over all rows."""
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    n_query, n_key = query.shape[-2], key.shape[-2]
    per_row = math.prod(batch) * n_key * width * query.element_size()
    rows = max(1, PAIRWISE_BLOCK_BYTES // max(per_row, 1))
    if rows >= n_query:
        return pairwise(query, key)  # (..., Tq, Tk)
    scores = query.new_empty(*batch, n_query, n_key)  # (..., Tq, Tk)
    for start in range(0, n_query, rows):
        scores[..., start:start + rows, :] = pairwise(query[..., start:start + rows, :], key)  # (..., rows, Tk)
    return scores


def additive(w_query: torch.Tensor, w_key: torch.Tensor, w: torch.Tensor) -> Scorer:
    """wᵀ tanh(W_q q + W_k k) with W_q (h, d_q), W_k (h, d_k), w (h,)."""

    def fn(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        q_hidden = query @ w_query.to(query).T  # (..., Tq, h)
        k_hidden = key @ w_key.to(key).T  # (..., Tk, h)

        def pairwise(q_rows: torch.Tensor, k_all: torch.Tensor) -> torch.Tensor:
            hidden = torch.tanh(q_rows.unsqueeze(-2) + k_all.unsqueeze(-3))  # (..., rows, Tk, h)
            return hidden @ w.to(query)  # (..., rows, Tk)

        return by_query_rows(q_hidden, k_hidden, w.shape[0], pairwise)  # (..., Tq, Tk)

    def parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
        q_hidden, k_hidden = w_query.to(q) @ q, w_key.to(k) @ k  # (h,), (h,)
        hidden = torch.tanh(q_hidden + k_hidden)  # (h,)
        weight = w.to(q)  # (h,)
        return Parts("hidden unit", [("W_q q", q_hidden), ("W_k k", k_hidden), ("tanh(W_q q + W_k k)", hidden), ("w", weight)],
                     weight * hidden, r"a = \sum_u w_u \tanh(W_q q + W_k k)_u")

    return Scorer("additive", FORMULAS["additive"], fn, parts)


def gaussian(sigma: float = 1.0) -> Scorer:
    """−‖q−k‖² / 2σ²: softmax over it is the Gaussian kernel of Nadaraya–Watson regression."""
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")

    def pairwise(q_rows: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        diff = q_rows.unsqueeze(-2) - key.unsqueeze(-3)  # (..., rows, Tk, d)
        return -(diff**2).sum(-1) / (2 * sigma**2)  # (..., rows, Tk)

    def fn(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        _check_same_dim(query, key, "gaussian")
        return by_query_rows(query, key, query.shape[-1], pairwise)  # (..., Tq, Tk)

    def parts(q: torch.Tensor, k: torch.Tensor) -> Parts:
        _check_same_dim(q, k, "gaussian")
        diff = q - k  # (d,)
        return Parts("dimension", [("q", q), ("k", k), ("q − k", diff)], -(diff**2) / (2 * sigma**2),
                     r"a = -\sum_i \frac{(q_i - k_i)^2}{2\sigma^2},\ \sigma = %g" % sigma)

    return Scorer("gaussian", FORMULAS["gaussian"], fn, parts)


def xavier(rows: int, cols: int, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
    """Xavier (Glorot) uniform init, drawn from `generator` so a seed reproduces it."""
    bound = math.sqrt(6.0 / (rows + cols))
    return (torch.rand(rows, cols, generator=generator, dtype=dtype) * 2 - 1) * bound  # (rows, cols)


def make_scorer(
    name: str, d_query: int, d_key: int, *, seed: int = 0, hidden: int = 16, sigma: float = 1.0
) -> Scorer:
    """The scorer called `name`. 'general' and 'additive' get seeded Xavier parameters for these sizes."""
    generator = torch.Generator().manual_seed(seed)
    if name == "dot":
        return Scorer(name, FORMULAS[name], dot_scores, dot_parts)
    if name == "scaled_dot":
        return Scorer(name, FORMULAS[name], scaled_dot_scores, scaled_dot_parts)
    if name == "cosine":
        return Scorer(name, FORMULAS[name], cosine_scores, cosine_parts)
    if name == "general":
        return general(xavier(d_query, d_key, generator))
    if name == "additive":
        w_query = xavier(hidden, d_query, generator)  # (h, dq)
        w_key = xavier(hidden, d_key, generator)  # (h, dk)
        w = xavier(hidden, 1, generator)[:, 0]  # (h,)
        return additive(w_query, w_key, w)
    if name == "gaussian":
        return gaussian(sigma)
    raise ValueError(f"Unknown scoring function '{name}'. Choose one of: {', '.join(SCORING_NAMES)}.")


# ---------------------------------------------------------------- masks and the attention step


def causal_mask(n_query: int, n_key: int, device=None) -> torch.Tensor:
    """True on and below the diagonal (top-left aligned, as SDPA's is_causal)."""
    return torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril()  # (Tq, Tk)


def key_mask(n_key: int, hidden: list[int] | tuple[int, ...], device=None) -> torch.Tensor:
    """A (1, Tk) mask that hides the keys at the `hidden` positions from every query."""
    allowed = torch.ones(1, n_key, dtype=torch.bool, device=device)  # (1, Tk)
    allowed[0, list(hidden)] = False
    return allowed


@dataclass
class AttentionResult:
    scores: torch.Tensor | None  # (..., Tq, Tk) the scoring function's output, before temperature, mask and softmax; None unless need_scores
    weights: torch.Tensor  # (..., Tq, Tk) rows sum to 1, or to 0 where every key is masked
    output: torch.Tensor  # (..., Tq, dv) weights @ value
    allowed: torch.Tensor  # (..., Tq, Tk) bool, True where the query may attend to the key


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    scoring: str | Scorer = "scaled_dot",
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    temperature: float = 1.0,
    hard: bool = False,
    need_scores: bool = True,
    out: torch.Tensor | None = None,
) -> AttentionResult:
    """weights = softmax(a(Q, K) / temperature) over the allowed keys; output = weights @ V.

    hard=True replaces the softmax with a one-hot at the highest allowed score. Ties go to the
    first (leftmost) key, which is torch.argmax's rule. A query whose every key is masked gets
    all-zero weights and a zero output instead of the NaN a plain softmax would give.
    need_scores=False returns no scores and computes the weights in the scores' memory: one
    (..., Tq, Tk) tensor instead of two, which is what long inputs need. With it, `out` (..., Tq, Tk), contiguous,
    is that memory: the weights are computed where the caller keeps them (a model's every layer in one array).
    """
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value need the same number of rows, got {key.shape[-2]} and {value.shape[-2]}")
    scorer = scoring if isinstance(scoring, Scorer) else make_scorer(scoring, query.shape[-1], key.shape[-1])
    if out is not None and need_scores:
        raise ValueError("out= holds the weights in the scores' memory, so it needs need_scores=False")
    scores = scorer(query, key, out=out)  # (..., Tq, Tk)
    weights, allowed = normalised_weights(scores, mask=mask, is_causal=is_causal, temperature=temperature, hard=hard,
                                          keep_scores=need_scores)  # (..., Tq, Tk) each
    output = weights @ value  # (..., Tq, dv)
    return AttentionResult(scores=scores if need_scores else None, weights=weights, output=output, allowed=allowed)


def grouped_attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    **attend_kwargs,
) -> AttentionResult:
    """`attend` for grouped-query attention: query (..., H, Tq, d) against key (..., KV, Tk, d) and value
    (..., KV, Tk, dv), H a multiple of KV, query head h reading key/value head h // (H / KV). With H = KV this is
    attend itself.

    Each key/value head is read by its group of G = H / KV query heads stacked as G·Tq rows, so K and V are never
    copied G times; the mask (Tq, Tk) is tiled over the stacked rows. Returns per query head: scores, weights and
    allowed (..., H, Tq, Tk), output (..., H, Tq, dv)."""
    heads, kv_heads, n_query = query.shape[-3], key.shape[-3], query.shape[-2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads cannot share {kv_heads} key/value heads evenly")
    group = heads // kv_heads
    if group == 1:
        return attend(query, key, value, mask=mask, is_causal=is_causal, **attend_kwargs)
    allowed = None if mask is None else mask.to(device=query.device, dtype=torch.bool)  # (.., Tq, Tk) or (1, Tk)
    if is_causal:
        causal = causal_mask(n_query, key.shape[-2], query.device)  # (Tq, Tk)
        allowed = causal if allowed is None else allowed & causal
    tiled = allowed
    if allowed is not None and allowed.shape[-2] != 1:
        tiled = allowed.repeat(*([1] * (allowed.dim() - 2)), group, 1)  # (..., G·Tq, Tk)
    stacked = query.reshape(*query.shape[:-3], kv_heads, group * n_query, query.shape[-1])  # (..., KV, G·Tq, d)
    out = attend_kwargs.pop("out", None)
    if out is not None:
        out = out.view(*out.shape[:-3], kv_heads, group * n_query, out.shape[-1])  # (..., KV, G·Tq, Tk) the same memory
    result = attend(stacked, key, value, mask=tiled, out=out, **attend_kwargs)

    def per_head(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.reshape(*t.shape[:-3], heads, n_query, t.shape[-1])  # (..., H, Tq, ·)

    weights = per_head(result.weights)  # (..., H, Tq, Tk)
    if allowed is None:
        allowed = torch.ones((), dtype=torch.bool, device=query.device)
    return AttentionResult(per_head(result.scores), weights, per_head(result.output), allowed.expand(weights.shape))


def normalised_weights(
    scores: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    temperature: float = 1.0,
    hard: bool = False,
    keep_scores: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights, allowed) from scores a(q_i, k_j): softmax(scores / temperature) over the allowed keys, or with
    hard=True the one-hot of the highest allowed score (ties to the first key); a fully masked row gets zeros.
    attend's second half, also for scores computed elsewhere (a trained model's heads). keep_scores=False lets it
    overwrite the scores' memory."""
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    # In-place steps save whole (..., Tq, Tk) tensors, but autograd (pooling fits σ) needs the originals.
    no_graph = not scores.requires_grad
    logits = scores  # (..., Tq, Tk)
    writable = no_graph and not keep_scores  # may logits' memory be overwritten?
    if temperature != 1.0:
        logits = logits.div_(temperature) if writable else logits / temperature  # (..., Tq, Tk)
        writable = no_graph
    if mask is None and not is_causal:
        # Nothing is masked: skip the mask tensors, which cost as much memory traffic as the softmax.
        allowed = torch.ones((), dtype=torch.bool, device=scores.device).expand(scores.shape)  # (..., Tq, Tk) view
        return _normalise(logits, hard, writable), allowed  # (..., Tq, Tk)
    # The masks stay as small as they are given ((Tq, Tk), or (1, Tk) for hidden keys) and broadcast over the
    # scores: a full-size boolean tensor per head and layer cost a 30-layer model a fifth of its forward.
    allowed = None if mask is None else mask.to(device=scores.device, dtype=torch.bool)  # broadcasts to (..., Tq, Tk)
    if is_causal:
        causal = causal_mask(scores.shape[-2], scores.shape[-1], scores.device)  # (Tq, Tk)
        allowed = causal if allowed is None else allowed & causal
    # A masked key gets -inf, so exp() gives it exactly zero weight.
    logits = _fill(logits, ~allowed, float("-inf"), writable)  # (..., Tq, Tk)
    weights = _normalise(logits, hard, no_graph)  # (..., Tq, Tk)
    blocked = ~allowed.any(-1, keepdim=True)  # (..., Tq, 1) rows with every key masked
    if bool(blocked.any()):
        weights = _fill(weights, blocked, 0.0, no_graph)  # (..., Tq, Tk) fully masked rows: 0
    return weights, allowed.expand(scores.shape)  # (..., Tq, Tk) view


def _fill(x: torch.Tensor, where: torch.Tensor, value: float, in_place: bool) -> torch.Tensor:
    return x.masked_fill_(where, value) if in_place else x.masked_fill(where, value)


def _normalise(logits: torch.Tensor, hard: bool, in_place: bool) -> torch.Tensor:
    """Softmax over the last dimension, or the one-hot of its argmax; in_place may overwrite logits."""
    if hard:
        best = logits.argmax(-1, keepdim=True)  # (..., Tq, 1)
        one_hot = logits.zero_() if in_place else torch.zeros_like(logits)  # (..., Tq, Tk)
        return one_hot.scatter_(-1, best, 1.0)
    if in_place and logits.device.type == "cpu" and logits.is_contiguous():
        # On contiguous rows the CPU kernel reads a whole row before it writes it, so its output may alias
        # its input. (Not on strided input: a scorer may return a transposed view.)
        return torch.ops.aten._softmax.out(logits, -1, False, out=logits)  # (..., Tq, Tk)
    return softmax(logits)  # (..., Tq, Tk)


def softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension; half-precision logits (a bf16 model on a GPU) are exponentiated and summed in
    float32, as transformers does, and the weights given back in their dtype."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        return torch.softmax(logits, dim=-1, dtype=torch.float32).to(logits.dtype)  # (..., k)
    return torch.softmax(logits, dim=-1)  # (..., k)


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy −Σ α ln α of each row, in nats, with 0 ln 0 = 0."""
    terms = torch.where(weights > 0, -weights * torch.log(weights), torch.zeros_like(weights))  # (..., Tq, Tk)
    return terms.sum(-1)  # (..., Tq)


# ---------------------------------------------------------------- projections and heads


@dataclass
class Projections:
    """Q = XW_q + b_q, K = XW_k + b_k, V = XW_v + b_v with W of shape (d_model, H·d_k), as in our notes.

    A weight of None means the identity (Q = K = V = X). With H > 1 the heads are concatenated
    and mapped back by W_o (H·d_v, d_out) + b_o; a single head has no W_o, as in our notes.
    """

    heads: int = 1
    w_query: torch.Tensor | None = None  # (d_model, H*dk)
    b_query: torch.Tensor | None = None  # (H*dk,)
    w_key: torch.Tensor | None = None  # (d_model, H*dk)
    b_key: torch.Tensor | None = None  # (H*dk,)
    w_value: torch.Tensor | None = None  # (d_model, H*dv)
    b_value: torch.Tensor | None = None  # (H*dv,)
    w_out: torch.Tensor | None = None  # (H*dv, d_out)
    b_out: torch.Tensor | None = None  # (d_out,)

    def to(self, device: torch.device, dtype: torch.dtype | None = None) -> Projections:
        moved = {k: (v.to(device=device, dtype=dtype) if isinstance(v, torch.Tensor) else v) for k, v in vars(self).items()}
        return Projections(**moved)


def make_projections(
    d_model: int, *, mode: str = "identity", d_k: int = 16, heads: int = 1, seed: int = 0, bias: bool = False
) -> Projections:
    """Identity projections, or seeded Xavier ones with per-head size d_k (and d_v = d_k)."""
    if mode == "identity":
        if heads != 1:
            raise ValueError("Identity projections make every head identical; use random projections for H > 1.")
        return Projections()
    if mode != "random":
        raise ValueError(f"Unknown projection mode '{mode}'. Choose 'identity' or 'random'.")
    if d_k < 1 or heads < 1:
        raise ValueError(f"d_k and heads must be at least 1, got d_k={d_k}, heads={heads}")
    generator = torch.Generator().manual_seed(seed)
    width = heads * d_k

    def linear(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        weight = xavier(rows, cols, generator)  # (rows, cols)
        # nn.Linear's bias range: U(-1/√fan_in, 1/√fan_in).
        b = (torch.rand(cols, generator=generator) * 2 - 1) / math.sqrt(rows) if bias else None  # (cols,)
        return weight, b

    w_query, b_query = linear(d_model, width)
    w_key, b_key = linear(d_model, width)
    w_value, b_value = linear(d_model, width)
    w_out, b_out = linear(width, d_model) if heads > 1 else (None, None)
    return Projections(heads, w_query, b_query, w_key, b_key, w_value, b_value, w_out, b_out)


def _project(x: torch.Tensor, weight: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    y = x if weight is None else x @ weight  # (..., T, d_out)
    return y if b is None else y + b


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x.unflatten(-1, (heads, -1)).transpose(-3, -2)  # (..., T, H*dh) -> (..., H, T, dh)


@dataclass
class MultiHeadResult:
    query: torch.Tensor  # (..., H, Tq, dk)
    key: torch.Tensor  # (..., H, Tk, dk)
    value: torch.Tensor  # (..., H, Tk, dv)
    attention: AttentionResult  # per head: scores/weights/allowed (..., H, Tq, Tk), output (..., H, Tq, dv)
    concat: torch.Tensor  # (..., Tq, H*dv)
    output: torch.Tensor  # (..., Tq, d_out)


def project_heads(
    x_query: torch.Tensor, x_key: torch.Tensor, projections: Projections
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K, V split into heads: (..., H, Tq, dk), (..., H, Tk, dk), (..., H, Tk, dv)."""
    p, heads = projections, projections.heads
    query = _split_heads(_project(x_query, p.w_query, p.b_query), heads)  # (..., H, Tq, dk)
    key = _split_heads(_project(x_key, p.w_key, p.b_key), heads)  # (..., H, Tk, dk)
    value = _split_heads(_project(x_key, p.w_value, p.b_value), heads)  # (..., H, Tk, dv)
    return query, key, value


def combine_heads(head_output: torch.Tensor, projections: Projections) -> tuple[torch.Tensor, torch.Tensor]:
    """(concat, output): the heads' outputs (..., H, Tq, dv) side by side (..., Tq, H*dv), then W_o (+ b_o)."""
    concat = head_output.transpose(-3, -2).flatten(-2)  # (..., Tq, H*dv)
    return concat, _project(concat, projections.w_out, projections.b_out)  # (..., Tq, d_out)


def multi_head(
    x_query: torch.Tensor, x_key: torch.Tensor, projections: Projections, **attend_kwargs
) -> MultiHeadResult:
    """Project, split into H heads, attend per head, concatenate and apply W_o.

    x_query (..., Tq, d_model) gives the queries; x_key (..., Tk, d_model) gives keys and values
    (pass the same tensor for self-attention). `attend_kwargs` go to `attend`; a mask broadcasts
    over the head dimension.
    """
    query, key, value = project_heads(x_query, x_key, projections)  # (..., H, T, dk)
    result = attend(query, key, value, **attend_kwargs)
    concat, output = combine_heads(result.output, projections)  # (..., Tq, H*dv), (..., Tq, d_out)
    return MultiHeadResult(query, key, value, result, concat, output)
