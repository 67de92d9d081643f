"""Attention in the engine: a layer's scores (shaped by a soft cap, ALiBi or DeBERTa's relative terms), the keys each
query may read, the softmax (with a learned sink) and αV, dense, causal by blocks, or written out; and the scores
recomputed from a trace."""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from attnviz.attention import AttentionResult, Parts, Scorer, scaled_dot_scores, softmax
from attnviz.models.engine.layout import Architecture, Block, Intervention, Trace


def allowed_keys(arch: Architecture, layer: int, rows: torch.Tensor, n_keys: int, first: int = 0
                 ) -> torch.Tensor | None:
    """(m, n_keys − first) where queries at positions `rows` (m,) may read keys first … n_keys − 1: in a decoder the
    keys up to the query, within its sliding window w where the layer has one (j > i − w); in an encoder every key
    (None), or the keys within w either side (|i − j| ≤ w, ModernBERT's local layers)."""
    window = arch.windows[layer] if arch.windows else None
    if not arch.causal and not window:
        return None
    keys = torch.arange(first, n_keys, device=rows.device)  # (n_keys − first,)
    if not arch.causal:
        return (keys[None, :] - rows[:, None]).abs() <= window  # (m, n_keys − first)
    allowed = keys[None, :] <= rows[:, None]  # (m, n_keys)
    if window:
        allowed &= keys[None, :] > rows[:, None] - window
    return allowed


def shaped(arch: Architecture, scores: torch.Tensor, rows: torch.Tensor, head: int | None = None, first: int = 0
           ) -> torch.Tensor:
    """Scores q·k/√d_k as the family shapes them before the mask and softmax, in place where no gradient is taken:
    every head's (..., H, r, k), or one head's (..., r, k) where `head` is given, of the queries at positions `rows`
    (r,) against keys first … first + k − 1. ALiBi (BLOOM) adds −m_h·(i − j), a penalty growing with the distance back,
    m_h a slope per head; Gemma 2's soft cap then keeps each score within ±cap, cap·tanh(s / cap)."""
    if not (arch.alibi or arch.score_cap):
        return scores
    in_place = not scores.requires_grad  # a gradient taken through them (effects' gradient × input) needs the original
    if arch.alibi:
        keys = torch.arange(first, first + scores.shape[-1], device=scores.device)  # (k,)
        distance = (keys[None, :] - rows.to(scores.device)[:, None]).to(scores.dtype)  # (r, k) j − i
        slopes = alibi_slopes(arch.heads).to(scores.device, scores.dtype)  # (H,)
        bias = slopes[head] * distance if head is not None else slopes[:, None, None] * distance  # (r, k) or (H, r, k)
        scores = scores.add_(bias) if in_place else scores + bias
    if arch.score_cap:
        cap = arch.score_cap
        scores = scores.div_(cap).tanh_().mul_(cap) if in_place else torch.tanh(scores / cap) * cap
    return scores


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


def shaped_parts(arch: Architecture, head: int, query: int, key: int, parts: Parts) -> Parts:
    """The neuron view's Parts of one score, q·k/√d_k = Σ terms = s, with the step from s to the score where the family
    shapes it (shaped): ALiBi's −m_h·(i − j), then a soft cap."""
    if not (arch.alibi or arch.score_cap):
        return parts
    s = torch.tensor([[parts.total]], dtype=torch.float64)  # (1, 1)
    score = float(shaped(arch, s, torch.tensor([query]), head, key)[0, 0])
    inner = "s"
    if arch.alibi:
        inner = r"s - m_{%d}\,(%d - %d)" % (head + 1, query, key)
        step = r"a = %s = s - %.6g \cdot %d" % (inner, float(alibi_slopes(arch.heads)[head]), query - key)
    if arch.score_cap:
        capped = r"%g\tanh\!\left((%s) / %g\right)" % (arch.score_cap, inner, arch.score_cap)
        step = r"a = " + capped
    return dataclasses.replace(parts, then=step, shaped=score)


def relative_parts(arch: Architecture, trace: Trace, head: int, query: int, key: int, parts: Parts) -> Parts:
    """The neuron view's Parts of one score of a DeBERTa layer: its content term q·k/√d_h = s, taken apart as any
    score is, then its two relative terms, content → position q_i·P^k_δ/√d_h and position → content k_j·P^q_δ/√d_h,
    δ = relative_index(i, j), in `then`; `shaped` is the score, the three summed."""
    if not relative(trace):
        return parts
    q, k = trace.query[head, query:query + 1], trace.key[arch.kv_head(head), key:key + 1]  # (1, dh) each
    position_key, position_query = heads_of(trace, head)  # (2k, dh) each, or None
    index = int(relative_index(arch, torch.tensor([query]), torch.tensor([key]))[0, 0])  # the row both terms read
    delta, root = index - arch.relative_span, math.sqrt(q.shape[-1])  # the bucketed distance i − j
    names, values = [], []
    if position_key is not None:
        names.append(r"\frac{q_{%d} \cdot P^k_{\delta=%d}}{\sqrt{%d}}" % (query, delta, q.shape[-1]))
        values.append(float(q[0].double() @ position_key[index].double()) / root)
    if position_query is not None:
        names.append(r"\frac{k_{%d} \cdot P^q_{\delta=%d}}{\sqrt{%d}}" % (key, delta, q.shape[-1]))
        values.append(float(k[0].double() @ position_query[index].double()) / root)
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

    terms = [r"\frac{q^\top k}{\sqrt{d}}"] + ([r"- m_h\,(i - j)"] if arch.alibi else [])
    formula = " ".join(terms)
    if arch.score_cap:
        formula = r"%g\tanh\!\left(\left(%s\right) / %g\right)" % (arch.score_cap, formula, arch.score_cap)
    return Scorer("shaped_scaled_dot", "a(q,k) = " + formula, fn)


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
        window = arch.windows[index] if arch.windows else None
        first = 0 if window else start  # without a window only the block's own keys can lie ahead of a query
        allowed = allowed_keys(arch, index, positions[rows], seen, first)  # (r, seen − first)
        scores[..., first:].masked_fill_(~allowed, float("-inf"))
        weights = sunk_softmax(scores, sink)  # (H, r, seen)
        out[:, rows, :seen] = weights
        out[:, rows, seen:] = 0.0
        outputs.append(grouped_values(weights, value[:, :seen]))  # (H, r, dh)
    allowed = torch.ones((), dtype=torch.bool, device=query.device).expand(out.shape)
    return AttentionResult(None, out, torch.cat(outputs, 1), allowed)  # weights (H, n, n), output (H, n, dh)


def sunk_softmax(scores: torch.Tensor, sink: torch.Tensor | None) -> torch.Tensor:
    """(..., H, m, k) the softmax of each row of scores (..., H, m, k); with a learned sink (H,) (gpt-oss), over the row
    and its head's sink logit together, the sink's column then dropped, as transformers computes it."""
    if sink is None:
        return softmax(scores)  # (..., H, m, k)
    column = sink.to(scores.dtype)[:, None, None].expand(*scores.shape[:-1], 1)  # (..., H, m, 1)
    return softmax(torch.cat([scores, column], -1))[..., :-1]  # (..., H, m, k)


def explicit_attend(arch: Architecture, block: Block, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    positions: torch.Tensor, mask: torch.Tensor | None, out: torch.Tensor | None = None) -> AttentionResult:
    """grouped_attend of queries (..., H, m, dh) at `positions` over keys and values (..., KV, k, dh), its scores and
    softmax written out, for what grouped_attend has no place for: DeBERTa's relative terms added to each score
    (relative_terms), gpt-oss's learned sink (H,) in each row's softmax, so that the weights (..., H, m, k), in `out`
    where given, sum to 1 − the sink's share."""
    heads, m, dh = query.shape[-3:]
    stacked = (query / math.sqrt(dh)).reshape(*query.shape[:-3], arch.kv_heads, heads // arch.kv_heads * m, dh)  # (..., KV, G·m, dh)
    scores = shaped(arch, (stacked @ key.transpose(-2, -1)).view(*query.shape[:-1], key.shape[-2]), positions)  # (..., H, m, k)
    if relative(block):
        keys = torch.arange(key.shape[-2], device=key.device)  # (k,)
        scores = scores + relative_terms(arch, block.position_key, block.position_query, query, key, positions, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (..., H, m, k)
    weights = sunk_softmax(scores, block.sink)  # (..., H, m, k)
    weights = out.copy_(weights) if out is not None else weights
    allowed = (mask if mask is not None else torch.ones((), dtype=torch.bool, device=query.device)).expand(weights.shape)
    return AttentionResult(None, weights, grouped_values(weights, value), allowed)  # output (..., H, m, dh)


def relative(block) -> bool:
    """Whether a layer (a Block or a Trace) adds DeBERTa's relative terms to its scores."""
    return block.position_key is not None or block.position_query is not None


def relative_index(arch: Architecture, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(r, c) the row of DeBERTa's 2k relative rows that query position i reads for key position j: the distance
    i − j, bucketed (near ones as they are, far ones by log buckets up to relative_max), plus k, within 0 … 2k − 1.
    The buckets in float32, as transformers computes them: a ceil on a log is where float64 could land elsewhere."""
    distance = rows[:, None] - keys[None, :]  # (r, c) i − j, whole numbers
    buckets, top, span = arch.relative_buckets, arch.relative_max, arch.relative_span
    if buckets > 0 and top > 0:
        mid = buckets // 2
        far = torch.where((distance < mid) & (distance > -mid), torch.full_like(distance, mid - 1), distance.abs())  # (r, c)
        logged = torch.ceil(torch.log(far / mid) / torch.log(torch.tensor((top - 1) / mid)) * (mid - 1)) + mid  # (r, c)
        distance = torch.where(far <= mid, distance.to(logged.dtype), logged * distance.sign()).long()  # (r, c)
    return (distance + span).clamp(0, 2 * span - 1)  # (r, c)


def relative_terms(arch: Architecture, position_key: torch.Tensor | None, position_query: torch.Tensor | None,
                   query: torch.Tensor, key: torch.Tensor, rows: torch.Tensor, keys: torch.Tensor,
                   scaled: bool = False) -> torch.Tensor:
    """(..., H, r, c) DeBERTa's two relative terms of each score, over √dh as the content term is: content → position,
    q_i · P_k[δ(i, j)], and position → content, k_j · P_q[δ(i, j)], δ = relative_index, for queries (..., H, r, dh) at
    positions `rows` (r,) and keys (..., H, c, dh) at `keys` (c,). `scaled`: the queries are over √dh already (a scan's)."""
    heads, dh = query.shape[-3], query.shape[-1]
    index = relative_index(arch, rows.to(query.device), keys.to(query.device))  # (r, c)
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


def intervene(intervention: Intervention, index: int, a, value: torch.Tensor, positions: torch.Tensor):
    """The attention result `a` of layer `index` as `intervention` changes it: new weights are read against V again,
    and new head outputs replace the old."""
    weights = intervention.weights(index, a.weights, positions)  # (..., H, m, k) or None
    output = a.output
    if weights is not None:
        output = grouped_values(weights, value)  # (..., H, m, dh)
    changed = intervention.head_output(index, output)  # (..., H, m, dh) or None
    return type(a)(a.scores, a.weights if weights is None else weights, output if changed is None else changed, a.allowed)


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
