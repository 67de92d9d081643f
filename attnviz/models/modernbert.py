"""ModernBERT into attnviz's layout: an encoder with today's decoder parts.

Pre-norm layers with LayerNorm (no bias by default), none before the first layer's attention; rotary positions, by one
base on its global layers and another on its local ones; local layers in which a piece reads only the pieces within
local_attention / 2 either side (every global_attn_every_n_layers-th layer, from the first, reads all); a GeGLU
feed-forward whose Wi holds [W_input; W_gate] (the GELU on the first half); a LayerNorm on the embeddings and a final
one on the output. Wqkv holds W_q, W_k and W_v side by side.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models import files
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.llama import bases_by_type
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("modernbert",)
PREFIXES = ("model.", "")


def layer_types(config: dict, layers: int) -> list[str]:
    """Each layer's kind: layer_types as given, else global every global_attn_every_n_layers-th layer from 0, local
    (a window either side) the others."""
    every = config.get("global_attn_every_n_layers", 3)
    return files.layer_types(config, layers, lambda i: i % every)


def architecture(config: dict) -> Architecture:
    activation = checked_activation(config.get("hidden_activation", "gelu"))
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    layers = setting(config, "num_hidden_layers")
    _, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads)
    types = layer_types(config, layers)
    half = setting(config, "local_attention", 128) // 2  # a local layer's reach either side
    base, per_layer = bases_by_type(config, types, ("global_rope_theta", 160000.0), ("local_rope_theta", 10000.0))
    return Architecture(
        family="modernbert", kind="encoder", layers=layers, heads=heads, kv_heads=heads, head_dim=head_dim, d_model=d,
        vocab=setting(config, "vocab_size"), max_positions=setting(config, "max_position_embeddings", 8192),
        norm="layer", post_norm=False, positions="rotary", activation=activation, gated=True, rope_base=base,
        rope_pairs="halves", rope_bases=per_layer,
        windows=tuple(half if t == "sliding_attention" else None for t in types),
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, ff, eps = arch.d_model, setting(config, "intermediate_size"), config.get("norm_eps", 1e-5)
    norm_bias, attention_bias, mlp_bias = (config.get(k, False) for k in ("norm_bias", "attention_bias", "mlp_bias"))

    def linear(name: str, n_in: int, n_out: int, bias: bool):
        weight = tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # (in, out)
        return weight, tensors.get(f"{name}.bias", (n_out,)) if bias else None

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)) if norm_bias else None, eps)

    def halves(w, b, size: int):
        first, second = w.split(size, 1)
        return (first.contiguous(), second.contiguous()), (b.split(size) if b is not None else (None, None))

    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        qkv, b_qkv = linear(p + "attn.Wqkv", d, 3 * d, attention_bias)  # (d, 3d): W_q, W_k, W_v side by side
        (w_q, w_k, w_v), (b_q, b_k, b_v) = (tuple(w.contiguous() for w in qkv.split(d, 1)),
                                            b_qkv.split(d) if b_qkv is not None else (None, None, None))
        w_o, b_o = linear(p + "attn.Wo", d, d, attention_bias)
        wi, b_wi = linear(p + "mlp.Wi", d, 2 * ff, mlp_bias)  # (d, 2·d_ff): [input; gate], the GELU on the input
        (w_gate, w_up), (b_gate, b_up) = halves(wi, b_wi, ff)
        w_down, b_down = linear(p + "mlp.Wo", ff, d, mlp_bias)
        first = norm(p + "attn_norm") if i > 0 else None  # the embeddings' norm serves the first layer
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, first, norm(p + "mlp_norm"), w_up, b_up, w_down,
                            b_down, w_gate, b_gate))
    return Built(arch, Weights(embeddings=tensors.get("embeddings.tok_embeddings.weight", (arch.vocab, d)),
                               embedding_norm=norm("embeddings.norm"), layers=layers, final_norm=norm("final_norm")))
