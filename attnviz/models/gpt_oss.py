"""gpt-oss into attnviz's layout.

A Llama-like decoder (RMSNorm before the attention and the MLP, RoPE turning the halves of q and k, grouped-query
attention, biases on W_q, W_k, W_v and W_o) with three mechanisms of its own:
- each head's learned sink: a logit s_h in every row's softmax that reads no piece, so a row's weights over the
  pieces sum to 1 − the sink's share (the engine's LayerWeights.sink);
- sliding windows on every other layer (layer_types), and YaRN's stretched RoPE (attnviz.positions.Rope);
- a mixture of experts whose router has a bias, each expert a clamped SwiGLU with biases: gate = min(g, limit),
  up = clamp(u, ±limit) + 1, gate·σ(1.702·gate)·up (the engine's gate_limit and quick_gelu).
The traps, handled in `build`: the experts' weights are stored (E, in, out) already, and gate_up_proj interleaves
W_gate's and W_up's columns (gate = [..., ::2], up = [..., 1::2]). OpenAI's checkpoints store the experts in MXFP4;
those go to transformers.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Weights
from attnviz.models import files
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.llama import Reader, number, rope_base
from attnviz.models.mapping import Built, Unsupported

MODEL_TYPES = ("gpt_oss",)
PREFIXES = ("model.", "")


def layer_types(config: dict, layers: int) -> list[str]:
    """Each layer's kind: layer_types as given, else sliding on the even layers (from 0), full on the odd."""
    return files.layer_types(config, layers, lambda i: (i + 1) % 2)


def architecture(config: dict) -> Architecture:
    if config.get("quantization_config"):
        raise Unsupported(f"experts stored quantized ({config['quantization_config'].get('quant_method', '?')})")
    if number(config, "swiglu_alpha", 1.702) != 1.702:
        raise Unsupported(f"a swiglu_alpha of {config['swiglu_alpha']!r} (the engine's gate is x·σ(1.702x))")
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    layers = setting(config, "num_hidden_layers")
    kv_heads, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads, "num_key_value_heads",
                                    setting(config, "num_key_value_heads", heads), setting(config, "head_dim", d // heads))
    window = setting(config, "sliding_window") if config.get("sliding_window") else None
    return Architecture(
        family="gpt_oss", kind="decoder", layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, d_model=d,
        vocab=setting(config, "vocab_size"), max_positions=setting(config, "max_position_embeddings", 131072),
        norm="rms", post_norm=False, positions="rotary", activation="quick_gelu", gated=True,
        rope_base=rope_base({"rope_theta": 150000.0, **config}), rope_pairs="halves",
        windows=tuple(window if t == "sliding_attention" else None for t in layer_types(config, layers)),
        top_experts=setting(config, "num_experts_per_tok", 4), renormalise_experts=True,
        gate_limit=number(config, "swiglu_limit", 7.0), sinks=True,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, dh, heads, kv = arch.d_model, arch.head_dim, arch.heads, arch.kv_heads
    read = Reader(tensors, config.get("rms_norm_eps", 1e-5))
    count, ff = setting(config, "num_local_experts"), setting(config, "intermediate_size")
    bias = config.get("attention_bias", True)
    layers = []
    for i in range(arch.layers):
        p, e = f"layers.{i}.", f"layers.{i}.mlp.experts."
        gate_up = tensors.get(e + "gate_up_proj", (count, d, 2 * ff))  # (E, d, 2·ff), gate and up interleaved
        gate_up_bias = tensors.get(e + "gate_up_proj_bias", (count, 2 * ff))  # (E, 2·ff)
        layers.append(LayerWeights(
            *read.linear(p + "self_attn.q_proj", d, heads * dh, bias), *read.linear(p + "self_attn.k_proj", d, kv * dh, bias),
            *read.linear(p + "self_attn.v_proj", d, kv * dh, bias), *read.linear(p + "self_attn.o_proj", heads * dh, d, bias),
            read.norm(p + "input_layernorm", d), read.norm(p + "post_attention_layernorm", d),
            gate_up[..., 1::2].contiguous(), gate_up_bias[..., 1::2].contiguous(),  # W_up (E, d, ff), b_up (E, ff)
            tensors.get(e + "down_proj", (count, ff, d)), tensors.get(e + "down_proj_bias", (count, d)),
            gate_up[..., ::2].contiguous(), gate_up_bias[..., ::2].contiguous(),  # W_gate, b_gate
            router=tensors.get(p + "mlp.router.weight", (count, d)).T.contiguous(),  # (d, E)
            router_bias=tensors.get(p + "mlp.router.bias", (count,)),
            sink=tensors.get(p + "self_attn.sinks", (heads,))))
    embeddings = tensors.get("embed_tokens.weight", (arch.vocab, d))
    tied = config.get("tie_word_embeddings", False) and not tensors.has("lm_head.weight")
    head = embeddings if tied else tensors.get("lm_head.weight", (arch.vocab, d))
    return Built(arch, Weights(embeddings=embeddings, layers=layers, final_norm=read.norm("norm", d), unembed=head.T))
