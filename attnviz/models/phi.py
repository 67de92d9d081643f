"""Phi (Phi-1, Phi-1.5, Phi-2) and StableLM into attnviz's layout: Llama-like decoders with LayerNorm and part of each
head turned by position.

Phi: a parallel layer with one norm, x + attn(norm(x)) + mlp(norm(x)); W_o is `dense`; a GELU MLP (fc1, fc2); biases
everywhere, the output matrix's included. StableLM: a SwiGLU MLP (gate, up, down), q/k/v biases where use_qkv_bias, and
a parallel layer with one norm where use_parallel_residual, else Llama's two. Both turn the first
partial_rotary_factor of each head's dimensions. With qk_layernorm, each head's query and key are LayerNormed before
the turn: by one norm over dh that every head shares in Phi (with a bias), by each head's own in StableLM (without).
"""

from __future__ import annotations

import torch

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.llama import rope_base, rotary_dims
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("phi", "stablelm")
PREFIXES = ("model.", "")


def architecture(config: dict) -> Architecture:
    kind = config["model_type"]
    activation = checked_activation(config.get("hidden_act", "gelu_new" if kind == "phi" else "silu"))
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    kv = setting(config, "num_key_value_heads", heads)
    kv_heads, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads, "num_key_value_heads", kv)
    rope = config.get("rope_parameters") or {}
    share = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 0.5 if kind == "phi" else 0.25))
    return Architecture(
        family="phi", kind="decoder", layers=setting(config, "num_hidden_layers"), heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 2048), norm="layer", post_norm=False,
        positions="rotary", activation=activation, gated=kind == "stablelm", rope_base=rope_base(config),
        rope_pairs="halves", rotary_dims=rotary_dims({"partial_rotary_factor": share}, head_dim),
        parallel=kind == "phi" or bool(config.get("use_parallel_residual", False)),
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    phi = config["model_type"] == "phi"
    d, dh, ff, eps = arch.d_model, arch.head_dim, setting(config, "intermediate_size"), config.get("layer_norm_eps", 1e-5)
    qkv_bias = phi or config.get("use_qkv_bias", False)

    def linear(name: str, n_in: int, n_out: int, bias: bool):
        weight = tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # (in, out)
        return weight, tensors.get(f"{name}.bias", (n_out,)) if bias else None

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    def head_norm(name: str, count: int) -> Norm | None:
        """qk_layernorm: Phi's one LayerNorm over each head's dh, with a bias; StableLM's one per head, without."""
        if not config.get("qk_layernorm"):
            return None
        if phi:
            return Norm("layer", tensors.get(f"{name}.weight", (dh,)), tensors.get(f"{name}.bias", (dh,)), eps)
        weight = torch.stack([tensors.get(f"{name}.norms.{h}.weight", (dh,)) for h in range(count)])  # (count, dh)
        return Norm("layer", weight, None, eps)

    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        w_q, b_q = linear(p + "self_attn.q_proj", d, arch.heads * dh, qkv_bias)
        w_k, b_k = linear(p + "self_attn.k_proj", d, arch.kv_heads * dh, qkv_bias)
        w_v, b_v = linear(p + "self_attn.v_proj", d, arch.kv_heads * dh, qkv_bias)
        w_o, b_o = linear(p + ("self_attn.dense" if phi else "self_attn.o_proj"), arch.heads * dh, d, phi)
        w_gate = None
        if phi:
            w_up, b_up = linear(p + "mlp.fc1", d, ff, True)
            w_down, b_down = linear(p + "mlp.fc2", ff, d, True)
        else:
            w_gate, _ = linear(p + "mlp.gate_proj", d, ff, False)
            w_up, b_up = linear(p + "mlp.up_proj", d, ff, False)
            w_down, b_down = linear(p + "mlp.down_proj", ff, d, False)
        first = norm(p + "input_layernorm")
        second = first if arch.parallel else norm(p + "post_attention_layernorm")  # a parallel layer norms once
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, first, second, w_up, b_up, w_down, b_down, w_gate,
                            query_norm=head_norm(p + "self_attn.q_layernorm", arch.heads),
                            key_norm=head_norm(p + "self_attn.k_layernorm", arch.kv_heads)))
    embeddings = tensors.get("embed_tokens.weight", (arch.vocab, d))
    tied = config.get("tie_word_embeddings", False) and not tensors.has("lm_head.weight")
    head = embeddings if tied else tensors.get("lm_head.weight", (arch.vocab, d))
    bias = tensors.optional("lm_head.bias", (arch.vocab,))
    return Built(arch, Weights(embeddings=embeddings, layers=layers, unembed=head.T, unembed_bias=bias,
                               final_norm=norm("final_layernorm" if phi else "norm")))
