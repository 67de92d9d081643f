"""Self-attention over one sentence: every matrix the explorer page shows, and its step-by-step walk."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.embeddings import Embedded, embed, tokenize
from attnviz.positions import rotate, sinusoidal
from attnviz.functional import (
    FORMULAS, Scorer, attend, combine_heads, cpu_threads, entropy, key_mask, make_projections, make_scorer,
    normalised_weights, pick_device, project_heads,
)

MASKS = ("none", "causal", "keys")
# What each mask means: (causal, hides the keys the view names). A decoder's heads are causal, so its pages offer
# "causal" and "causal_keys" (a sink's first piece hidden, the rest renormalised); weights.mjs's maskRule mirrors this.
MASK_RULES = {"none": (False, False), "causal": (True, False), "keys": (False, True), "causal_keys": (True, True)}
DECODER_MASKS = ("causal", "causal_keys")
MAX_TOKENS = 4096  # the memory budget is measured at this size (README, bench/bench_memory.py)


def max_tokens_setting(value: str | None) -> tuple[int, str | None]:
    """The token cap from the ATTNVIZ_MAX_TOKENS setting: (cap, None), or (MAX_TOKENS, why the value was not used)."""
    if value is None or not value.strip():
        return MAX_TOKENS, None
    try:
        cap = int(value.strip())
    except ValueError:
        cap = None
    if cap is None or not 1 <= cap <= MAX_TOKENS:
        return MAX_TOKENS, (f"The setting ATTNVIZ_MAX_TOKENS={value!r} is not a whole number from 1 to {MAX_TOKENS:,}, "
                            f"so the cap is {MAX_TOKENS:,} tokens.")
    return cap, None


@dataclass(frozen=True)
class Config:
    scoring: str = "scaled_dot"
    temperature: float = 1.0
    hard: bool = False
    projection: str = "identity"  # identity | random
    d_k: int = 16  # per head, random projections only
    seed: int = 0
    bias: bool = False
    heads: int = 1
    mask: str = "none"  # none | causal | keys
    hidden: tuple[int, ...] = ()  # key positions hidden by the "keys" mask
    sigma: float = 1.0  # gaussian scoring
    additive_hidden: int = 16  # h of additive scoring
    positions: str = "none"  # none | sinusoidal (added to X) | rotary (q and k turned by position): attnviz.positions


class ScoresOverflow(ValueError):
    """The scores left float32's range (±3.4e38), so no weights can be computed; `rows` are the inputs
    with the longest vectors, longest first."""

    def __init__(self, rows: list[int], longest: float):
        super().__init__(f"The attention scores overflow float32: input vectors up to length {longest:.3g} are too large.")
        self.rows, self.longest = rows, longest


@dataclass
class View:
    """Numpy copies of what the engine computed. H heads, n tokens.

    Built with keep_heads=False (long inputs), a View keeps no (H, n, n) matrix: weights and scores are
    None, mean_weights is the head average, and scores_block recomputes any window's scores.
    """

    config: Config
    device: str
    x: np.ndarray  # (n, d_model) the input attended over: X, or X + P under sinusoidal positions
    query: np.ndarray  # (H, n, dk) as scored: turned by position under rotary positions
    key: np.ndarray  # (H, n, dk)
    value: np.ndarray  # (H, n, dv)
    scores: np.ndarray | None  # (H, n, n), or None
    weights: np.ndarray | None  # (H, n, n), or None
    mean_weights: np.ndarray  # (n, n) the average over heads; with one head, the head's own weights
    allowed: np.ndarray  # (n, n) bool
    head_output: np.ndarray  # (H, n, dv)
    output: np.ndarray  # (n, d_out)
    mixture: np.ndarray = field(repr=False)  # (n, d_model) mean_weights @ X
    scorer: Scorer | None = field(repr=False, default=None)

    @property
    def blocked_rows(self) -> list[int]:
        """Queries whose every key is masked: their weights and output are zero."""
        return [int(i) for i in np.flatnonzero(~self.allowed.any(-1))]

    def entropy(self, query: int) -> float:
        """Entropy (nats) of one query's row of the head-averaged weights."""
        return float(entropy(torch.from_numpy(self.mean_weights[query])))

    def scores_block(self, head: int, rows: slice, cols: slice) -> np.ndarray:
        """The scores a(q_i, k_j) of one head for a window of queries and keys (rows, cols)."""
        if self.scores is not None:
            return self.scores[head][rows, cols]
        query, key = torch.from_numpy(self.query[head][rows]), torch.from_numpy(self.key[head][cols])  # (r, dk), (c, dk)
        return self.scorer(query, key).numpy()  # (r, c)

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (a broadcast array, such as an all-True mask, counts one element)."""
        arrays = [a for a in vars(self).values() if isinstance(a, np.ndarray)]
        return sum(a.itemsize if 0 in a.strides else a.nbytes for a in arrays)


def weights_under_view(scores: np.ndarray, view: dict) -> tuple[np.ndarray, np.ndarray]:
    """(weights, allowed), each (Tq, Tk): what the browser's heatmap draws from `scores` (Tq, Tk), or from (H, Tq, Tk)
    combined over heads as the view's `over` says (mean or max), under the view's τ (`temp`), `hard`, `mask` and
    hidden keys (`hide`), and the layer's own sliding window where the view names one (`window`, `window_both`),
    computed by the engine's normalised_weights. With `sink`, the last column is a head's learned sink (gpt-oss), which
    every row reads under every mask. The app's downloads and the notebook widgets' `weights` are these."""
    causal, hides = MASK_RULES[view.get("mask", "none")]
    hidden = [j for j in view.get("hide", []) if 0 <= j < scores.shape[-1]] if hides else []
    mask = key_mask(scores.shape[-1], hidden) if hidden else None  # (1, Tk) True where a key may be attended to
    window = view.get("window") or 0  # the layer's own sliding window, as the browser applies it (weights.mjs)
    rows = torch.arange(scores.shape[-2])[:, None] + view.get("row_start", 0)  # (Tq, 1) the queries' positions
    keys = torch.arange(scores.shape[-1])[None, :]  # (1, Tk)
    if window:
        inside = (rows - keys).abs() <= window if view.get("window_both") else keys > rows - window  # (Tq, Tk)
        mask = inside if mask is None else mask & inside
    if view.get("sink"):
        if causal:
            mask, causal = (keys <= rows) if mask is None else mask & (keys <= rows), False  # (Tq, Tk)
        mask = None if mask is None else mask | (keys == scores.shape[-1] - 1)  # (Tq, Tk) the sink under every mask
    weights, allowed = normalised_weights(torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float32)), mask=mask,
                                          is_causal=causal, temperature=view.get("temp", 1.0), hard=view.get("hard", False))
    if weights.dim() == 3:  # (H, Tq, Tk); one mask for every head
        weights = weights.amax(0) if view.get("over") == "max" else weights.mean(0)  # (Tq, Tk)
        allowed = allowed[0]  # (Tq, Tk)
    return weights.numpy(), allowed.numpy()  # (Tq, Tk) each


def build_mask(config: Config, n: int) -> tuple[torch.Tensor | None, bool]:
    """(mask, is_causal) for `attend`."""
    if config.mask == "causal":
        return None, True
    if config.mask == "keys" and config.hidden:
        return key_mask(n, [i for i in config.hidden if 0 <= i < n]), False
    return None, False


def run(x: np.ndarray, config: Config, device: torch.device | None = None, *, keep_heads: bool = True) -> View:
    """Self-attention of the rows of x (n, d_model) under `config`, on `device` (default: the best one).

    keep_heads=False attends one head at a time and keeps only the head average: memory grows with one
    (n, n) matrix, not H of them, and no scores matrix is kept. Raises ScoresOverflow when the scores
    leave float32's range.
    """
    device = device or pick_device()
    with cpu_threads(len(x), device):
        return _run(x, config, device, keep_heads)


def _run(x: np.ndarray, config: Config, device: torch.device, keep_heads: bool) -> View:
    n, d_model = x.shape
    projections = make_projections(
        d_model, mode=config.projection, d_k=config.d_k, heads=config.heads, seed=config.seed, bias=config.bias
    ).to(device)
    d_head = d_model if config.projection == "identity" else config.d_k
    scorer = make_scorer(
        config.scoring, d_head, d_head, seed=config.seed, hidden=config.additive_hidden, sigma=config.sigma
    )
    mask, is_causal = build_mask(config, n)
    options = dict(scoring=scorer, mask=None if mask is None else mask.to(device), is_causal=is_causal,
                   temperature=config.temperature, hard=config.hard)
    x_t = torch.as_tensor(x, dtype=torch.float32, device=device)  # (n, d_model)
    if config.positions == "sinusoidal":
        x_t = x_t + sinusoidal(n, d_model).to(device)  # (n, d_model) X + P
    query, key, value = project_heads(x_t, x_t, projections)  # (H, n, dk), (H, n, dk), (H, n, dv)
    if config.positions == "rotary":
        where = torch.arange(n, device=device)  # (n,)
        query, key = rotate(query, where), rotate(key, where)  # (H, n, dk) each, turned by position
    if keep_heads:
        att = attend(query, key, value, **options)  # weights (H, n, n)
        _check_finite(att.weights, x)
        scores, weights, allowed, head_output = att.scores, att.weights, att.allowed[0], att.output
        mean = weights[0] if config.heads == 1 else weights.mean(0)  # (n, n)
    else:
        scores = weights = None
        mean, outputs = None, []
        for h in range(config.heads):
            att = attend(query[h], key[h], value[h], need_scores=False, **options)  # weights (n, n)
            _check_finite(att.weights, x)
            mean = att.weights if mean is None else mean.add_(att.weights)  # (n, n) a sum, for now
            outputs.append(att.output)  # (n, dv)
            allowed = att.allowed
        if config.heads > 1:
            mean.div_(config.heads)  # (n, n)
        head_output = torch.stack(outputs)  # (H, n, dv)
    _, output = combine_heads(head_output, projections)  # (n, d_out)
    if config.projection == "identity":  # one head, V = X: αV already is αX (an n×n product saved)
        mixture = head_output[0]  # (n, d_model)
    else:
        mixture = mean @ x_t  # (n, n) @ (n, d_model) -> (n, d_model)

    def cpu(t: torch.Tensor | None) -> np.ndarray | None:
        return None if t is None else t.detach().cpu().numpy()

    return View(
        config=config, device=str(device), x=cpu(x_t),
        query=cpu(query), key=cpu(key), value=cpu(value), scores=cpu(scores), weights=cpu(weights),
        mean_weights=cpu(mean), allowed=cpu(allowed), head_output=cpu(head_output), output=cpu(output),
        mixture=cpu(mixture), scorer=scorer,
    )


def _check_finite(weights: torch.Tensor, x: np.ndarray) -> None:
    """Scores past float32's range turn the softmax into NaN: say which inputs are too large instead."""
    # Each row's sum is finite exactly when all its weights are (they lie in [0, 1] otherwise); checking n sums
    # instead of n² weights saves isfinite's n×n temporaries, a third of the whole run at 4,096 tokens.
    if not torch.isfinite(weights.sum(-1)).all():
        raise ScoresOverflow(*longest_rows(x))


def longest_rows(x: np.ndarray) -> tuple[list[int], float]:
    """The rows of x (n, d) from the longest vector down, and the longest length: the inputs that overflow scores."""
    lengths = np.linalg.norm(np.asarray(x, np.float64), axis=1)  # (n,) float64: float32 would overflow too
    order = [int(i) for i in np.argsort(-lengths, kind="stable")]
    return order, float(lengths[order[0]])


# ---------------------------------------------------------------- step by step


@dataclass
class Step:
    title: str
    latex: str
    matrix: np.ndarray  # (rows, cols)
    rows: str  # "tokens" or "dims"
    cols: str  # "tokens" or "dims"
    bounded: bool = False  # values lie in [0, 1]
    symbol: str = ""  # the matrix's short name, for the walk's tabs: "Q", "α"


def shape_latex(matrix: np.ndarray) -> str:
    return r"\in \mathbb{R}^{%d \times %d}" % matrix.shape


def steps(view: View, head: int = 0) -> list[Step]:
    """The walk X → Q, K, V → scores → ÷τ → mask → softmax → αV (→ concat·W_o), for one head.

    Every matrix is one the engine computed, except QKᵀ before ÷√d, which is derived here from
    the engine's Q and K so the page can show both halves of the scaled dot product.
    """
    c = view.config
    q, k, v = view.query[head], view.key[head], view.value[head]  # (n, dk), (n, dk), (n, dv)
    scores, weights = view.scores[head], view.weights[head]  # (n, n)
    identity = c.projection == "identity"
    bias = " + b_{%s}" if c.bias and not identity else ""
    if c.positions == "sinusoidal":
        out = [Step("Input X + P (one GloVe row per token, plus its sinusoidal position)",
                    r"X + P,\ P_{p,2i} = \sin(p/10000^{2i/d}),\ P_{p,2i+1} = \cos(p/10000^{2i/d})\ " + shape_latex(view.x),
                    view.x, "tokens", "dims", symbol="X + P")]
    else:
        out = [Step("Input X (one GloVe row per token)", r"X " + shape_latex(view.x), view.x, "tokens", "dims", symbol="X")]
    source = "(X + P)" if c.positions == "sinusoidal" else "X"
    for name, matrix in (("Q", q), ("K", k), ("V", v)):
        sub = name.lower()
        formula = f"{name} = {source}" if identity else f"{name} = {source}W_{{{sub}}}" + (bias % sub if bias else "")
        if c.positions == "rotary" and name != "V":
            formula = r"%s = R_p\,(%s)" % (name, formula.split(" = ", 1)[1])  # row p turned by its position
        out.append(Step(f"{name} ({'identity' if identity else 'projection'})", f"{formula} {shape_latex(matrix)}", matrix, "tokens", "dims",
                        symbol=name))
    if c.scoring == "scaled_dot":
        out.append(Step("Raw dot products", r"QK^\top " + shape_latex(q @ k.T), q @ k.T, "tokens", "tokens", symbol="QKᵀ"))
        out.append(Step("Scaled scores", r"S = \frac{QK^\top}{\sqrt{d_k}},\ d_k = %d\ " % q.shape[1] + shape_latex(scores), scores, "tokens", "tokens",
                        symbol="S"))
    else:
        out.append(Step(f"Scores ({c.scoring})", r"S_{ij} = a(q_i, k_j),\ " + FORMULAS[c.scoring] + r"\ \ S " + shape_latex(scores), scores, "tokens", "tokens",
                        symbol="S"))
    if c.temperature != 1.0:
        out.append(Step("Temperature", r"S / \tau,\ \tau = %g\ " % c.temperature + shape_latex(scores), scores / c.temperature, "tokens", "tokens",
                        symbol="S/τ"))
    out.append(Step("Mask (1 = may attend)", r"M \in \{0,1\}^{%d \times %d}" % view.allowed.shape, view.allowed.astype(np.float32), "tokens", "tokens", bounded=True,
                    symbol="M"))
    s = "S" if c.temperature == 1.0 else r"S/\tau"
    if c.hard:
        alpha = r"\alpha_{ij} = [\,j = \arg\max_{l:\,M_{il}=1} (%s)_{il}\,]" % s
    else:
        alpha = r"\alpha = \mathrm{softmax}_{\text{row}}(%s \text{ where } M=1,\ -\infty \text{ elsewhere})" % s
    out.append(Step("Weights", alpha + r"\ " + shape_latex(weights), weights, "tokens", "tokens", bounded=True, symbol="α"))
    head_out = view.head_output[head]  # (n, dv)
    out.append(Step("Output", r"O = \alpha V " + shape_latex(head_out), head_out, "tokens", "dims", symbol="O = αV"))
    if c.heads > 1:
        formula = r"\mathrm{Concat}(O_1, \dots, O_{%d})\, W_o" % c.heads + (" + b_o" if c.bias else "")
        out.append(Step("Heads combined", formula + " " + shape_latex(view.output), view.output, "tokens", "dims", symbol="Concat·Wₒ"))
    return out


def temperature_grid() -> list[float]:
    """Log-spaced temperatures offered by the page: 0.01 … 100."""
    return [round(m * 10.0**e, 4) for e in range(-2, 2) for m in (1, 2, 5)] + [100.0]


# ---------------------------------------------------------------- a sentence, start to end

FULL_LIMIT = 256  # above this many tokens: one head at a time, and a block overview plus a zoom window


@dataclass
class Explored:
    """A sentence through the explorer's pipeline (`explore`): its tokens, their vectors, and the attention over them."""

    tokens: list[str]  # as tokenized, before the OOV policy
    embedded: Embedded | None  # None: no tokens, or too many
    view: View | None  # None: nothing to attend to, or the scores overflowed
    overflow: ScoresOverflow | None = None

    @property
    def nbytes(self) -> int:
        held_bytes = 0 if self.embedded is None else self.embedded.vectors.nbytes
        return held_bytes + (0 if self.view is None else self.view.nbytes)


def explore(sentence: str, kv, config: Config, *, oov: str = "zero", drop_punctuation: bool = False,
            max_tokens: int = MAX_TOKENS) -> Explored:
    """The Self-attention page's pipeline, for a notebook too: `sentence` tokenized, looked up in `kv` (KeyedVectors,
    or GloVe's mapped matrix) under the `oov` policy, and attended under `config`. What cannot be drawn is kept as it
    is, for `problem` to say why: no tokens, too many, no known word, or scores too large for the softmax. Every head
    is kept up to FULL_LIMIT tokens; above it, the mean over the heads."""
    tokens = tokenize(sentence, drop_punctuation=drop_punctuation)
    if not tokens or len(tokens) > max_tokens:
        return Explored(tokens, None, None)
    embedded = embed(tokens, kv, oov=oov, seed=config.seed)
    if not embedded.tokens or (all(embedded.oov) and oov != "random"):  # "random" gives each unknown word a vector
        return Explored(tokens, embedded, None)
    try:
        return Explored(tokens, embedded, run(embedded.vectors, config, keep_heads=len(embedded.tokens) <= FULL_LIMIT))
    except ScoresOverflow as overflow:
        return Explored(tokens, embedded, None, overflow)


def overflow_message(explored: Explored, subject: str = "The scores") -> str:
    """Why the softmax has no answer, naming the longest vectors. With `subject` "The scores divided by τ" it is said
    ahead of time, for a view whose τ the browser changes (the scores themselves fit)."""
    tokens = explored.embedded.tokens
    rows, longest = (explored.overflow.rows, explored.overflow.longest) if explored.overflow else longest_rows(explored.embedded.vectors)
    words = ", ".join(f"'{tokens[i]}'" for i in rows[:3])
    return (f"{subject} are larger than float32 can hold (about 3.4e38), so the softmax has no answer. "
            f"The longest vectors belong to {words} (length up to {longest:.3g}). Use vectors of ordinary "
            "size (GloVe's are under 10 long), cosine scoring, or a larger temperature τ.")


def problem(explored: Explored, max_tokens: int) -> tuple[str, bool] | None:
    """Why a explored view cannot be drawn, as (message, whether it is an input error), or None."""
    if not explored.tokens:
        return "The sentence has no words or punctuation we can use. Type some words.", False
    if len(explored.tokens) > max_tokens:
        return f"The text has {len(explored.tokens):,} tokens; the limit is {max_tokens:,}. Shorten it and try again.", True
    if explored.overflow:
        return overflow_message(explored), True
    if explored.view is None and not explored.embedded.tokens:
        return ("None of these words are in the vocabulary, and the 'drop' policy leaves none. Try ordinary English "
                "words, or the 'random' policy."), True
    if explored.view is None:
        return ("None of these words are in the vocabulary: as zero vectors every score would be 0 and every weight "
                "1/n. Choose the 'random' policy for unknown words to give each a vector of its own, or try ordinary "
                "English words."), True
    return None
