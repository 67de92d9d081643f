"""GPT-NeoX (Pythia) into attnviz's layout.

Pre-norm layers with LayerNorm, and by default a parallel residual: attention and MLP both read the layer's input,
x + attn(norm₁(x)) + mlp(norm₂(x)) (use_parallel_residual); rotary positions on the first part of each head only
(partial_rotary_factor, pairs (i, i + r/2) as transformers turns them); GELU; biases everywhere; a final LayerNorm and an
output matrix of its own. The trap, handled in `build`: query_key_value holds W_q, W_k and W_v interleaved by head,
each head's [q, k, v] rows together, where GPT-2's c_attn holds them side by side.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.llama import rope_base, rotary_dims
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("gpt_neox",)
PREFIXES = ("gpt_neox.", "")


def architecture(config: dict) -> Architecture:
    activation = checked_activation(config.get("hidden_act", "gelu"))
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    _, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads)
    base = rope_base({**config, "rope_theta": config.get("rotary_emb_base", config.get("rope_theta", 10000.0))})
    return Architecture(
        family="gpt_neox", kind="decoder", layers=setting(config, "num_hidden_layers"), heads=heads, kv_heads=heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 2048), norm="layer", post_norm=False,
        positions="rotary", activation=activation, gated=False, rope_base=base, rope_pairs="halves",
        rotary_dims=rotary_dims(config, head_dim), parallel=bool(config.get("use_parallel_residual", True)),
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, dh, heads = arch.d_model, arch.head_dim, arch.heads
    ff, eps = setting(config, "intermediate_size"), config.get("layer_norm_eps", 1e-5)
    bias = config.get("attention_bias", True)

    def linear(name: str, n_in: int, n_out: int, with_bias: bool = True):
        weight = tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # (in, out)
        return weight, tensors.get(f"{name}.bias", (n_out,)) if with_bias else None

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        w_qkv, b_qkv = linear(p + "attention.query_key_value", d, 3 * d, bias)  # (d, 3d), (3d,)
        by_head = w_qkv.view(d, heads, 3, dh)  # (d, H, [q k v], dh)
        w_q, w_k, w_v = (by_head[:, :, part].reshape(d, d).contiguous() for part in range(3))  # (d, H·dh) each
        b_q = b_k = b_v = None
        if b_qkv is not None:
            b_q, b_k, b_v = (b_qkv.view(heads, 3, dh)[:, part].reshape(d).contiguous() for part in range(3))  # (H·dh,)
        w_o, b_o = linear(p + "attention.dense", d, d, bias)
        w_up, b_up = linear(p + "mlp.dense_h_to_4h", d, ff)
        w_down, b_down = linear(p + "mlp.dense_4h_to_h", ff, d)
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm(p + "input_layernorm"),
                            norm(p + "post_attention_layernorm"), w_up, b_up, w_down, b_down))
    embeddings = tensors.get("embed_in.weight", (arch.vocab, d))
    head = tensors.optional("embed_out.weight", (arch.vocab, d))
    head = head if head is not None else tensors.get("lm_head.weight", (arch.vocab, d))
    return Built(arch, Weights(embeddings=embeddings, layers=layers, final_norm=norm("final_layer_norm"),
                               unembed=head.T))
