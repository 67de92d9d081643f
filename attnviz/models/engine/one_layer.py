"""One layer of the engine: the embedding, the projections to q, k and v (rotary where the family turns them), its
attention, and the rest of the layer (the norms, the MLP or the experts, the residual)."""

from __future__ import annotations

import dataclasses

import torch

from attnviz.positions import rotate, turns
from attnviz.models.engine.layout import ACTIVATIONS, Architecture, LayerWeights, Intervention, Norm, Trace, Weights
from attnviz.models.engine import attend
from attnviz.models.engine.attend import WHOLE


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x.unflatten(-1, (heads, x.shape[-1] // heads)).transpose(-3, -2)  # (..., n, width) -> (..., heads, n, dh)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    y = x @ weight  # (n, out)
    return y if bias is None else y + bias


def embed(arch: Architecture, weights: Weights, ids: torch.Tensor, positions: torch.Tensor,
          vectors: torch.Tensor | None = None) -> torch.Tensor:
    """(n, d) the pieces' embeddings, plus learned positions and BERT's segment, then BERT's norm. `vectors` (n, d),
    when given, stand for the pieces' rows of the embedding matrix (a gradient with respect to them is then taken)."""
    x = weights.embeddings[ids] if vectors is None else vectors  # (n, d)
    if arch.embed_scale != 1.0:
        x = x * torch.tensor(arch.embed_scale, dtype=x.dtype)  # (n, d) rounded to x's dtype first, as Gemma does
    if arch.padding_index is not None:  # RoBERTa's rule (transformers' create_position_ids_from_input_ids)
        real = (ids != arch.padding_index).long()  # (..., n)
        positions = torch.cumsum(real, -1) * real + arch.padding_index  # (..., n)
    if weights.positions is not None:
        x = x + weights.positions[positions]  # (n, d)
    if weights.token_type is not None:
        x = x + weights.token_type  # (n, d)
    x = weights.embedding_norm(x) if weights.embedding_norm is not None else x  # (n, E)
    return x if weights.embedding_project is None else _linear(x, *weights.embedding_project)  # (n, d)


def project(arch: Architecture, params: LayerWeights, x: torch.Tensor, positions: torch.Tensor, index: int):
    """Layer `index`'s queries (..., H, m, dh), keys and values (..., KV, m, dh) of inputs x (..., m, d) at `positions` (m,)."""
    query = _linear(x, params.w_query, params.b_query)  # (..., m, H·dh)
    key = _linear(x, params.w_key, params.b_key)  # (..., m, KV·dh)
    whole = params.query_norm is not None and params.query_norm.weight.shape[-1] != arch.head_dim
    if whole:  # OLMo 2 norms the whole query and key, every head at once
        query, key = params.query_norm(query), params.key_norm(key)  # (..., m, H·dh), (..., m, KV·dh)
    query, key = split_heads(query, arch.heads), split_heads(key, arch.kv_heads)  # (H, m, dh), (KV, m, dh)
    value = split_heads(_linear(x, params.w_value, params.b_value), arch.kv_heads)  # (KV, m, dh)
    if params.query_norm is not None and not whole:
        query, key = params.query_norm(query), params.key_norm(key)  # (H, m, dh), (KV, m, dh)
    base = arch.base(index)
    if base is not None:
        angles = turns(positions, arch.rotary_dims or query.shape[-1], base, query.dtype)  # (m, r // 2) each
        query, key = turned(arch, query, positions, angles, base), turned(arch, key, positions, angles, base)  # (H | KV, m, dh)
    return query, key, value


def attention_input(arch: Architecture, params: LayerWeights, x: torch.Tensor) -> torch.Tensor:
    """(..., m, d) what a layer's W_q, W_k and W_v read: its input x, after the norm where the family norms it first."""
    return x if arch.post_norm or params.attention_norm is None else params.attention_norm(x)


def turned(arch: Architecture, x: torch.Tensor, positions: torch.Tensor, angles, base: float) -> torch.Tensor:
    """Queries or keys x (..., m, dh) turned by position (RoPE) by `angles`, turns() of the positions by `base`; only
    the first rotary_dims of each where the family turns part of a head (GPT-NeoX, Phi-3), the rest as they are."""
    r = arch.rotary_dims or x.shape[-1]
    moved = rotate(x[..., :r], positions, base, arch.rope_pairs, angles)  # (..., m, r)
    return moved if r == x.shape[-1] else torch.cat([moved, x[..., r:]], -1)  # (..., m, dh)


def feed_forward(arch: Architecture, params: LayerWeights, h: torch.Tensor) -> torch.Tensor:
    """(..., m, d) the MLP's update of inputs h (..., m, d): one MLP, or the mixture of the experts the router picks."""
    if params.router is not None:
        return mixture(arch, params, h)
    return mlp(arch, h, params.w_gate, params.b_gate, params.w_up, params.b_up, params.w_down, params.b_down)


def mlp(arch: Architecture, h: torch.Tensor, w_gate, b_gate, w_up, b_up, w_down, b_down) -> torch.Tensor:
    act = ACTIVATIONS[arch.activation]
    up = _linear(h, w_up, b_up)  # (m, d_ff)
    if not arch.gated:
        return _linear(act(up), w_down, b_down)  # (m, d)
    gate = _linear(h, w_gate, b_gate)  # (m, d_ff)
    if arch.gate_limit is not None:  # gpt-oss's clamped SwiGLU
        gate, up = gate.clamp(max=arch.gate_limit), up.clamp(-arch.gate_limit, arch.gate_limit) + 1  # (m, d_ff) each
    return _linear(act(gate) * up, w_down, b_down)  # (m, d)


def mixture(arch: Architecture, params: LayerWeights, h: torch.Tensor) -> torch.Tensor:
    """A mixture of experts (Mixtral, Qwen3-MoE): each piece goes to the top_experts experts of the highest router
    probability, softmax(h W_router), and gets their outputs weighted by those probabilities (rescaled to sum to 1
    where the family does)."""
    flat = h.reshape(-1, h.shape[-1])  # (t, d)
    probs = torch.softmax(_linear(flat, params.router, params.router_bias).float(), -1)  # (t, E)
    share, chosen = probs.topk(arch.top_experts, -1)  # (t, k) each
    if arch.renormalise_experts:  # gpt-oss's softmax over the top logits is the same
        share = share / share.sum(-1, keepdim=True)  # (t, k)
    out = torch.zeros_like(flat)  # (t, d)

    def of(t: torch.Tensor | None, expert: int) -> torch.Tensor | None:
        return None if t is None else t[expert]

    for expert in chosen.unique().tolist():
        rows, slot = (chosen == expert).nonzero(as_tuple=True)  # (r,) each
        y = mlp(arch, flat[rows], of(params.w_gate, expert), of(params.b_gate, expert), params.w_up[expert],
                of(params.b_up, expert), params.w_down[expert], of(params.b_down, expert))  # (r, d)
        out.index_add_(0, rows, y * share[rows, slot, None].to(y.dtype))
    return out.view_as(h)


def layer(arch: Architecture, params: LayerWeights, index: int, x: torch.Tensor, positions: torch.Tensor,
          key: torch.Tensor | None = None, value: torch.Tensor | None = None,
          intervention: Intervention | None = None, attention=WHOLE, trace: bool = True):
    """One layer over inputs x (..., m, d) at `positions`: (x after the layer, what its attention gave, its Trace, or
    None where `trace` is False). The one body of a layer: the forward, a batch, a K/V step, generation, the scan and
    the needle lab each run it, with their own way through the attention (`attention`).

    - `key` and `value` (..., KV, c, dh), when given, are the earlier pieces' cached keys and values, read before these.
    - `attention.attend(arch, params, index, query, key, value, positions, intervention)`: the attention strategy,
      returning what it gave, the heads' outputs αV (..., H, m, dh) as `.output`: the contract with every weight
      held (attend.Whole, the default), or the scan's blocks of queries (scan.Blocked).
    - `intervention` enters here, once for every strategy: the strategy is handed it to change the weights where it
      holds them, before they meet V (Intervention.weights, a knockout); the layer changes the heads' outputs before
      W_o (Intervention.head_output, an ablation).
    - Without a trace, the input x and the projections are let go as soon as they are read, and the rest of the layer
      runs REST_ROWS rows at a time (rest_in_rows): what a scan of a whole context needs to stay within its memory.

    Leading dimensions of x are a batch: copies of the same pieces, as the effects of many interventions are computed
    at once, or different texts padded to one length (attend.Whole's `real`)."""
    h = attention_input(arch, params, x)  # (..., m, d)
    query, new_key, new_value = project(arch, params, h, positions, index)  # (..., H, m, dh), (..., KV, m, dh) × 2
    key = new_key if key is None else torch.cat([key.expand(*new_key.shape[:-2], -1, -1), new_key], -2)  # (..., KV, c + m, dh)
    value = new_value if value is None else torch.cat([value.expand(*new_value.shape[:-2], -1, -1), new_value], -2)
    kept = (h, query, key, value) if trace else None
    handed = [query]  # without a trace the strategy holds the only reference, and may let the query go once read
    del h, query, new_key, new_value
    a = attention.attend(arch, params, index, handed.pop(), key, value, positions, intervention)  # .output (..., H, m, dh)
    changed = None if intervention is None else intervention.head_output(index, a.output)  # (..., H, m, dh) or None
    if changed is not None:
        a = dataclasses.replace(a, output=changed)
    if kept is None:
        return rest_in_rows(arch, params, x, a.output), a, None  # (..., m, d)
    y, attended, middle, mlp = rest_of_layer(arch, params, x, a.output)  # (..., m, d) each
    return y, a, Trace(*kept, a.output, attended, middle, mlp, params.position_key, params.position_query)


def rest_of_layer(arch: Architecture, params: LayerWeights, x: torch.Tensor, output: torch.Tensor):
    """The rest of a layer, from its heads' outputs αV (..., H, m, dh) and its input x (..., m, d): W_o, the residual,
    the norms where the family puts them, and the feed-forward. Returns (x after the layer, the attention's update,
    the stream the MLP's update is added to, the MLP's update), (..., m, d) each; an update is what joins the
    residual stream (after Gemma's and OLMo 2's norms of it)."""
    heads_out = output.transpose(-3, -2).flatten(-2)  # (..., m, H·dh)
    attended = normed(params.attention_out_norm, _linear(heads_out, params.w_out, params.b_out))  # (..., m, d)
    if arch.parallel:  # the MLP reads the layer's input, not the attention's sum
        middle = x + attended  # (..., m, d)
        update = feed_forward(arch, params, params.mlp_norm(x))  # (..., m, d)
        return middle + update, attended, middle, update
    if arch.post_norm:
        middle = params.attention_norm(x + attended)  # (..., m, d)
        update = feed_forward(arch, params, middle)  # (..., m, d)
        return params.mlp_norm(middle + update), attended, middle, update
    middle = x + attended  # (..., m, d)
    update = normed(params.mlp_out_norm, feed_forward(arch, params, normed(params.mlp_norm, middle)))  # (..., m, d)
    return middle + update, attended, middle, update


def normed(norm: Norm | None, x: torch.Tensor) -> torch.Tensor:
    return x if norm is None else norm(x)


def after_attention(arch: Architecture, params: LayerWeights, x: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """x after the layer (..., m, d), from its heads' outputs αV and its input x (rest_of_layer)."""
    return rest_of_layer(arch, params, x, output)[0]


REST_ROWS = 1024  # without a trace, the rest of a layer (W_o, the norms, the MLP) is taken this many rows at a time


def rest_in_rows(arch: Architecture, params: LayerWeights, x: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """x after the layer (n, d) (after_attention), REST_ROWS rows at a time: each row's W_o, norms and MLP read that
    row alone, and a whole document's MLP at once held n × d_ff three times over (150 MB at 8,192 pieces of SmolLM2,
    on top of what a scan keeps)."""
    if x.ndim != 2 or x.shape[0] <= REST_ROWS:
        return after_attention(arch, params, x, output)  # (..., n, d)
    after = torch.empty_like(x)  # (n, d)
    for start in range(0, x.shape[0], REST_ROWS):
        rows = slice(start, start + REST_ROWS)
        after[rows] = after_attention(arch, params, x[rows], output[:, rows])  # (r, d)
    return after
