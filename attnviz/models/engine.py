"""attnviz's own transformer: one layout that every family's weights are mapped into, and one forward over it.

A family (bert.py, gpt2.py, llama.py, neox.py, gguf.py) is a mapping of a checkpoint into `Weights`, never a second
engine. What differs between families is said by `Architecture` and `Block`: where the norms sit (after the residual,
as BERT; before the block, as GPT-2 and Llama), LayerNorm or RMSNorm, learned positions or rotary ones (on all of a
head or part of it), GELU or a gated SiLU, how many key/value heads the query heads share, a sliding window, norms of
each head's query and key (Qwen3), attention and MLP side by side (GPT-NeoX's parallel residual). Every layer's
attention goes through the engine's `grouped_attend` (attnviz.attention), the same softmax(QKᵀ/√d_k) as every page.

Matrices are kept as (in, out): y = xW + b, as in our notes; nn.Linear's (out, in) are transposed once, at load.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.attention import AttentionResult, Parts, Scorer, cpu_threads, grouped_attend, scaled_dot_scores, softmax
from attnviz.positions import Rope, rotate, turns

ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact (erf), BERT's "gelu"
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),  # gpt-oss's gate: x·σ(αx), α = 1.702
    "silu": F.silu,
    "swish": F.silu,
}


@dataclass(frozen=True)
class Architecture:
    family: str  # the mapping that read it: "bert", "gpt2" or "llama"
    kind: str  # "encoder" (every piece sees every piece) or "decoder" (causal)
    layers: int
    heads: int  # query heads
    kv_heads: int  # key/value heads, each read by heads // kv_heads query heads
    head_dim: int
    d_model: int
    vocab: int
    max_positions: int
    norm: str  # "layer" (LayerNorm, with a bias) or "rms" (RMSNorm)
    post_norm: bool  # BERT: x = norm(x + f(x)); else x = x + f(norm(x)) and a final norm
    positions: str  # "learned" (a table added to the embeddings) or "rotary" (q and k turned)
    activation: str  # a key of ACTIVATIONS
    gated: bool  # the feed-forward is act(x W_gate) ∘ (x W_up), then W_down (SwiGLU)
    padding_index: int | None = None  # RoBERTa: positions count from padding_index + 1, and a padding piece sits at it
    rope_base: float | Rope = 10000.0  # a Rope where the model stretches RoPE past its trained length
    rope_pairs: str = "halves"  # attnviz.positions.rotate's pairing
    windows: tuple[int | None, ...] = ()  # per layer: a sliding window, or None: a decoder's query reads its last w
    # pieces; an encoder's, the pieces within w either side (ModernBERT's local layers)
    token_type: bool = False  # BERT adds segment A's embedding to every piece
    rotary_dims: int | None = None  # GPT-NeoX, Phi-3: only each head's first rotary_dims dimensions are turned
    parallel: bool = False  # GPT-NeoX: attention and MLP read the same input, x + attn(norm₁(x)) + mlp(norm₂(x))
    rope_bases: tuple[float | Rope | None, ...] = ()  # per layer: its RoPE base, None where it has no positions (SmolLM3's
    # NoPE layers); () for rope_base on every layer. Gemma 3 turns its local layers by one base, its global by another
    embed_scale: float = 1.0  # Gemma: the embeddings times √d; Granite: its embedding_multiplier
    score_cap: float | None = None  # Gemma 2: each score s becomes cap·tanh(s / cap) before the mask and softmax
    alibi: bool = False  # BLOOM: no positions in the stream; each score gets −m_h·(i − j), a slope m_h per head
    top_experts: int = 0  # a mixture of experts (Mixtral, Qwen3-MoE): the experts each piece is sent to
    renormalise_experts: bool = True  # their router probabilities rescaled to sum to 1 (Mixtral; Qwen3-MoE's norm_topk_prob)
    gate_limit: float | None = None  # gpt-oss: the gate clamped to at most this, the up projection to ±this, plus 1
    sinks: bool = False  # gpt-oss: each head has a learned sink (Block.sink), so its weights sum to less than 1
    relative_span: int = 0  # DeBERTa: k, its relative distances bucketed into 2k rows (Block.position_key, position_query)
    relative_buckets: int = -1  # DeBERTa's position_buckets: distances past half of it go by log buckets (-1: none)
    relative_max: int = -1  # DeBERTa's max_relative_positions, where the log buckets end

    def base(self, layer: int) -> float | Rope | None:
        """Layer `layer`'s RoPE base, or None where it turns nothing (learned positions, a NoPE layer)."""
        if self.positions != "rotary":
            return None
        return self.rope_bases[layer] if self.rope_bases else self.rope_base

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped-query attention: H / KV query heads share one)."""
        return head // self.group

    def position_rows(self, n: int) -> torch.Tensor:
        """(n,) the rows of the learned position table that a text's first n pieces read (RoBERTa's start after its
        padding index)."""
        start = self.padding_index + 1 if self.padding_index is not None else 0
        return torch.arange(start, start + n)

    @property
    def context(self) -> int:
        """The most pieces its positions reach (RoBERTa's start after its padding index)."""
        return self.max_positions - (self.padding_index + 1 if self.padding_index is not None else 0)

    @property
    def causal(self) -> bool:
        return self.kind == "decoder"


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x (..., d) / RMS(x), before the norm's weight: in float32 for a half-precision x, as transformers computes it,
    then back in x's dtype."""
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # (..., d)
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)  # (..., d)


@dataclass
class Norm:
    kind: str  # "layer" or "rms"
    weight: torch.Tensor  # (d,); (count, dh) where each head has its own (StableLM's q/k LayerNorms)
    bias: torch.Tensor | None  # (d,); (count, dh)
    eps: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:  # each head's own, over x (..., count, n, dh)
            weight, bias = self.weight[:, None], None if self.bias is None else self.bias[:, None]  # (count, 1, dh)
            if self.kind == "rms":
                return rms(x, self.eps) * weight  # (..., count, n, dh)
            normed = F.layer_norm(x, x.shape[-1:], None, None, self.eps) * weight  # (..., count, n, dh)
            return normed if bias is None else normed + bias
        if self.kind == "rms":
            return rms(x, self.eps) * self.weight  # (..., n, d)
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)  # (..., n, d)

    def head(self, h: int) -> "Norm":
        """The norm of head h's vectors: its own where each head has one, else this one."""
        if self.weight.dim() == 1:
            return self
        return Norm(self.kind, self.weight[h], None if self.bias is None else self.bias[h], self.eps)


@dataclass
class Block:
    """One transformer layer in our layout."""

    w_query: torch.Tensor  # (d, H·dh)
    b_query: torch.Tensor | None  # (H·dh,)
    w_key: torch.Tensor  # (d, KV·dh)
    b_key: torch.Tensor | None  # (KV·dh,)
    w_value: torch.Tensor  # (d, KV·dh)
    b_value: torch.Tensor | None  # (KV·dh,)
    w_out: torch.Tensor  # (H·dh, d)
    b_out: torch.Tensor | None  # (d,)
    attention_norm: Norm | None  # before the attention (pre-norm), or after its residual (post-norm); OLMo 2: none
    mlp_norm: Norm | None
    w_up: torch.Tensor  # (d, d_ff); (E, d, d_ff) for a mixture of E experts
    b_up: torch.Tensor | None  # (d_ff,)
    w_down: torch.Tensor  # (d_ff, d); (E, d_ff, d)
    b_down: torch.Tensor | None  # (d,)
    w_gate: torch.Tensor | None = None  # (d, d_ff), gated feed-forwards only; (E, d, d_ff)
    b_gate: torch.Tensor | None = None  # (d_ff,)
    query_norm: Norm | None = None  # Qwen3, Gemma 3: each head's query normed over its dh, before the turn by position;
    # OLMo 2: the whole query, over all heads' H·dh at once (told apart by the weight's size)
    key_norm: Norm | None = None  # likewise each key
    attention_out_norm: Norm | None = None  # Gemma 2 and 3, OLMo 2: the attention's update normed before the residual
    mlp_out_norm: Norm | None = None  # likewise the MLP's
    router: torch.Tensor | None = None  # (d, E) a mixture of experts' router: the piece's logits over the experts
    router_bias: torch.Tensor | None = None  # (E,) gpt-oss; its experts' biases are b_gate, b_up (E, d_ff), b_down (E, d)
    sink: torch.Tensor | None = None  # (H,) gpt-oss: each head's learned sink, a logit in every row's softmax with no
    # value, so a row's weights over the pieces sum to 1 − the sink's share
    position_key: torch.Tensor | None = None  # (2k, H·dh) DeBERTa: a key for each relative distance (content → position)
    position_query: torch.Tensor | None = None  # (2k, H·dh) and a query for each (position → content)


@dataclass
class Weights:
    embeddings: torch.Tensor  # (vocab, d)
    blocks: list[Block]
    positions: torch.Tensor | None = None  # (max_positions, d), learned positions
    token_type: torch.Tensor | None = None  # (d,)
    embedding_norm: Norm | None = None  # BERT's LayerNorm of the embeddings
    embedding_project: tuple[torch.Tensor, torch.Tensor | None] | None = None  # ELECTRA: (E, d), (d,) after the norm
    final_norm: Norm | None = None  # pre-norm models' norm after the last layer
    unembed: torch.Tensor | None = None  # (d, vocab) the output matrix of a decoder (a view of embeddingsᵀ when tied)
    logit_cap: float | None = None  # Gemma 2: each next-piece logit z becomes cap·tanh(z / cap)
    unembed_bias: torch.Tensor | None = None  # (vocab,) Phi's output bias

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor held, each once (a tied output matrix shares the embeddings' memory)."""
        found = [self.embeddings, self.positions, self.token_type, self.unembed]
        for norm in (self.embedding_norm, self.final_norm):
            if norm is not None:
                found += [norm.weight, norm.bias]
        found += list(self.embedding_project or ()) + [self.unembed_bias]
        for block in self.blocks:
            for value in vars(block).values():
                found += [value.weight, value.bias] if isinstance(value, Norm) else [value]
        unique: dict[tuple[int, int], torch.Tensor] = {}
        for t in found:
            if isinstance(t, torch.Tensor):
                unique.setdefault((t.untyped_storage().data_ptr(), t.storage_offset()), t)
        return list(unique.values())

    @property
    def nbytes(self) -> int:
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in self.tensors()}
        return sum(storages.values())


@dataclass
class Trace:
    """One layer's attention as the forward computed it (on the CPU)."""

    x: torch.Tensor  # (n, d) what W_q, W_k and W_v multiply: the layer's input, after the norm where it comes first
    query: torch.Tensor  # (H, n, dh) xW_q + b_q, split into heads (turned by position under RoPE)
    key: torch.Tensor  # (KV, n, dh) likewise: each read by a group of H / KV query heads
    value: torch.Tensor  # (KV, n, dh)
    head_output: torch.Tensor  # (H, n, dh) αV
    attention_out: torch.Tensor  # (n, d) the attention's update: the heads' outputs through W_o, plus b_o
    middle: torch.Tensor  # (n, d) the stream the MLP's update is added to: x + attention_out (normed, post-norm)
    mlp_out: torch.Tensor  # (n, d) the MLP's update
    position_key: torch.Tensor | None = None  # DeBERTa: the layer's Block.position_key, position_query (the model's own)
    position_query: torch.Tensor | None = None

    def to(self, device: torch.device, non_blocking: bool = False) -> Trace:
        return Trace(**{name: None if t is None else t.to(device, non_blocking=non_blocking) for name, t in vars(self).items()})

    def head(self, arch: Architecture, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(query, key, value) of query head `head`, (n, dh) each: its key and value are its group's."""
        kv = arch.kv_head(head)
        return self.query[head], self.key[kv], self.value[kv]

    @property
    def nbytes(self) -> int:
        """What the run holds: DeBERTa's position keys and queries are the model's, not counted."""
        own = [t for name, t in vars(self).items() if not name.startswith("position_")]
        return sum(t.numel() * t.element_size() for t in own)


class Intervention:
    """What a forward changes, said explicitly: the one seam in the engine's layer (in the manner of TransformerLens's
    hook points, without their generality). A subclass overrides either method; the base changes nothing.

    weights(layer, weights, positions): a layer's per-head weights (..., H, m, c + m), before they meet V; the queries
    sit at `positions` (m,). Returns the weights to use, or None to keep them.
    head_output(layer, output): the heads' outputs αV (..., H, m, dh), before W_o. Returns the outputs to use, or None.

    An intervention is a frozen dataclass, so it is hashable and compares by value: caches key runs by it."""

    def weights(self, layer: int, weights: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | None:
        return None

    def head_output(self, layer: int, output: torch.Tensor) -> torch.Tensor | None:
        return None

    def describe(self) -> str:
        return "no change"


@dataclass
class Forward:
    """What the forward computed over n pieces: hidden states (L + 1, n, d), the embeddings first; each layer's
    weights (L, H, n, n) float32; the traces; and for a decoder the last piece's next-piece logits (vocab,)."""

    hidden: np.ndarray
    weights: np.ndarray
    traces: list[Trace]
    next_logits: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    intervention: Intervention | None = None  # what the forward changed, None for the model as it is


# ---------------------------------------------------------------- the forward


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


def project(arch: Architecture, block: Block, x: torch.Tensor, positions: torch.Tensor, index: int):
    """Layer `index`'s queries (..., H, m, dh), keys and values (..., KV, m, dh) of inputs x (..., m, d) at `positions` (m,)."""
    query = _linear(x, block.w_query, block.b_query)  # (..., m, H·dh)
    key = _linear(x, block.w_key, block.b_key)  # (..., m, KV·dh)
    whole = block.query_norm is not None and block.query_norm.weight.shape[-1] != arch.head_dim
    if whole:  # OLMo 2 norms the whole query and key, every head at once
        query, key = block.query_norm(query), block.key_norm(key)  # (..., m, H·dh), (..., m, KV·dh)
    query, key = split_heads(query, arch.heads), split_heads(key, arch.kv_heads)  # (H, m, dh), (KV, m, dh)
    value = split_heads(_linear(x, block.w_value, block.b_value), arch.kv_heads)  # (KV, m, dh)
    if block.query_norm is not None and not whole:
        query, key = block.query_norm(query), block.key_norm(key)  # (H, m, dh), (KV, m, dh)
    base = arch.base(index)
    if base is not None:
        angles = turns(positions, arch.rotary_dims or query.shape[-1], base, query.dtype)  # (m, r // 2) each
        query, key = turned(arch, query, positions, angles, base), turned(arch, key, positions, angles, base)  # (H | KV, m, dh)
    return query, key, value


def attention_input(arch: Architecture, block: Block, x: torch.Tensor) -> torch.Tensor:
    """(..., m, d) what a layer's W_q, W_k and W_v read: its input x, after the norm where the family norms it first."""
    return x if arch.post_norm or block.attention_norm is None else block.attention_norm(x)


def turned(arch: Architecture, x: torch.Tensor, positions: torch.Tensor, angles, base: float) -> torch.Tensor:
    """Queries or keys x (..., m, dh) turned by position (RoPE) by `angles`, turns() of the positions by `base`; only
    the first rotary_dims of each where the family turns part of a head (GPT-NeoX, Phi-3), the rest as they are."""
    r = arch.rotary_dims or x.shape[-1]
    moved = rotate(x[..., :r], positions, base, arch.rope_pairs, angles)  # (..., m, r)
    return moved if r == x.shape[-1] else torch.cat([moved, x[..., r:]], -1)  # (..., m, dh)


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


def feed_forward(arch: Architecture, block: Block, h: torch.Tensor) -> torch.Tensor:
    """(..., m, d) the MLP's update of inputs h (..., m, d): one MLP, or the mixture of the experts the router picks."""
    if block.router is not None:
        return mixture(arch, block, h)
    return mlp(arch, h, block.w_gate, block.b_gate, block.w_up, block.b_up, block.w_down, block.b_down)


def mlp(arch: Architecture, h: torch.Tensor, w_gate, b_gate, w_up, b_up, w_down, b_down) -> torch.Tensor:
    act = ACTIVATIONS[arch.activation]
    up = _linear(h, w_up, b_up)  # (m, d_ff)
    if not arch.gated:
        return _linear(act(up), w_down, b_down)  # (m, d)
    gate = _linear(h, w_gate, b_gate)  # (m, d_ff)
    if arch.gate_limit is not None:  # gpt-oss's clamped SwiGLU
        gate, up = gate.clamp(max=arch.gate_limit), up.clamp(-arch.gate_limit, arch.gate_limit) + 1  # (m, d_ff) each
    return _linear(act(gate) * up, w_down, b_down)  # (m, d)


def mixture(arch: Architecture, block: Block, h: torch.Tensor) -> torch.Tensor:
    """A mixture of experts (Mixtral, Qwen3-MoE): each piece goes to the top_experts experts of the highest router
    probability, softmax(h W_router), and gets their outputs weighted by those probabilities (rescaled to sum to 1
    where the family does)."""
    flat = h.reshape(-1, h.shape[-1])  # (t, d)
    probs = torch.softmax(_linear(flat, block.router, block.router_bias).float(), -1)  # (t, E)
    share, chosen = probs.topk(arch.top_experts, -1)  # (t, k) each
    if arch.renormalise_experts:  # gpt-oss's softmax over the top logits is the same
        share = share / share.sum(-1, keepdim=True)  # (t, k)
    out = torch.zeros_like(flat)  # (t, d)

    def of(t: torch.Tensor | None, expert: int) -> torch.Tensor | None:
        return None if t is None else t[expert]

    for expert in chosen.unique().tolist():
        rows, slot = (chosen == expert).nonzero(as_tuple=True)  # (r,) each
        y = mlp(arch, flat[rows], of(block.w_gate, expert), of(block.b_gate, expert), block.w_up[expert],
                of(block.b_up, expert), block.w_down[expert], of(block.b_down, expert))  # (r, d)
        out.index_add_(0, rows, y * share[rows, slot, None].to(y.dtype))
    return out.view_as(h)


def layer(arch: Architecture, block: Block, index: int, x: torch.Tensor, positions: torch.Tensor,
          key: torch.Tensor | None = None, value: torch.Tensor | None = None, out: torch.Tensor | None = None,
          intervention: Intervention | None = None, real: torch.Tensor | None = None):
    """One layer over inputs x (..., m, d) at `positions`: (x after the layer, the attention's result, its Trace).
    `key` and `value` (..., KV, c, dh), when given, are the earlier pieces' cached keys and values, read before these.
    `out` (H, m, c + m), when given, is where the weights are computed (attend's out). `intervention`, when given,
    may replace the weights before they meet V and the heads' outputs before W_o (Intervention). Leading dimensions
    of x are a batch: copies of the same pieces, as the effects of many interventions are computed at once, or
    different texts padded to one length, `real` (B, m) marking their real pieces (no query reads a padding key)."""
    h = attention_input(arch, block, x)  # (..., m, d)
    query, new_key, new_value = project(arch, block, h, positions, index)  # (..., H, m, dh), (..., KV, m, dh) × 2
    key = new_key if key is None else torch.cat([key.expand(*new_key.shape[:-2], -1, -1), new_key], -2)  # (..., KV, c + m, dh)
    value = new_value if value is None else torch.cat([value.expand(*new_value.shape[:-2], -1, -1), new_value], -2)
    if out is not None and arch.causal and len(positions) > CAUSAL_BLOCK and key.shape[-2] == len(positions):
        a = causal_attend(arch, index, query, key, value, positions, out, block.sink)  # (H, m, m), in out
    else:
        mask = allowed_keys(arch, index, positions, key.shape[-2])  # (m, c + m) or None
        if real is not None:
            padding = real[:, None, None, :]  # (B, 1, 1, m) broadcast over heads and queries
            mask = padding if mask is None else mask & padding  # (B, 1, m, m)
        if block.sink is not None or relative(block):
            a = explicit_attend(arch, block, query, key, value, positions, mask, out)  # (..., H, m, c + m)
        else:
            a = grouped_attend(query, key, value, scoring=scorer(arch, positions), mask=mask, need_scores=False, out=out)  # (..., H, m, c + m)
    if intervention is not None:
        a = intervene(intervention, index, a, value, positions)
    y, attended, middle, mlp = rest_of_layer(arch, block, x, a.output)  # (..., m, d) each
    return y, a, Trace(h, query, key, value, a.output, attended, middle, mlp, block.position_key, block.position_query)


def rest_of_layer(arch: Architecture, block: Block, x: torch.Tensor, output: torch.Tensor):
    """The rest of a layer, from its heads' outputs αV (..., H, m, dh) and its input x (..., m, d): W_o, the residual,
    the norms where the family puts them, and the feed-forward. Returns (x after the layer, the attention's update,
    the stream the MLP's update is added to, the MLP's update), (..., m, d) each; an update is what joins the
    residual stream (after Gemma's and OLMo 2's norms of it)."""
    heads_out = output.transpose(-3, -2).flatten(-2)  # (..., m, H·dh)
    attended = normed(block.attention_out_norm, _linear(heads_out, block.w_out, block.b_out))  # (..., m, d)
    if arch.parallel:  # the MLP reads the layer's input, not the attention's sum
        middle = x + attended  # (..., m, d)
        update = feed_forward(arch, block, block.mlp_norm(x))  # (..., m, d)
        return middle + update, attended, middle, update
    if arch.post_norm:
        middle = block.attention_norm(x + attended)  # (..., m, d)
        update = feed_forward(arch, block, middle)  # (..., m, d)
        return block.mlp_norm(middle + update), attended, middle, update
    middle = x + attended  # (..., m, d)
    update = normed(block.mlp_out_norm, feed_forward(arch, block, normed(block.mlp_norm, middle)))  # (..., m, d)
    return middle + update, attended, middle, update


def normed(norm: Norm | None, x: torch.Tensor) -> torch.Tensor:
    return x if norm is None else norm(x)


def after_attention(arch: Architecture, block: Block, x: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """x after the layer (..., m, d), from its heads' outputs αV and its input x (rest_of_layer)."""
    return rest_of_layer(arch, block, x, output)[0]


def run_layers(arch: Architecture, weights: Weights, x: torch.Tensor | None, positions: torch.Tensor, *,
               start: int = 0, intervention: Intervention | None = None, before=None, last_row: int | None = None):
    """x (..., m, d), the input to layer `start`, through that layer and every one after it, one at a time: yields
    (index, x after the layer, its Trace), so a caller reads each layer as it comes, or stops early. `intervention`
    changes every layer; `before(index, x)`, where given, returns (x, intervention) for that layer instead (a batch
    that grows layer by layer: attnviz.effects' staircase). `last_row`: the last layer computes that query row only
    (its keys and values over the rows up to it), which is all a caller reads there; its x holds rows 0 … last_row,
    the earlier ones as they came. Only for a causal pre-norm model, where no later row changes it."""
    for i in range(start, arch.layers):
        if before is not None:
            x, intervention = before(i, x)
        block = weights.blocks[i]
        if i == arch.layers - 1 and last_row is not None and arch.causal and not arch.post_norm:
            h = attention_input(arch, block, x[..., : last_row + 1, :])  # (..., r + 1, d)
            _, key, value = project(arch, block, h, positions[: last_row + 1], i)  # (..., KV, r + 1, dh) × 2
            y, _, trace = layer(arch, block, i, x[..., last_row: last_row + 1, :], positions[last_row: last_row + 1],
                                key[..., :last_row, :] if last_row else None, value[..., :last_row, :] if last_row else None,
                                intervention=intervention)  # (..., 1, d)
            yield i, torch.cat([x[..., :last_row, :], y], -2), trace  # (..., r + 1, d)
            return
        x, _, trace = layer(arch, block, i, x, positions, intervention=intervention)  # (..., m, d)
        yield i, x, trace


def through(arch: Architecture, weights: Weights, x: torch.Tensor | None, positions: torch.Tensor, **how) -> torch.Tensor:
    """x after the last layer (run_layers, with its keyword arguments `how`)."""
    for _, x, _ in run_layers(arch, weights, x, positions, **how):
        pass
    return x


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


def forward(arch: Architecture, weights: Weights, ids: list[int], intervention: Intervention | None = None) -> Forward:
    """The whole model over `ids`, every layer's attention weights and traces kept; with `intervention`, as it changes
    the layers (the weights kept are those that met V)."""
    device = weights.embeddings.device
    cpu = torch.device("cpu")
    n = len(ids)
    attention = host_buffer((arch.layers, arch.heads, n, n), device)  # (L, H, n, n) filled layer by layer
    hidden = host_buffer((arch.layers + 1, n, arch.d_model), device)  # (L + 1, n, d)
    traces = []
    with torch.inference_mode():
        index = torch.tensor(ids, device=device)  # (n,)
        positions = torch.arange(n, device=device)  # (n,)
        x = embed(arch, weights, index, positions)  # (n, d)
        hidden[0].copy_(x, non_blocking=True)
        for i, block in enumerate(weights.blocks):
            on_device = attention[i] if device.type == "cpu" else None  # on a GPU: computed there, then copied
            x, a, trace = layer(arch, block, i, x, positions, out=on_device, intervention=intervention)
            if on_device is None or a.weights.data_ptr() != on_device.data_ptr():
                attention[i].copy_(a.weights, non_blocking=True)  # (H, n, n)
            traces.append(trace.to(cpu, non_blocking=True))
            hidden[i + 1].copy_(x, non_blocking=True)
        next_logits = logits(weights, x[-1:])[0].float().cpu().numpy() if arch.causal else None  # (vocab,)
        copied(device)
    return Forward(hidden.numpy(), attention.numpy(), traces, next_logits, intervention=intervention)


def host_buffer(shape: tuple[int, ...], device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An empty CPU tensor that results computed on `device` are copied into. For a GPU it is page-locked (pinned), so
    each layer's copy is queued behind its arithmetic and the CPU goes on to the next layer: a copy into ordinary
    memory stops the CPU until the GPU is done, layer after layer (bench/bench_gpu.py)."""
    return torch.empty(shape, dtype=dtype, pin_memory=device.type == "cuda")


def to_host(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`tensor` copied into a host_buffer without waiting (then `copied` before it is read); on the CPU, itself."""
    if tensor.device.type == "cpu":
        return tensor if dtype is None else tensor.to(dtype)
    host = host_buffer(tuple(tensor.shape), tensor.device, dtype or tensor.dtype)
    return host.copy_(tensor, non_blocking=True)


def copied(device: torch.device) -> None:
    """Wait until the copies queued on `device` (non_blocking, into host buffers) have landed."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def batch_weights(arch: Architecture, weights: Weights, batch: list[list[int]]) -> list[np.ndarray]:
    """Every layer's weights (L, H, n_b, n_b) float32 for each of several sequences, computed together in one forward:
    the sequences padded on the right to the longest, each key mask keeping a query off the padding. No hidden states,
    traces or logits are kept: this is the corpus pass of attnviz.heads. Each sequence's weights equal forward()'s."""
    device = weights.embeddings.device
    lengths = [len(ids) for ids in batch]
    n = max(lengths)
    fill = arch.padding_index if arch.padding_index is not None else 0
    padded = torch.full((len(batch), n), fill, dtype=torch.long)  # (B, n)
    for b, ids in enumerate(batch):
        padded[b, : len(ids)] = torch.tensor(ids)
    real = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(device)  # (B, n)
    attention = host_buffer((arch.layers, len(batch), arch.heads, n, n), device)  # (L, B, H, n, n)
    with torch.inference_mode():
        positions = torch.arange(n, device=device)  # (n,)
        x = embed(arch, weights, padded.to(device), positions)  # (B, n, d)
        for i, block in enumerate(weights.blocks):
            x, a, _ = layer(arch, block, i, x, positions, real=real)
            attention[i].copy_(a.weights, non_blocking=True)  # (B, H, n, n)
        copied(device)
    return [attention[:, b, :, :k, :k].numpy() for b, k in enumerate(lengths)]  # (L, H, k, k) each


def logits(weights: Weights, hidden: torch.Tensor) -> torch.Tensor:
    """(m, vocab) next-piece logits from hidden states (m, d): the final norm, then the output matrix."""
    with torch.inference_mode():
        return unembed(weights, hidden)  # (m, vocab)


def unembed(weights: Weights, hidden: torch.Tensor) -> torch.Tensor:
    """logits() where autograd may follow (a gradient with respect to the input is taken through it)."""
    h = weights.final_norm(hidden) if weights.final_norm is not None else hidden  # (..., m, d)
    z = h @ weights.unembed  # (..., m, vocab)
    if weights.unembed_bias is not None:
        z = z + weights.unembed_bias  # (..., m, vocab)
    return z if weights.logit_cap is None else torch.tanh(z / weights.logit_cap) * weights.logit_cap


def extend(arch: Architecture, weights: Weights, before: Forward, token: int) -> Forward:
    """`before` with one more piece at its end, computed from its K/V cache (each layer's keys and values so far):
    the new piece's row of weights over every key, every earlier row as it was (causal attention lets none change).
    Equals forward() on the longer ids while only the new row is computed; under `before`'s intervention, as that
    intervention changes the new row (one that needs every position at once, a mean over them, says so). One query
    row is small work: on the CPU it runs on one thread (attention.cpu_threads), as fast as two on an idle machine
    (100 ms for SmolLM2 at 64 pieces either way), and it leaves the other core to the browser or another session,
    where two threads waiting on each other took twice as long (bench_models.py --next-word)."""
    intervention = before.intervention
    device = weights.embeddings.device
    n = before.weights.shape[-1]
    with torch.inference_mode(), cpu_threads(1, device):
        position = torch.tensor([n], device=device)  # (1,)
        x = embed(arch, weights, torch.tensor([token], device=device), position)  # (1, d)
        hidden, rows, traces = [x.float().cpu()], [], []
        for i, (block, trace) in enumerate(zip(weights.blocks, before.traces)):
            x, a, new = layer(arch, block, i, x, position, trace.key.to(device), trace.value.to(device),
                              intervention=intervention)
            rows.append(a.weights.float().cpu())  # (H, 1, n + 1)
            traces.append(Trace(torch.cat([trace.x, new.x.cpu()]), torch.cat([trace.query, new.query.cpu()], 1),
                                new.key.cpu(), new.value.cpu(), torch.cat([trace.head_output, new.head_output.cpu()], 1),
                                *(torch.cat([old, fresh.cpu()]) for old, fresh in
                                  ((trace.attention_out, new.attention_out), (trace.middle, new.middle),
                                   (trace.mlp_out, new.mlp_out)))))
            hidden.append(x.float().cpu())
        next_logits = logits(weights, x)[0].float().cpu().numpy()  # (vocab,)
    old = np.pad(before.weights, ((0, 0), (0, 0), (0, 0), (0, 1)))  # (L, H, n, n + 1): no earlier row sees the new key
    grown = np.concatenate([old, torch.stack(rows).numpy()], 2)  # (L, H, n + 1, n + 1)
    return Forward(np.concatenate([before.hidden, torch.stack(hidden).numpy()], 1), grown, traces, next_logits,
                   intervention=intervention)


def layers_named(indices: list[int]) -> str:
    """Layers by the pages' count, from 1 ("Layer 2", "Layers 1, 3"), for what a person reads."""
    return f"Layer{'s' if len(indices) > 1 else ''} {', '.join(str(i + 1) for i in indices)}"


def notes(arch: Architecture, weights: Weights) -> list[str]:
    """One sentence for each mechanism that changes what a picture of the model's attention means, for the pages to
    say beside it (layers counted from 1, as the pages count them); none for a model without any."""
    said = []
    if arch.alibi:
        said.append("It adds no position to the stream: ALiBi lowers each score by m_h·(i − j), the distance back times "
                    "a slope of each head's own, so the scores shown include that bias and a head's weights fall off "
                    "with distance at its own rate.")
    if arch.relative_span:
        said.append("Its scores are disentangled: each is q_i·k_j plus q_i·P^k_δ (the query against a key made for the "
                    "distance δ = i − j) plus k_j·P^q_δ (the key against a query made for it), over √d_h, δ bucketed "
                    f"(log buckets past {arch.relative_buckets // 2 if arch.relative_buckets > 0 else arch.relative_span}"
                    " back). The scores shown are the sums; the neuron view shows the three terms.")
    if arch.sinks:
        said.append("Each head has a learned sink: a logit of its own in every row's softmax that reads no piece and "
                    "adds nothing, so a row's weights over the pieces sum to 1 minus the sink's share, and a head can "
                    "look nowhere. The heatmaps draw that share as a column of its own, ∅ sink.")
    if arch.score_cap:
        said.append(f"Its scores are soft-capped: each q·k/√d_k becomes {arch.score_cap:g}·tanh(s / {arch.score_cap:g}) "
                    f"before the softmax, so none passes ±{arch.score_cap:g}; the scores shown are the capped ones.")
    if weights.logit_cap:
        said.append(f"Its next-piece logits are capped the same way, at ±{weights.logit_cap:g}.")
    bases = [arch.base(i) for i in range(arch.layers)]
    if arch.positions == "rotary" and None in bases:
        flat = [i for i, b in enumerate(bases) if b is None]
        said.append(f"{layers_named(flat)} turn{'' if len(flat) > 1 else 's'} no position (no RoPE): there a head tells "
                    "pieces apart by what they hold, and order only through the causal mask.")
    turned = sorted({getattr(b, "base", b) for b in bases if b is not None})
    if len(turned) > 1:
        said.append("Its layers turn q and k by different RoPE bases (" + ", ".join(f"{b:g}" for b in turned)
                    + "): slow turns on its global layers, fast ones on its sliding-window layers.")
    stretched = {b for b in bases if isinstance(b, Rope) and b.kind != "default"}
    if stretched:
        said.append("Its RoPE is stretched to read past the length it was first trained on ("
                    + ", ".join(sorted(f"{b.kind}, ×{b.factor:g}" for b in stretched)) + "): its slow pairs turn slower "
                    "still, so the same distance turns q and k less than the bare base would."
                    + "".join(f" YaRN also multiplies every score by {b.attention ** 2:.4g}." for b in stretched
                              if b.attention != 1))
    windowed = [i for i, w in enumerate(arch.windows) if w]
    if windowed and len(windowed) < arch.layers:
        reach = max(arch.windows[i] for i in windowed)
        said.append(f"{layers_named(windowed)} read{'' if len(windowed) > 1 else 's'} only "
                    + (f"a sliding window of the last {reach:,} pieces; the others read every earlier piece."
                       if arch.causal else f"the pieces within {reach:,} either side; the others read every piece."))
    if any(b.attention_out_norm is not None for b in weights.blocks):
        said.append("Each attention update is normed before it joins the residual stream, so a head's share of a "
                    "layer's update is read through that norm, its scale frozen at the whole update's.")
    routers = [b.router for b in weights.blocks if b.router is not None]
    if routers:
        said.append(f"Its MLPs are mixtures of {routers[0].shape[1]} experts, {arch.top_experts} for each piece, "
                    "chosen by a router: the attention is unchanged by them, its input is not.")
    return said


def output_matrices(arch: Architecture, block: Block) -> torch.Tensor:
    """(H, dh, d) W_o split by head: what head h's αV is multiplied by to join the residual stream."""
    return block.w_out.view(arch.heads, arch.head_dim, -1)


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
