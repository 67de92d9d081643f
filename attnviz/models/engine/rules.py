"""The rules a family adds to attention, one owner each: the keys a query may read (the causal mask, a sliding
window), ALiBi's bias, DeBERTa's relative terms, a soft cap, a learned sink. Each owner answers how it is applied and
its note for the pages, and, where the pages draw or take apart a score with it, its LaTeX and its part in "Why
here?"; the attention contract (engine.attend) and
everything that draws or explains a score read them here."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.functional import softmax
from attnviz.models.engine.layout import Architecture


@dataclass(frozen=True)
class Keys:
    """Which keys a query may read: in a decoder those up to it, within a sliding window of `window` pieces where
    the layer has one (i − w < j ≤ i); in an encoder every key, or those within `window` either side (|i − j| ≤ w,
    ModernBERT's local layers)."""

    causal: bool
    window: int | None = None

    @property
    def everything(self) -> bool:
        return not self.causal and not self.window

    def allowed(self, rows: torch.Tensor, n_keys: int, first: int = 0) -> torch.Tensor | None:
        """(m, n_keys − first) where queries at positions `rows` (m,) may read keys first … n_keys − 1; None where
        every query reads every key."""
        if self.everything:
            return None
        keys = torch.arange(first, n_keys, device=rows.device)  # (n_keys − first,)
        if not self.causal:
            return (keys[None, :] - rows[:, None]).abs() <= self.window  # (m, n_keys − first)
        allowed = keys[None, :] <= rows[:, None]  # (m, n_keys − first)
        if self.window:
            allowed &= keys[None, :] > rows[:, None] - self.window
        return allowed

    def matrix(self, n: int, m: int | None = None) -> np.ndarray | None:
        """(n, m) bool for a figure (allowed), the n queries at the last of m positions (m = n unless given)."""
        allowed = self.allowed(torch.arange((m or n) - n, m or n), m or n)  # (n, m) or None
        return None if allowed is None else allowed.numpy()

    def latex(self) -> str:
        """The mask's term in a score's LaTeX (0 where the query may read the key, −∞ where not); "" where every query
        reads every key."""
        if self.everything:
            return ""
        if not self.causal:
            return r" + M_{|i - j| \le %d}" % self.window
        return r" + M_{i - %d < j \le i}" % self.window if self.window else r" + M_{\text{causal}}"

    def first_hidden(self, start: int) -> int:
        """In a decoder, the first key that a block of queries from position `start` on may be unable to read: with a
        window any earlier key may lie out of its reach; without one, only the block's own keys can lie ahead."""
        return 0 if self.window else start

    def note(self, layers: str, plural: bool) -> str:
        """The pages' sentence for the windowed `layers` ("Layers 1, 3"), while the other layers read every key."""
        reads = f"{layers} read{'' if plural else 's'} only "
        if self.causal:
            return reads + f"a sliding window of the last {self.window:,} pieces; the others read every earlier piece."
        return reads + f"the pieces within {self.window:,} either side; the others read every piece."

    def why(self, query: int, key: int) -> str | None:
        """Why "Why here?" cannot take apart the score of `key` for `query`, in words; None where it can. A key past the
        query has no score in a decoder; one outside a window has a score (the mask comes after it), which may be
        taken apart."""
        if self.causal and key > query:
            return (f"In a decoder a query reads only the pieces up to itself: the key ({key}) must not come after the "
                    f"query ({query}).")
        return None


@functools.lru_cache(maxsize=16)
def alibi_slopes(heads: int) -> torch.Tensor:
    """(H,) ALiBi's slope of each head (Press et al. 2021, as BLOOM computes them): 2^(−8h/H) for H a power of two,
    h = 1 … H; otherwise those of the nearest lower power of two, then every other one of the next."""
    closest = 2 ** math.floor(math.log2(heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = base ** torch.arange(1, 1 + closest, dtype=torch.int32)  # (closest,)
    if closest != heads:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        more = min(closest, heads - closest)
        slopes = torch.cat([slopes, extra ** torch.arange(1, 1 + 2 * more, 2, dtype=torch.int32)])  # (H,)
    return slopes


@dataclass(frozen=True)
class Alibi:
    """ALiBi (BLOOM): −m_h·(i − j) added to each score, a penalty growing with the distance back, m_h a slope per head."""

    heads: int

    def slopes(self) -> torch.Tensor:
        return alibi_slopes(self.heads)  # (H,)

    def apply(self, scores: torch.Tensor, rows: torch.Tensor, first: int, head: int | None, in_place: bool
              ) -> torch.Tensor:
        """Scores (..., H, r, k), or one head's (..., r, k), of queries at `rows` (r,) against keys first … first + k − 1."""
        keys = torch.arange(first, first + scores.shape[-1], device=scores.device)  # (k,)
        distance = (keys[None, :] - rows.to(scores.device)[:, None]).to(scores.dtype)  # (r, k) j − i
        slopes = self.slopes().to(scores.device, scores.dtype)  # (H,)
        bias = slopes[head] * distance if head is not None else slopes[:, None, None] * distance  # (r, k) or (H, r, k)
        return scores.add_(bias) if in_place else scores + bias

    def latex(self, inner: str) -> str:
        return inner + r" - m_h\,(i - j)"

    def step(self, head: int, query: int, key: int) -> tuple[str, str]:
        """One score's step, in symbols and in numbers: (s − m_h (i − j), s − m·(i − j))."""
        symbols = r"s - m_{%d}\,(%d - %d)" % (head + 1, query, key)
        return symbols, r"s - %.6g \cdot %d" % (float(self.slopes()[head]), query - key)

    def note(self) -> str:
        return ("It adds no position to the stream: ALiBi lowers each score by m_h·(i − j), the distance back times a "
                "slope of each head's own, so the scores shown include that bias and a head's weights fall off with "
                "distance at its own rate.")

    def why(self, table, score: float, shaped: float, cell: tuple[int, int]):
        """The table of a score's parts (summing to `score`) once the bias joins: a constant, in the bias cell."""
        table[cell] += shaped - score
        return table


@dataclass(frozen=True)
class SoftCap:
    """Gemma 2's soft cap: each score s becomes cap·tanh(s / cap), so none passes ±cap."""

    cap: float

    def apply(self, scores: torch.Tensor, rows: torch.Tensor, first: int, head: int | None, in_place: bool
              ) -> torch.Tensor:
        """Scores of any shape, each capped alone (`rows`, `first` and `head`, which ALiBi reads, are not needed)."""
        cap = self.cap
        return scores.div_(cap).tanh_().mul_(cap) if in_place else torch.tanh(scores / cap) * cap

    def latex(self, inner: str) -> str:
        return r"%g\tanh\!\left(\left(%s\right) / %g\right)" % (self.cap, inner, self.cap)

    def note(self) -> str:
        cap = f"{self.cap:g}"
        return (f"Its scores are soft-capped: each q·k/√d_k becomes {cap}·tanh(s / {cap}) before the softmax, so none "
                f"passes ±{cap}; the scores shown are the capped ones.")

    def why(self, table, score: float, shaped: float):
        """The table of a score's parts once capped: not linear, so every cell is scaled alike, by cap·tanh(s/cap)/s."""
        return table * (shaped / score if score else 0.0)


@dataclass(frozen=True)
class Relative:
    """DeBERTa's disentangled scores: q_i·k_j plus q_i·P^k_δ (content → position) plus k_j·P^q_δ (position → content),
    over √d_h, δ = i − j bucketed (log buckets past `buckets` // 2 back, within −span … span − 1)."""

    span: int
    buckets: int
    top: int

    def index(self, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(r, c) the row of the 2·span relative rows that query position i reads for key position j: the distance
        i − j, bucketed (near ones as they are, far ones by log buckets up to `top`), plus span, within 0 … 2·span − 1.
        The buckets in float32, as transformers computes them: a ceil on a log is where float64 could land elsewhere."""
        distance = rows[:, None] - keys[None, :]  # (r, c) i − j, whole numbers
        if self.buckets > 0 and self.top > 0:
            mid = self.buckets // 2
            far = torch.where((distance < mid) & (distance > -mid), torch.full_like(distance, mid - 1), distance.abs())  # (r, c)
            logged = torch.ceil(torch.log(far / mid) / torch.log(torch.tensor((self.top - 1) / mid)) * (mid - 1)) + mid  # (r, c)
            distance = torch.where(far <= mid, distance.to(logged.dtype), logged * distance.sign()).long()  # (r, c)
        return (distance + self.span).clamp(0, 2 * self.span - 1)  # (r, c)

    def terms(self, position_key: torch.Tensor | None, position_query: torch.Tensor | None, query: torch.Tensor,
              key: torch.Tensor, rows: torch.Tensor, keys: torch.Tensor, scaled: bool = False) -> torch.Tensor:
        """(..., H, r, c) the two relative terms of each score, over √dh as the content term is: content → position,
        q_i · P_k[δ(i, j)], and position → content, k_j · P_q[δ(i, j)], for queries (..., H, r, dh) at positions
        `rows` (r,) and keys (..., H, c, dh) at `keys` (c,). `scaled`: the queries are over √dh already (a scan's)."""
        heads, dh = query.shape[-3], query.shape[-1]
        index = self.index(rows.to(query.device), keys.to(query.device))  # (r, c)
        root = math.sqrt(dh)
        terms = 0
        if position_key is not None:
            by_distance = query @ position_key.view(-1, heads, dh).transpose(0, 1).transpose(-2, -1)  # (..., H, r, 2k)
            content = by_distance.gather(-1, index.expand(*by_distance.shape[:-1], -1))  # (..., H, r, c)
            terms = content if scaled else content / root
        if position_query is not None:
            by_distance = key @ position_query.view(-1, heads, dh).transpose(0, 1).transpose(-2, -1)  # (..., H, c, 2k)
            position = by_distance.gather(-1, index.T.expand(*by_distance.shape[:-1], -1)).transpose(-2, -1)  # (..., H, r, c)
            terms = terms + position / root
        return terms

    def latex(self, root: str) -> str:
        """The score a_ij, over `root` (√d_h, with τ where the page divides by it)."""
        return r"\frac{q_i \cdot k_j + q_i \cdot P^k_{\delta(i,j)} + k_j \cdot P^q_{\delta(i,j)}}{%s}" % root

    def step(self, query: int, key: int, delta: int, dh: int, sides: tuple[bool, bool]) -> list[str]:
        """One score's two terms in symbols, for the neuron view: those of the sides the layer has (P^k, P^q)."""
        names = [r"\frac{q_{%d} \cdot P^k_{\delta=%d}}{\sqrt{%d}}" % (query, delta, dh),
                 r"\frac{k_{%d} \cdot P^q_{\delta=%d}}{\sqrt{%d}}" % (key, delta, dh)]
        return [name for name, has in zip(names, sides) if has]

    def note(self) -> str:
        return ("Its scores are disentangled: each is q_i·k_j plus q_i·P^k_δ (the query against a key made for the "
                "distance δ = i − j) plus k_j·P^q_δ (the key against a query made for it), over √d_h, δ bucketed "
                f"(log buckets past {self.buckets // 2 if self.buckets > 0 else self.span} back). The scores shown "
                "are the sums; the neuron view shows the three terms.")

    def why(self, query: int, key: int, position_query: torch.Tensor | None, position_key: torch.Tensor | None,
            dh: int) -> list[torch.Tensor]:
        """The rows "Why here?" adds on each side for a score of `query` against `key`: the layer's query P^q_δ on the
        query side (it meets every key-side part) and its key P^k_δ on the key side (every query-side part meets it),
        each (1, dh) from one head's (2·span, dh) table, zeros where the layer has no such side. Those two rows never
        meet each other in a score."""
        index = int(self.index(torch.tensor([query]), torch.tensor([key]))[0, 0])
        return [torch.zeros(1, dh, dtype=torch.float64) if t is None else t[index].double().cpu()[None]
                for t in (position_query, position_key)]  # (1, dh) each


@dataclass(frozen=True)
class Sink:
    """gpt-oss's learned sink: one more logit s_h per head in every row's softmax, reading no piece and adding nothing,
    its column dropped after, so a row's weights over the pieces sum to 1 minus the sink's share."""

    @staticmethod
    def softmax(scores: torch.Tensor, logits: torch.Tensor | None) -> torch.Tensor:
        """(..., H, m, k) the softmax of each row of scores (..., H, m, k); with a sink's logits (H,), over the row and
        its head's sink together, the sink's column then dropped, as transformers computes it."""
        if logits is None:
            return softmax(scores)  # (..., H, m, k)
        column = logits.to(scores.dtype)[:, None, None].expand(*scores.shape[:-1], 1)  # (..., H, m, 1)
        return softmax(torch.cat([scores, column], -1))[..., :-1]  # (..., H, m, k)

    LABEL = "∅ sink"  # its column's key, where a heatmap draws it

    @staticmethod
    def column(scores: np.ndarray, keys: list[str], logit: float | None) -> tuple[np.ndarray, list[str]]:
        """A head's scores (Tq, Tk) and key labels as a heatmap draws them: with the sink's `logit` as one more column,
        LABEL, which every row reads (its softmax is then the model's, the sink's share beside the pieces'); as they
        are where the head has no sink (None)."""
        if logit is None:
            return scores, keys
        return np.concatenate([scores, np.full((scores.shape[0], 1), logit, scores.dtype)], 1), [*keys, Sink.LABEL]

    def latex(self, tau: bool = False) -> str:
        """What joins the row's logits."""
        return r",\ s_h / \tau" if tau else r",\ s_h"

    def note(self) -> str:
        return ("Each head has a learned sink: a logit of its own in every row's softmax that reads no piece and adds "
                "nothing, so a row's weights over the pieces sum to 1 minus the sink's share, and a head can look "
                f"nowhere. The heatmaps draw that share as a column of its own, {Sink.LABEL}.")


def keys(arch: Architecture, layer: int) -> Keys:
    return Keys(arch.causal, arch.windows[layer] if arch.windows else None)


def shaping(arch: Architecture) -> list:
    """The rules that change a layer's scores after q·k/√d_k, in the order they apply: ALiBi's bias, then a soft cap;
    each applies as rule.apply(scores, rows, first, head, in_place).
    (DeBERTa's relative terms, which read the layer's own tables, join before them: relative.)"""
    return ([Alibi(arch.heads)] if arch.alibi else []) + ([SoftCap(arch.score_cap)] if arch.score_cap else [])


def relative(arch: Architecture) -> Relative | None:
    return Relative(arch.relative_span, arch.relative_buckets, arch.relative_max) if arch.relative_span else None


def sink(arch: Architecture) -> Sink | None:
    return Sink() if arch.sinks else None


def steps(arch: Architecture, score: float, head: int, query: int, key: int):
    """(rule, the score before it, after it) for each of shaping's rules, one score of `head` (query i, key j) in
    float64: how a score s = q·k/√d_k becomes the one the softmax reads."""
    for rule in shaping(arch):
        before = torch.tensor([[score]], dtype=torch.float64)  # (1, 1)
        after = rule.apply(before.clone(), torch.tensor([query]), key, head, True)  # (1, 1)
        yield rule, score, float(after[0, 0])
        score = float(after[0, 0])


def every(arch: Architecture) -> list:
    """Each rule of the model's that changes a score or a row's softmax (the keys aside), in the order the pages name
    them: ALiBi, relative terms, a sink, a soft cap."""
    alibi, cap = [r for r in shaping(arch) if isinstance(r, Alibi)], [r for r in shaping(arch) if isinstance(r, SoftCap)]
    return [*alibi, *filter(None, [relative(arch), sink(arch)]), *cap]


def shaped_latex(arch: Architecture, score: str) -> str:
    """`score` (LaTeX) as the family shapes it."""
    for rule in shaping(arch):
        score = rule.latex(score)
    return score
