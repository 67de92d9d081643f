"""The attention contract (`attention`): a layer's scores, shaped by the rules its family adds (engine.rules: ALiBi,
DeBERTa's relative terms, a soft cap), the keys each query may read, the softmax (with a learned sink) and αV, by
three strategies (dense, causal by blocks, written out), which a layer asks through Whole; the neuron view's steps of
one score; and the scores recomputed from a trace."""

from __future__ import annotations

import dataclasses
import math

import torch

from attnviz.functional import AttentionResult, Parts, Scorer, grouped_attend, scaled_dot_scores
from attnviz.models.engine import rules
from attnviz.models.engine.layout import Architecture, LayerWeights, Intervention, Trace
from attnviz.models.engine.rules import alibi_slopes  # noqa: F401  engine.alibi_slopes, as before


def allowed_keys(arch: Architecture, layer: int, rows: torch.Tensor, n_keys: int, first: int = 0
                 ) -> torch.Tensor | None:
    """(m, n_keys − first) where queries at positions `rows` (m,) may read keys first … n_keys − 1 (rules.Keys), or
    None where every query reads every key."""
    return rules.keys(arch, layer).allowed(rows, n_keys, first)


def shaped(arch: Architecture, scores: torch.Tensor, rows: torch.Tensor, head: int | None = None, first: int = 0
           ) -> torch.Tensor:
    """Scores q·k/√d_k as the family shapes them before the mask and softmax (rules.shaping: ALiBi's bias, then a soft
    cap), in place where no gradient is taken: every head's (..., H, r, k), or one head's (..., r, k) where `head` is
    given, of the queries at positions `rows` (r,) against keys first … first + k − 1."""
    in_place = not scores.requires_grad  # a gradient taken through them (effects' gradient × input) needs the original
    for rule in rules.shaping(arch):
        scores = rule.apply(scores, rows, first, head, in_place)
    return scores


def shaped_parts(arch: Architecture, head: int, query: int, key: int, parts: Parts) -> Parts:
    """The neuron view's Parts of one score, q·k/√d_k = Σ terms = s, with the step from s to the score where the family
    shapes it (rules.steps): ALiBi's −m_h·(i − j), then a soft cap."""
    inner, step, score = "s", "", parts.total
    for rule, _, score in rules.steps(arch, parts.total, head, query, key):
        if isinstance(rule, rules.Alibi):
            inner, numbers = rule.step(head, query, key)
            step = r"a = %s = %s" % (inner, numbers)
        else:
            step = r"a = " + rule.latex(inner)
    return dataclasses.replace(parts, then=step, shaped=score) if step else parts


def relative_parts(arch: Architecture, trace: Trace, head: int, query: int, key: int, parts: Parts) -> Parts:
    """The neuron view's Parts of one score of a DeBERTa layer: its content term q·k/√d_h = s, taken apart as any
    score is, then its two relative terms, content → position q_i·P^k_δ/√d_h and position → content k_j·P^q_δ/√d_h,
    δ = relative_index(i, j), in `then`; `shaped` is the score, the three summed."""
    if not relative(trace):
        return parts
    rule = rules.relative(arch)
    q, k = trace.query[head, query:query + 1], trace.key[arch.kv_head(head), key:key + 1]  # (1, dh) each
    position_key, position_query = heads_of(trace, head)  # (2k, dh) each, or None
    index = int(rule.index(torch.tensor([query]), torch.tensor([key]))[0, 0])  # the row both terms read
    delta, root = index - rule.span, math.sqrt(q.shape[-1])  # the bucketed distance i − j
    values = []
    if position_key is not None:
        values.append(float(q[0].double() @ position_key[index].double()) / root)
    if position_query is not None:
        values.append(float(k[0].double() @ position_query[index].double()) / root)
    names = rule.step(query, key, delta, q.shape[-1], (position_key is not None, position_query is not None))
    step = r"a = s + " + " + ".join(names) + r" = %.6g %s" % (parts.total, " ".join(f"{v:+.6g}" for v in values))
    return dataclasses.replace(parts, then=step, shaped=parts.total + sum(values))


def scorer(arch: Architecture, positions: torch.Tensor) -> Scorer | str:
    """The scorer of every layer for queries at `positions` (m,): q·k/√d_k, shaped where the family shapes it."""
    if not (arch.alibi or arch.score_cap):
        return "scaled_dot"

    def fn(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        scores = scaled_dot_scores(query, key)  # (..., KV, G·m, k): each group's query heads stacked
        by_head = scores.view(*scores.shape[:-3], arch.heads, len(positions), scores.shape[-1])  # (..., H, m, k)
        return shaped(arch, by_head, positions).view(scores.shape)

    formula = rules.shaped_latex(arch, r"\frac{q^\top k}{\sqrt{d}}")
    return Scorer("shaped_scaled_dot", "a(q,k) = " + formula, fn)


def attention(arch: Architecture, params: LayerWeights, index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              positions: torch.Tensor, out: torch.Tensor | None = None, real: torch.Tensor | None = None) -> AttentionResult:
    """The attention contract, for layer `index`'s queries (..., H, m, dh) at `positions` (m,) over keys and values
    (..., KV, k, dh), query head h reading K/V head h // (H / KV):

    1. scores q·k/√d_k, plus DeBERTa's relative terms where the layer has them (rules.Relative);
    2. shaped: ALiBi's bias, then a soft cap (rules.shaping);
    3. the keys each query may read: the causal mask, a sliding window (rules.Keys), and no padding key (`real`,
       (B, k) True at each text's real pieces);
    4. each row's softmax, with the head's learned sink where it has one (rules.Sink);
    5. αV.

    Three strategies compute it, with the same numbers: a long causal run where the weights are kept (`out`
    (H, m, m)) by blocks of queries against their keys so far (causal_attend); a layer with relative terms or a
    sink, its scores written out (explicit_attend); every other layer through attnviz.functional's grouped_attend.
    The scan's attend_blocks is the fourth, block by block without keeping the weights; its C kernel
    (models/fused.c), its GPU kernel (models/flash.py) and the browser's weights.mjs are mirrors, each tested against
    this contract."""
    if (out is not None and real is None and arch.causal and len(positions) > CAUSAL_BLOCK
            and key.shape[-2] == len(positions)):
        return causal_attend(arch, index, query, key, value, positions, out, params.sink)  # (H, m, m), in out
    mask = allowed_keys(arch, index, positions, key.shape[-2])  # (m, k) or None
    if real is not None:
        padding = real[:, None, None, :]  # (B, 1, 1, k) broadcast over heads and queries
        mask = padding if mask is None else mask & padding  # (B, 1, m, k)
    if params.sink is not None or relative(params):
        return explicit_attend(arch, params, query, key, value, positions, mask, out)  # (..., H, m, k)
    return grouped_attend(query, key, value, scoring=scorer(arch, positions), mask=mask, need_scores=False, out=out)


CAUSAL_BLOCK = 128  # a long causal run's queries are taken this many rows at a time, each block against its keys so far


def causal_attend(arch: Architecture, index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  positions: torch.Tensor, out: torch.Tensor, sink: torch.Tensor | None = None):
    """grouped_attend of a causal layer over n pieces, its weights written into out (H, n, n), by blocks of
    CAUSAL_BLOCK query rows: a block's scores are computed against the keys up to its last row only, so the upper
    triangle, which the mask would zero, costs neither the scores' nor αV's arithmetic. The same numbers as
    grouped_attend with the causal mask (and as explicit_attend, with each head's learned `sink` (H,))."""
    heads, n, dh = query.shape
    group = heads // arch.kv_heads
    scaled = query / math.sqrt(dh)  # (H, n, dh) as the scaled-dot scorer scales it
    outputs = []
    for start in range(0, n, CAUSAL_BLOCK):
        rows = slice(start, min(n, start + CAUSAL_BLOCK))
        seen = rows.stop  # keys 0 … seen − 1
        r = rows.stop - start
        stacked = scaled[:, rows].reshape(arch.kv_heads, group * r, dh)  # (KV, G·r, dh)
        scores = stacked @ key[:, :seen].transpose(-2, -1)  # (KV, G·r, seen)
        scores = shaped(arch, scores.view(heads, r, seen), positions[rows])  # (H, r, seen)
        first = rules.keys(arch, index).first_hidden(start)
        allowed = allowed_keys(arch, index, positions[rows], seen, first)  # (r, seen − first)
        scores[..., first:].masked_fill_(~allowed, float("-inf"))
        weights = sunk_softmax(scores, sink)  # (H, r, seen)
        out[:, rows, :seen] = weights
        out[:, rows, seen:] = 0.0
        outputs.append(grouped_values(weights, value[:, :seen]))  # (H, r, dh)
    allowed = torch.ones((), dtype=torch.bool, device=query.device).expand(out.shape)
    return AttentionResult(None, out, torch.cat(outputs, 1), allowed)  # weights (H, n, n), output (H, n, dh)


def sunk_softmax(scores: torch.Tensor, sink: torch.Tensor | None) -> torch.Tensor:
    """(..., H, m, k) each row's softmax, with a learned sink's logits (H,) where the layer has them (rules.Sink)."""
    return rules.Sink.softmax(scores, sink)


def explicit_attend(arch: Architecture, params: LayerWeights, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    positions: torch.Tensor, mask: torch.Tensor | None, out: torch.Tensor | None = None) -> AttentionResult:
    """grouped_attend of queries (..., H, m, dh) at `positions` over keys and values (..., KV, k, dh), its scores and
    softmax written out, for what grouped_attend has no place for: DeBERTa's relative terms added to each score
    (relative_terms), gpt-oss's learned sink (H,) in each row's softmax, so that the weights (..., H, m, k), in `out`
    where given, sum to 1 − the sink's share."""
    heads, m, dh = query.shape[-3:]
    stacked = (query / math.sqrt(dh)).reshape(*query.shape[:-3], arch.kv_heads, heads // arch.kv_heads * m, dh)  # (..., KV, G·m, dh)
    scores = shaped(arch, (stacked @ key.transpose(-2, -1)).view(*query.shape[:-1], key.shape[-2]), positions)  # (..., H, m, k)
    if relative(params):
        keys = torch.arange(key.shape[-2], device=key.device)  # (k,)
        scores = scores + relative_terms(arch, params.position_key, params.position_query, query, key, positions, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (..., H, m, k)
    weights = sunk_softmax(scores, params.sink)  # (..., H, m, k)
    weights = out.copy_(weights) if out is not None else weights
    allowed = (mask if mask is not None else torch.ones((), dtype=torch.bool, device=query.device)).expand(weights.shape)
    return AttentionResult(None, weights, grouped_values(weights, value), allowed)  # output (..., H, m, dh)


def relative(params) -> bool:
    """Whether a layer (a LayerWeights or a Trace) adds DeBERTa's relative terms to its scores."""
    return params.position_key is not None or params.position_query is not None


def relative_index(arch: Architecture, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(r, c) the row of DeBERTa's 2k relative rows that query position i reads for key position j (rules.Relative)."""
    return rules.relative(arch).index(rows, keys)


def relative_terms(arch: Architecture, position_key: torch.Tensor | None, position_query: torch.Tensor | None,
                   query: torch.Tensor, key: torch.Tensor, rows: torch.Tensor, keys: torch.Tensor,
                   scaled: bool = False) -> torch.Tensor:
    """(..., H, r, c) DeBERTa's two relative terms of each score (rules.Relative.terms)."""
    return rules.relative(arch).terms(position_key, position_query, query, key, rows, keys, scaled)


@dataclasses.dataclass(frozen=True)
class Whole:
    """The engine's attention strategy for a layer (one_layer.layer's `attention`): the attention contract over every
    query at once (attention), each layer's weights held whole, in `out` (H, m, m) where given, no query reading a
    padding key where `real` (B, k) marks the real ones; an intervention's new weights are read against V again.
    The scan's is scan.Blocked, a block of queries at a time."""

    out: torch.Tensor | None = None
    real: torch.Tensor | None = None

    def attend(self, arch: Architecture, params: LayerWeights, index: int, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor, positions: torch.Tensor, intervention: Intervention | None = None
               ) -> AttentionResult:
        a = attention(arch, params, index, query, key, value, positions, self.out, self.real)  # (..., H, m, k)
        weights = None if intervention is None else intervention.weights(index, a.weights, positions)
        if weights is None:
            return a
        return AttentionResult(a.scores, weights, grouped_values(weights, value), a.allowed)  # output (..., H, m, dh)


WHOLE = Whole()


def grouped_values(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """(..., H, m, dh) αV for weights (..., H, m, k) and values (..., KV, k, dh), query head h reading K/V head
    h // (H / KV)."""
    heads, kv_heads, m = weights.shape[-3], value.shape[-3], weights.shape[-2]
    stacked = weights.reshape(*weights.shape[:-3], kv_heads, heads // kv_heads * m, weights.shape[-1])  # (..., KV, G·m, k)
    return (stacked @ value).reshape(*weights.shape[:-1], value.shape[-1])  # (..., H, m, dh)


def scores(arch: Architecture, trace: Trace, head: int | None = None) -> torch.Tensor:
    """QKᵀ/√d_k of one head (n, n), or of every head (H, n, n), recomputed from a trace's queries and keys exactly as
    the forward's scorer computes them (before the mask and the softmax)."""
    group = arch.group
    if head is not None:
        query, key, _ = trace.head(arch, head)  # (n, dh) each
    else:
        query, key = trace.query, trace.key.repeat_interleave(group, dim=0)  # (H, n, dh) each
    raw = (query / math.sqrt(query.shape[-1])) @ key.transpose(-2, -1)  # (n, n) or (H, n, n)
    rows = torch.arange(raw.shape[-2])  # (n,)
    if relative(trace):
        every = (query, key) if head is None else (query[None], key[None])  # (H or 1, n, dh) each
        terms = relative_terms(arch, *heads_of(trace, head), *every, rows, rows)  # (H or 1, n, n)
        raw = raw + (terms if head is None else terms[0])
    return shaped(arch, raw, rows, head)


def heads_of(trace: Trace, head: int | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """A trace's DeBERTa position keys and queries (2k, H·dh), or only head `head`'s columns, (2k, dh)."""
    if head is None:
        return trace.position_key, trace.position_query
    dh = trace.query.shape[-1]
    return tuple(None if t is None else of_head(t, head, dh) for t in (trace.position_key, trace.position_query))


def of_head(table: torch.Tensor, head: int, dh: int) -> torch.Tensor:
    """(rows, dh) head `head`'s columns of a (rows, H·dh) table."""
    return table[:, head * dh:(head + 1) * dh]
