"""Gemma, Gemma 2 and Gemma 3 (text) into attnviz's layout.

Llama's layout with Gemma's changes: every RMSNorm scales by (1 + w), folded into the norm's weight at load; the
embeddings are multiplied by √d; the feed-forward is GeGLU (a tanh GELU gate); the output matrix is the embeddings.
Gemma 2 norms each update before the residual as well as each input (post_attention_layernorm, then
pre_feedforward_layernorm and post_feedforward_layernorm), soft-caps every score, cap·tanh(s / cap), and the logits
likewise, and alternates sliding-window layers with global ones. Gemma 3 keeps the four norms, drops the caps, norms each
head's query and key, and turns its local (sliding) layers by one RoPE base and its global layers by another.
Gemma 2 and 3 scale scores by query_pre_attn_scalar^(-1/2) where Llama uses head_dim^(-1/2): where they differ, the
ratio is folded into W_q (Gemma 2) or the query norm's weight (Gemma 3), so the engine's q·k/√dh is their score.
Gemma 3 with its vision tower (gemma3, as Gemma 3 4B and larger ship) is read as its text model: text_config, and the
weights under its language model's prefix; the tower is left unread.
"""

from __future__ import annotations

import math

from attnviz.models.engine import Architecture, LayerWeights, Weights
from attnviz.models import files
from attnviz.models.errors import ModelError
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.llama import Reader, bases_by_type, number, rope_base, scaled
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("gemma", "gemma2", "gemma3_text", "gemma3")
# Gemma 3 with its vision tower (gemma3): its text model's weights under model.language_model. (transformers 5) or
# language_model.model. (earlier saves); the text alone under model.
PREFIXES = ("model.language_model.", "language_model.model.", "model.", "")
PATTERN = {"gemma2": 2, "gemma3_text": 6}  # one global layer in every PATTERN, the last, where layer_types is not given


def text_model(config: dict) -> dict:
    """The text model's settings: Gemma 3 with its vision tower (gemma3) holds them in text_config, which the engine
    reads as a gemma3_text (its images are not read: attnviz reads text); the others' own."""
    if config["model_type"] != "gemma3":
        return config
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ModelError("config.json's gemma3 model has no text_config.")
    tied = {"tie_word_embeddings": config["tie_word_embeddings"]} if "tie_word_embeddings" in config else {}
    return {**text, **tied, "model_type": "gemma3_text"}


def layer_types(config: dict, layers: int) -> list[str]:
    """Each layer's "sliding_attention" or "full_attention": layer_types, else Gemma's pattern (sliding_window_pattern)."""
    every = config.get("sliding_window_pattern", PATTERN.get(config["model_type"], 0))
    return files.layer_types(config, layers, lambda i: every and (i + 1) % every)


def bases(config: dict, types: list[str]) -> tuple[float, tuple[float, ...]]:
    """(the global layers' RoPE base, each layer's): Gemma 3's by layer type (bases_by_type: rope_theta and
    rope_local_base_freq in older configs); one base for Gemma and Gemma 2."""
    if config["model_type"] != "gemma3_text":
        return rope_base(config), ()
    return bases_by_type(config, types, ("rope_theta", 1e6), ("rope_local_base_freq", 10000.0))


def architecture(config: dict) -> Architecture:
    config = text_model(config)
    kind = config["model_type"]
    activation = checked_activation(config.get("hidden_act" if kind == "gemma" else "hidden_activation") or "gelu_pytorch_tanh")
    if config.get("use_bidirectional_attention"):
        raise Unsupported("a Gemma that reads both ways (use_bidirectional_attention)")
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    layers = setting(config, "num_hidden_layers")
    kv = setting(config, "num_key_value_heads", heads)
    kv_heads, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads, "num_key_value_heads", kv,
                                    setting(config, "head_dim", d // heads))
    types = layer_types(config, layers)
    window = setting(config, "sliding_window") if config.get("sliding_window") and kind != "gemma" else None
    base, per_layer = bases(config, types)
    cap = config.get("attn_logit_softcapping") if kind == "gemma2" else None
    return Architecture(
        family="gemma", kind="decoder", layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, d_model=d,
        vocab=setting(config, "vocab_size"), max_positions=setting(config, "max_position_embeddings", 8192),
        norm="rms", post_norm=False, positions="rotary", activation=activation, gated=True, rope_base=base,
        rope_pairs="halves", windows=tuple(window if t == "sliding_attention" else None for t in types),
        rope_bases=per_layer, embed_scale=math.sqrt(d),
        score_cap=number(config, "attn_logit_softcapping", 50.0) if cap is not None else None,
    )


def build(config: dict, tensors: Tensors) -> Built:
    config = text_model(config)
    arch = architecture(config)
    kind = config["model_type"]
    d, dh, ff = arch.d_model, arch.head_dim, setting(config, "intermediate_size")
    read = Reader(tensors, config.get("rms_norm_eps", 1e-6), norm_offset=1.0)
    bias = config.get("attention_bias", False)
    sandwich, head_norms = kind != "gemma", kind == "gemma3_text"
    # the engine divides q·k by √dh; Gemma 2 and 3 by √query_pre_attn_scalar
    ratio = 1.0 if kind == "gemma" else math.sqrt(dh / number(config, "query_pre_attn_scalar", dh))
    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        w_q, b_q = read.linear(p + "self_attn.q_proj", d, arch.heads * dh, bias)
        query_norm = read.norm(p + "self_attn.q_norm", dh) if head_norms else None
        if query_norm is not None and ratio != 1.0:
            query_norm.weight = query_norm.weight * ratio  # (dh,)
        elif query_norm is None:
            w_q, b_q = scaled(w_q, b_q, ratio)
        w_k, b_k = read.linear(p + "self_attn.k_proj", d, arch.kv_heads * dh, bias)
        w_v, b_v = read.linear(p + "self_attn.v_proj", d, arch.kv_heads * dh, bias)
        w_o, b_o = read.linear(p + "self_attn.o_proj", arch.heads * dh, d, bias)
        w_gate, _ = read.linear(p + "mlp.gate_proj", d, ff, False)
        w_up, _ = read.linear(p + "mlp.up_proj", d, ff, False)
        w_down, _ = read.linear(p + "mlp.down_proj", ff, d, False)
        if sandwich:  # a norm before and after each of the attention and the MLP
            norms = dict(attention_norm=read.norm(p + "input_layernorm", d),
                         attention_out_norm=read.norm(p + "post_attention_layernorm", d),
                         mlp_norm=read.norm(p + "pre_feedforward_layernorm", d),
                         mlp_out_norm=read.norm(p + "post_feedforward_layernorm", d))
        else:
            norms = dict(attention_norm=read.norm(p + "input_layernorm", d),
                         mlp_norm=read.norm(p + "post_attention_layernorm", d))
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, w_up=w_up, b_up=None, w_down=w_down, b_down=None,
                            w_gate=w_gate, query_norm=query_norm,
                            key_norm=read.norm(p + "self_attn.k_norm", dh) if head_norms else None, **norms))
    embeddings = tensors.get("embed_tokens.weight", (arch.vocab, d))
    head = next((tensors.get(name, (arch.vocab, d)) for name in ("lm_head.weight", "language_model.lm_head.weight")
                 if tensors.has(name)), embeddings)
    cap = config.get("final_logit_softcapping") if kind == "gemma2" else None
    return Built(arch, Weights(embeddings=embeddings, layers=layers, final_norm=read.norm("norm", d), unembed=head.T,
                               logit_cap=number(config, "final_logit_softcapping", 30.0) if cap is not None else None))
