"""Why a head looks there: one score taken apart into what wrote the query's and the key's parts of the stream.

A layer reads the residual stream, which is a sum of what came before: the embeddings, each earlier head's output
z_h W_o^(h), each earlier MLP's output, and constants (the projections' and norms' biases). With every norm's scale
frozen at the whole stream's value (RMSNorm's rms; LayerNorm's mean and σ, the centering applied to each part), the
path from the stream to a query or key is linear: the norm, W_q or W_k, a query/key norm with its scale frozen the
same way, and the turn by the position (RoPE), which acts on each part alike. So

    score = q·k/√d_h = Σ_{a, b} q_a·k_b/√d_h,

one cell for each query-side part a and key-side part b: `score_parts` returns that table (Elhage et al. 2021's
QK circuit, taken apart on a text; Anthropic's 2025 note on QK attributions). `composition` gives their Q-, K- and
V-composition scores from the weights alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.effects.interventions import engine_model, pieces_of
from attnviz.models import engine
from attnviz.models.engine import FrozenNorm, Norm, output_matrices, rules
from attnviz.positions import turns

BIAS, EMBEDDINGS, RELATIVE = "bias", "embeddings", "relative position"


class PartsError(ValueError):
    """A score that cannot be taken apart, in words for people."""


@dataclass
class ScoreParts:
    """Head `head` of layer `layer`'s score of query piece `query` against key piece `key`, taken apart.

    score: the model's pre-softmax score, q·k/√d_h before any mask (with ALiBi's bias, or a soft cap, where the family
    has one). query_names, key_names: "embeddings", "L{layer}H{head}" for each earlier head's output, "L{layer} MLP",
    "bias" for everything constant, "relative position" for DeBERTa's relative terms (relative_sides); in these names
    layers and heads count from 1, as the pages count them (part_name), while `layer` and `head` count from 0. table (len(query_names), len(key_names)): each cell one query-side part against one key-side part;
    table.sum() == score. ALiBi's bias −m_h (i − j), a constant, sits
    in the (bias, bias) cell; a soft cap, which is not linear, scales every cell by cap·tanh(s/cap) / s."""

    layer: int
    head: int
    query: int
    key: int
    pieces: list[str]
    score: float
    query_names: list[str]
    key_names: list[str]
    table: np.ndarray

    def query_shares(self) -> dict[str, float]:
        """Each query-side part's share of the score: its row's sum."""
        return dict(zip(self.query_names, self.table.sum(1).tolist()))

    def key_shares(self) -> dict[str, float]:
        """Each key-side part's share of the score: its column's sum."""
        return dict(zip(self.key_names, self.table.sum(0).tolist()))

    def strongest(self, top: int = 6) -> tuple[list[str], list[str], np.ndarray]:
        """The `top` query-side and key-side parts of the largest |share|, the rest folded by kind: "other heads",
        "other MLPs" and "other" (embeddings, bias, relative terms), each only where it holds a part, so nothing
        empty is drawn and no one fold hides which kind of part made the score: (query names, key names, table), the
        table still summing to the score."""
        rows, row_names = _folded(self.query_names, self.table.sum(1), top)
        cols, col_names = _folded(self.key_names, self.table.sum(0), top)
        folded = np.array([[self.table[np.ix_(row, col)].sum() for col in cols] for row in rows])
        return row_names, col_names, folded

    def sentence(self, types: dict[str, np.ndarray] | None = None, top: int = 6) -> str:
        """What the table of strongest(top) shows, in words: its largest cell, then each side's largest row or column,
        a folded group ("other heads") included, and where that is a group, the largest single part beside it. Where
        head scores are given (attnviz.heads' Measured.scores: name → (L, H)), a head named says what it does: the
        score it is highest on, if at least 0.3."""
        rows, cols, table = self.strongest(top)
        i, j = np.unravel_index(int(np.argmax(np.abs(table))), table.shape)
        share = f", {table[i, j] / self.score:.0%} of the score" if abs(self.score) > 1e-12 else ""
        said = [f"the largest cell is q: {rows[i]} × k: {cols[j]} ({table[i, j]:+.3g}{share})"]
        for side, names, sums, shares in (("query", rows, table.sum(1), self.query_shares()),
                                          ("key", cols, table.sum(0), self.key_shares())):
            k = int(np.argmax(np.abs(sums)))
            line = f"the {side} side's largest {'share' if names[k] in FOLDS else 'part'} is {names[k]}"
            line += f" ({sums[k]:+.3g} of {self.score:.3g}){kind(names[k], types)}"
            if names[k] in FOLDS:
                name, share = max(shares.items(), key=lambda item: abs(item[1]))
                line += f", its largest single part {name} ({share:+.3g}){kind(name, types)}"
            said.append(line)
        return "Of this score, " + "; ".join(said) + "."


def part_name(layer: int, head: int | None = None) -> str:
    """A head's or an MLP's part of the stream by the pages' count, from 1 (layer and head given from 0): "L17H1",
    "L17 MLP". One counting for everything a person reads: the tables, the sentences, the downloads."""
    return f"L{layer + 1} MLP" if head is None else f"L{layer + 1}H{head + 1}"


def part_position(name: str) -> tuple[int, int] | None:
    """(layer, head) from 0 of a head's part name (part_name), or None for any other part."""
    found = re.fullmatch(r"L(\d+)H(\d+)", name)
    return (int(found.group(1)) - 1, int(found.group(2)) - 1) if found else None


def kind(name: str, types: dict[str, np.ndarray] | None) -> str:
    """", a previous-piece head" for a part L{l}H{h} whose highest head score (attnviz.heads) is at least 0.3."""
    from attnviz.heads import SCORES

    found = part_position(name)
    if not types or found is None:
        return ""
    layer, head = found
    best, value = max(((key, float(v[layer, head])) for key, v in types.items() if key in SCORES), key=lambda kv: kv[1])
    return f", {'an' if SCORES[best][0] in 'aeiou' else 'a'} {SCORES[best]} head ({best} score {value:.2f})" if value >= 0.3 else ""


FOLDS = ("other heads", "other MLPs", "other")  # the groups strongest() folds the rest into


def _folded(names: list[str], shares: np.ndarray, top: int) -> tuple[list[list[int]], list[str]]:
    """The `top` parts of the largest |share|, one each, then the rest grouped by kind: (index groups, names)."""
    kept = _order(shares, top)
    groups, labels = [[i] for i in kept], [names[i] for i in kept]
    rest = [i for i in range(len(names)) if i not in kept]
    for label, belongs in (("other heads", lambda n: part_position(n) is not None),
                           ("other MLPs", lambda n: n.endswith(" MLP")),
                           ("other", lambda n: part_position(n) is None and not n.endswith(" MLP"))):
        group = [i for i in rest if belongs(names[i])]
        if group:
            groups.append(group)
            labels.append(label)
    return groups, labels


def _order(shares: np.ndarray, top: int) -> list[int]:
    return [int(i) for i in np.argsort(-np.abs(shares), kind="stable")[:top]]


def frozen(norm: Norm | None, whole: torch.Tensor):
    """The norm as a linear map with its scale frozen at `whole` (..., d), one stream a row (Norm.frozen): (the map of
    parts (C, ..., d), its constant (..., d)); the identity where there is no norm."""
    fixed = norm.frozen(whole) if norm is not None else FrozenNorm.identity(whole)
    return fixed, fixed.constant


def attention_update(model, run, layer: int, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `layer`'s attention update at `positions` (P,) as it joins the stream, in parts: each head's z_h W_o^(h)
    (H, P, d) and the constant b_o (P, d), through the update's norm with its scale frozen (Gemma 2 and 3, OLMo 2)."""
    arch, params = model.arch, model.weights.layers[layer]
    heads = run.traces[layer].head_output[:, positions].double() @ output_matrices(arch, params).double().cpu()  # (H, P, d)
    bias = (params.b_out.double().cpu() if params.b_out is not None else torch.zeros(arch.d_model, dtype=torch.float64)
            ).expand(len(positions), -1).clone()  # (P, d)
    if params.attention_out_norm is not None:
        through, constant = frozen(params.attention_out_norm, heads.sum(0) + bias)
        heads, bias = through(heads), through(bias) + constant
    return heads, bias


def stream_parts(model, run, layer: int, positions: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    """(names, parts (C, P, d) float64) whose sum is the stream layer `layer` reads at `positions` (P,),
    run.hidden[layer] there."""
    arch, weights = model.arch, model.weights
    names = [EMBEDDINGS, BIAS]
    embedded = torch.from_numpy(run.hidden[0]).double()[positions]  # (P, d)
    parts = [embedded, torch.zeros_like(embedded)]
    for l in range(layer):
        params, trace = weights.layers[l], run.traces[l]
        stream = torch.stack(parts)  # (C, P, d)
        x = stream.sum(0)  # (P, d) the layer's input
        heads, bias = attention_update(model, run, l, positions)  # (H, P, d), (P, d)
        mlp = trace.mlp_out[positions].double()  # (P, d) what joins the stream
        if arch.post_norm:  # BERT: LN₁(x + attention), then LN₂(that + MLP)
            first, constant = frozen(params.attention_norm, x + heads.sum(0) + bias)
            stream, heads, bias = first(stream), first(heads), first(bias) + constant
            second, constant = frozen(params.mlp_norm, stream.sum(0) + heads.sum(0) + bias + mlp)
            stream, heads, bias, mlp = second(stream), second(heads), second(bias) + constant, second(mlp)
        stream[1] += bias  # the constants gather in "bias"
        names += [part_name(l, h) for h in range(arch.heads)] + [part_name(l)]
        parts = [*stream, *heads, mlp]
    return names, torch.stack(parts)  # (C, P, d)


def projected(model, run, layer: int, head: int, positions: torch.Tensor, side: str) -> tuple[list[str], torch.Tensor]:
    """(names, the query's (side "query"), the key's ("key") or the value's ("value") parts (C, P, d_h)) of `head` in
    `layer` at `positions` (P,): each stream part through the frozen norm, W_q, W_k or W_v (the bias in "bias"), and
    for a query or key the frozen query or key norm and the turn by its position."""
    arch, params = model.arch, model.weights.layers[layer]
    names, parts = stream_parts(model, run, layer, positions)  # (C, P, d)
    if not arch.post_norm:
        through, constant = frozen(params.attention_norm, parts.sum(0))
        parts = through(parts)
        parts[1] += constant
    w, b, count = {"query": (params.w_query, params.b_query, arch.heads), "key": (params.w_key, params.b_key, arch.kv_heads),
                   "value": (params.w_value, params.b_value, arch.kv_heads)}[side]
    full = parts @ w.double().cpu()  # (C, P, count·dh)
    if b is not None:
        full[1] += b.double().cpu()
    which = head if side == "query" else arch.kv_head(head)
    dh = arch.head_dim
    if side == "value":  # no norm of its own, no turn by position
        return names, full[..., which * dh:(which + 1) * dh]  # (C, P, dh)
    norm = params.query_norm if side == "query" else params.key_norm
    if norm is not None and norm.weight.shape[-1] != dh:  # OLMo 2: the whole query or key normed at once
        through, constant = frozen(norm, full.sum(0))
        full = through(full)
        full[1] += constant
    vectors = full[..., which * dh:(which + 1) * dh]  # (C, P, dh)
    if norm is not None and norm.weight.shape[-1] == dh:  # each head's (Qwen3, Gemma 3, Phi; StableLM's its own)
        through, constant = frozen(norm.head(which), vectors.sum(0))
        vectors = through(vectors)
        vectors[1] += constant
    base = arch.base(layer)
    if base is not None:
        angles = turns(positions, arch.rotary_dims or dh, base, torch.float64)  # (P, r // 2) each
        vectors = engine.turned(arch, vectors, positions, angles, base)  # (C, P, dh)
    return names, vectors


def score_parts(model, text, layer: int, head: int, query: int, key: int) -> ScoreParts:
    """Head `head` of layer `layer` (from 0), its score of the piece at `query` against the piece at `key`, taken
    apart into what wrote each side (ScoreParts). A PartsError says why it cannot: a model transformers computes, a
    layer, head or position out of range, a key after the query in a decoder."""
    model = engine_model(model, "taking a score apart")
    pieces = pieces_of(model, text)
    check(model, layer, head, query, key, len(pieces))
    return score_parts_of(model, model.run_pieces(pieces), layer, head, query, key)


def score_parts_of(model, run, layer: int, head: int, query: int, key: int) -> ScoreParts:
    """score_parts of a run the engine computed already (a page's)."""
    check(model, layer, head, query, key, len(run.pieces))
    with torch.inference_mode():
        names, q = projected(model, run, layer, head, torch.tensor([query]), "query")  # (C, 1, dh)
        _, k = projected(model, run, layer, head, torch.tensor([key]), "key")  # (C, 1, dh)
        q, k = q[:, 0], k[:, 0]  # (C, dh) each
        names, q, k, apart = relative_sides(model, layer, head, query, key, names, q, k)  # (C′, dh) each
        table = (q @ k.T / math.sqrt(model.arch.head_dim)).numpy()  # (C′, C′)
        if apart:
            table[-1, -1] = 0.0  # DeBERTa's two position vectors never meet in a score
    shaped = float(table.sum())
    for rule, before, shaped in rules.steps(model.arch, shaped, head, query, key):
        # ALiBi's bias, a constant, joins the (bias, bias) cell; a soft cap, not linear, scales every cell alike
        table = rule.why(table, before, shaped, (1, 1)) if isinstance(rule, rules.Alibi) else rule.why(table, before, shaped)
    return ScoreParts(layer, head, query, key, run.pieces.labels(), shaped, names, list(names), table)


def relative_sides(model, layer: int, head: int, query: int, key: int, names: list[str], q: torch.Tensor,
                   k: torch.Tensor) -> tuple[list[str], torch.Tensor, torch.Tensor, bool]:
    """DeBERTa's relative terms as one more part on each side, RELATIVE: on the key side the layer's key P^k_δ for
    the distance δ = bucket(query − key), which every query-side part meets (content → position); on the query side
    its query P^q_δ, which meets every key-side part (position → content). Their own cell is no term of the score
    (score_parts_of zeroes it). Other models' sides as they are."""
    params = model.weights.layers[layer]
    if not engine.relative(params):
        return names, q, k, False
    dh = model.arch.head_dim
    tables = [None if t is None else engine.of_head(t, head, dh) for t in (params.position_query, params.position_key)]
    query_row, key_row = rules.relative(model.arch).why(query, key, *tables, dh)  # (1, dh) each
    return [*names, RELATIVE], torch.cat([q, query_row]), torch.cat([k, key_row]), True


def value_parts(model, text, layer: int, head: int, query: int) -> dict[str, float]:
    """V-composition on a text: what wrote the values that head `head` of `layer` (from 0) mixes at `query`. Its
    output z = Σ_j α_j v_j is the sum over the stream's parts c of z_c = Σ_j α_j v_{c,j}, v_{c,j} part c of piece j's
    stream through the frozen norm and W_v; each part's share of the output is z_c·z / ‖z‖², z the forward's own
    output, and the shares sum to 1.
    name → share, the same names as ScoreParts'."""
    model = engine_model(model, "taking a head's output apart")
    pieces = pieces_of(model, text)
    check(model, layer, head, query, query, len(pieces))
    return value_parts_of(model, model.run_pieces(pieces), layer, head, query)


def value_parts_of(model, run, layer: int, head: int, query: int) -> dict[str, float]:
    """value_parts of a run the engine computed already (a page's)."""
    check(model, layer, head, query, query, len(run.pieces))
    weights = torch.from_numpy(run.weights[layer, head, query]).double()  # (n,)
    read = torch.nonzero(weights).flatten()  # (P,) the keys it reads
    with torch.inference_mode():
        if model.arch.post_norm:  # every part through each later norm: the parts of every key, then their mix
            names, values = projected(model, run, layer, head, read, "value")  # (C, P, dh)
            total = torch.einsum("p,cpd->cd", weights[read], values)  # (C, dh) Σ_j α_j v_{c,j}
        else:
            names, total = mixed_values(model, run, layer, head, read, weights[read])  # (C, dh)
        output = run.traces[layer].head_output[head, query].double()  # (dh,) the head's output z, as the forward made it
        shares = (total @ output / output.dot(output)).tolist()  # they sum to 1 where the parts sum to z
    return dict(zip(names, shares))


def mixed_values(model, run, layer: int, head: int, read: torch.Tensor, alpha: torch.Tensor):
    """(names, Σ_j α_j v_{c,j} (C, d_h)) for a pre-norm model: each part mixed over the keys `read` (P,) with weights
    `alpha` (P,) as it comes, a layer at a time, so no (C, P, d) array is held (a long text's would take GiBs)."""
    arch, params = model.arch, model.weights.layers[layer]
    through, constant = frozen(params.attention_norm, torch.from_numpy(run.hidden[layer]).double()[read])  # the norm at each key

    def mix(parts: torch.Tensor) -> torch.Tensor:  # (..., P, d) → (..., d)
        return torch.einsum("p,...pd->...d", alpha, through(parts))

    names, mixed = [EMBEDDINGS, BIAS], [mix(torch.from_numpy(run.hidden[0]).double()[read]), alpha @ constant]
    for l in range(layer):
        trace = run.traces[l]
        heads, bias = attention_update(model, run, l, read)  # (H, P, d), (P, d)
        mixed[1] = mixed[1] + mix(bias)
        names += [part_name(l, h) for h in range(arch.heads)] + [part_name(l)]
        mixed += [*mix(heads), mix(trace.mlp_out[read].double())]
    full = torch.stack(mixed) @ params.w_value.double().cpu()  # (C, KV·dh)
    if params.b_value is not None:
        full[1] += alpha.sum() * params.b_value.double().cpu()
    which = arch.kv_head(head)
    return names, full[:, which * arch.head_dim:(which + 1) * arch.head_dim]  # (C, dh)


def check(model, layer: int, head: int, query: int, key: int, n: int) -> None:
    for value, what in ((layer, "layer"), (head, "head"), (query, "query"), (key, "key")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise PartsError(f"{what} must be a whole number, got {value!r}.")
    if not 0 <= layer < model.layers:
        raise PartsError(f"layer must be from 0 to {model.layers - 1} (counted from 0), got {layer}.")
    if not 0 <= head < model.heads:
        raise PartsError(f"head must be from 0 to {model.heads - 1} (counted from 0), got {head}.")
    for value, what in ((query, "query"), (key, "key")):
        if not 0 <= value < n:
            raise PartsError(f"{what} must be a position from 0 to {n - 1} in this text of {n} pieces, got {value}.")
    unread = rules.keys(model.arch, layer).why(query, key)
    if unread:
        raise PartsError(unread)


def composition(model) -> dict[str, np.ndarray]:
    """Elhage et al.'s (2021) Q-, K- and V-composition scores between every pair of heads, from the weights alone:
    {"q", "k", "v"}: (L, H, L, H), [l₁, h₁, l₂, h₂] how much head h₂ of layer l₂ reads head h₁ of layer l₁'s output
    through its query, key or value, ‖W_OV^(h₁) M‖_F / (‖W_OV^(h₁)‖_F ‖M‖_F), M the later head's W_QK ("q"), W_QKᵀ
    ("k") or W_OV ("v"); 0 where l₁ ≥ l₂. With our (in, out) matrices x W_OV = x W_V W_O, and a score is
    x_q W_QK x_kᵀ with W_QK = W_Q W_Kᵀ. The later layer's norm weight is folded into its W_Q, W_K and W_V (as
    TransformerLens folds it); the turn by position is left out, as there. Each matrix is a product U V of rank d_h,
    so ‖U_A V_A U_B V_B‖_F = ‖(R_A V_A)(U_B R_Bᵀ)‖_F with R_A, R_B the R factors of QR(U_A) and QR(V_Bᵀ): one
    (H·d_h × d) by (d × H·d_h) product a pair of layers and kind, never a d × d matrix (float32)."""
    model = engine_model(model, "composition scores")
    arch = model.arch
    r = arch.head_dim
    with torch.inference_mode():
        writes, reads, norms = [], {kind: [] for kind in "qkv"}, {kind: [] for kind in "qkv"}
        for params in model.weights.layers:
            gain = params.attention_norm.weight.double().cpu() if (params.attention_norm is not None and not arch.post_norm) else None
            group = torch.tensor([arch.kv_head(h) for h in range(arch.heads)])
            w_q = _by_head(arch, params.w_query, gain, arch.heads)  # (H, d, dh)
            w_k, w_v = (_by_head(arch, w, gain, arch.kv_heads)[group] for w in (params.w_key, params.w_value))  # (H, d, dh)
            w_o = output_matrices(arch, params).double().cpu()  # (H, dh, d)
            ov = lowrank(w_v, w_o)
            writes.append(ov[0])  # (H, dh, d) R_U V
            for kind, (u, v) in (("q", (w_q, w_k.transpose(-2, -1))), ("k", (w_k, w_q.transpose(-2, -1))),
                                 ("v", (w_v, w_o))):
                _, read, norm = lowrank(u, v)
                reads[kind].append(read)  # (H, d, dh) U R_Vᵀ
                norms[kind].append(norm)  # (H,)
        scores = {kind: np.zeros((arch.layers, arch.heads, arch.layers, arch.heads)) for kind in "qkv"}
        for later in range(1, arch.layers):
            for kind in "qkv":
                read = reads[kind][later].transpose(0, 1).flatten(1)  # (d, H·dh)
                for earlier in range(later):  # one layer pair at a time: (H·dh)² floats, whatever the model's size
                    product = (writes[earlier].flatten(0, 1) @ read).view(arch.heads, r, arch.heads, r)  # (H₁, dh, H₂, dh)
                    found = product.pow(2).sum((1, 3)).sqrt()  # (H₁, H₂)
                    found /= norms["v"][earlier][:, None] * norms[kind][later][None]
                    scores[kind][earlier, :, later, :] = found.double().numpy()
    return scores


def lowrank(u: torch.Tensor, v: torch.Tensor):
    """For matrices A = U V (..., d, d) of rank r, U (..., d, r), V (..., r, d): (R_U V (..., r, d), U R_Vᵀ (..., d, r),
    ‖A‖_F (...,)), float32, R_U and R_V the R factors of QR(U) and QR(Vᵀ), whose Q factors have orthonormal columns."""
    r_u = torch.linalg.qr(u).R  # (..., r, r)
    r_v = torch.linalg.qr(v.transpose(-2, -1)).R  # (..., r, r)
    norm = (r_u @ r_v.transpose(-2, -1)).flatten(-2).norm(dim=-1)  # (...,)
    return (r_u @ v).float(), (u @ r_v.transpose(-2, -1)).float(), norm.float()


def _by_head(arch, w: torch.Tensor, gain: torch.Tensor | None, count: int) -> torch.Tensor:
    """(count, d, dh) a projection (d, count·dh) split by head, the norm's gain folded into its rows."""
    w = w.double().cpu()  # (d, count·dh)
    if gain is not None:
        w = gain[:, None] * w  # (d, count·dh)
    return w.view(w.shape[0], count, arch.head_dim).transpose(0, 1)  # (count, d, dh)
