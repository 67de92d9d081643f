"""BLOOM into attnviz's layout.

Pre-norm layers with LayerNorm, a LayerNorm on the embeddings, GELU (tanh), biases everywhere, the output matrix tied
to the embeddings, and no positions in the stream at all: ALiBi adds −m_h·(i − j) to each score instead, a penalty
that grows with the distance back, at a slope m_h of each head's own (the engine's `shaped`). The trap, handled in
`build`: query_key_value holds each head's [q, k, v] rows together, as GPT-NeoX's does.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported

MODEL_TYPES = ("bloom",)
PREFIXES = ("transformer.", "")


def architecture(config: dict) -> Architecture:
    if config.get("apply_residual_connection_post_layernorm"):
        raise Unsupported("a residual taken after the norm (apply_residual_connection_post_layernorm)")
    d = setting(config, "hidden_size" if "hidden_size" in config else "n_embed")
    heads = setting(config, "n_head")
    _, head_dim = head_shape("hidden_size", d, "n_head", heads)
    return Architecture(
        family="bloom", kind="decoder", layers=setting(config, "n_layer"), heads=heads, kv_heads=heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "seq_length", 2048), norm="layer", post_norm=False, positions="alibi",
        activation="gelu_new", gated=False, alibi=True,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, dh, heads, eps = arch.d_model, arch.head_dim, arch.heads, config.get("layer_norm_epsilon", 1e-5)

    def linear(name: str, n_in: int, n_out: int):
        return tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous(), tensors.get(f"{name}.bias", (n_out,))

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    layers = []
    for i in range(arch.layers):
        p = f"h.{i}."
        w_qkv, b_qkv = linear(p + "self_attention.query_key_value", d, 3 * d)  # (d, 3d), (3d,)
        by_head, bias_by_head = w_qkv.view(d, heads, 3, dh), b_qkv.view(heads, 3, dh)  # (d, H, [q k v], dh), (H, 3, dh)
        w_q, w_k, w_v = (by_head[:, :, part].reshape(d, d).contiguous() for part in range(3))  # (d, H·dh) each
        b_q, b_k, b_v = (bias_by_head[:, part].reshape(d).contiguous() for part in range(3))  # (H·dh,) each
        w_o, b_o = linear(p + "self_attention.dense", d, d)
        w_up, b_up = linear(p + "mlp.dense_h_to_4h", d, 4 * d)
        w_down, b_down = linear(p + "mlp.dense_4h_to_h", 4 * d, d)
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm(p + "input_layernorm"),
                            norm(p + "post_attention_layernorm"), w_up, b_up, w_down, b_down))
    embeddings = tensors.get("word_embeddings.weight", (arch.vocab, d))
    head = tensors.optional("lm_head.weight", (arch.vocab, d))
    return Built(arch, Weights(embeddings=embeddings, layers=layers, embedding_norm=norm("word_embeddings_layernorm"),
                               final_norm=norm("ln_f"), unembed=(head if head is not None else embeddings).T))
