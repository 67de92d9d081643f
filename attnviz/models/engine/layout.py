"""The engine's layout: what every family's weights are mapped into (Architecture, Norm, LayerWeights, Weights) and what a
run keeps (Trace, Forward), with the one seam where a run is changed (Intervention)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from attnviz._deprecated import warn
from attnviz.positions import Rope


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
    sinks: bool = False  # gpt-oss: each head has a learned sink (LayerWeights.sink), so its weights sum to less than 1
    relative_span: int = 0  # DeBERTa: k, its relative distances bucketed into 2k rows (LayerWeights.position_key, position_query)
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

    def frozen(self, whole: torch.Tensor) -> "FrozenNorm":
        """This norm as a linear map, its scale frozen at the streams `whole` (..., d) (one a row), in float64: applied
        to each part of a stream that sums to `whole`, the parts' images and the constant sum to the norm of `whole`.
        What "Why here?", direct logit attribution and the routes read a sum through."""
        whole = whole.double().cpu()  # (..., d)
        weight = self.weight.double().cpu()  # (d,)
        spread = whole.pow(2).mean(-1, keepdim=True) if self.kind == "rms" else whole.var(-1, unbiased=False, keepdim=True)
        bias = self.bias.double().cpu() if self.bias is not None and self.kind == "layer" else torch.zeros_like(weight)
        return FrozenNorm(weight * torch.rsqrt(spread + self.eps), self.kind == "layer", bias.expand_as(whole))


@dataclass(frozen=True)
class FrozenNorm:
    """A norm with its scale frozen (Norm.frozen): part ↦ (part − its mean, for LayerNorm) · scale, and the constant
    (LayerNorm's bias) added once to the sum. The identity where a model has no norm there (FrozenNorm.identity)."""

    scale: torch.Tensor  # (..., d) the weight over each stream's rms (RMSNorm) or σ (LayerNorm)
    centred: bool  # LayerNorm: each part's mean is taken off
    constant: torch.Tensor  # (..., d)

    def __call__(self, part: torch.Tensor) -> torch.Tensor:
        return ((part - part.mean(-1, keepdim=True)) if self.centred else part) * self.scale  # (..., d)

    @staticmethod
    def identity(whole: torch.Tensor) -> "FrozenNorm":
        zero = torch.zeros_like(whole.double().cpu())  # (..., d)
        return FrozenNorm(torch.ones_like(zero), False, zero)


@dataclass
class LayerWeights:
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
    layers: list[LayerWeights]
    positions: torch.Tensor | None = None  # (max_positions, d), learned positions
    token_type: torch.Tensor | None = None  # (d,)
    embedding_norm: Norm | None = None  # BERT's LayerNorm of the embeddings
    embedding_project: tuple[torch.Tensor, torch.Tensor | None] | None = None  # ELECTRA: (E, d), (d,) after the norm
    final_norm: Norm | None = None  # pre-norm models' norm after the last layer
    unembed: torch.Tensor | None = None  # (d, vocab) the output matrix of a decoder (a view of embeddingsᵀ when tied)
    logit_cap: float | None = None  # Gemma 2: each next-piece logit z becomes cap·tanh(z / cap)
    unembed_bias: torch.Tensor | None = None  # (vocab,) Phi's output bias

    @property
    def blocks(self) -> list[LayerWeights]:
        warn("Weights.blocks", "Weights.layers")
        return self.layers

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor held, each once (a tied output matrix shares the embeddings' memory)."""
        found = [self.embeddings, self.positions, self.token_type, self.unembed]
        for norm in (self.embedding_norm, self.final_norm):
            if norm is not None:
                found += [norm.weight, norm.bias]
        found += list(self.embedding_project or ()) + [self.unembed_bias]
        for params in self.layers:
            for value in vars(params).values():
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
    position_key: torch.Tensor | None = None  # DeBERTa: the layer's LayerWeights.position_key, position_query (the model's own)
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


def output_matrices(arch: Architecture, params: LayerWeights) -> torch.Tensor:
    """(H, dh, d) W_o split by head: what head h's αV is multiplied by to join the residual stream."""
    return params.w_out.view(arch.heads, arch.head_dim, -1)
