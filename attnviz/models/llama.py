"""Llama-like decoders (Llama, Mistral, Qwen2, Qwen3, Phi-3, SmolLM, SmolLM3, OLMo 2, Granite, Mixtral, Qwen3-MoE)
into attnviz's layout.

Pre-norm layers with RMSNorm, rotary positions on q and k, grouped-query attention (each key/value head read by
heads / kv_heads query heads), a SwiGLU feed-forward, a final RMSNorm and an output matrix (tied to the embeddings
when tie_word_embeddings). Qwen2 adds biases to q, k and v; Llama may add them everywhere (attention_bias, mlp_bias);
Mistral and some Qwen2 and Qwen3 layers read a sliding window of the last pieces. Qwen3 norms each head's query
and key (RMSNorm over its dh, its own weights) before turning them by position. Phi-3 stores W_q, W_k and W_v as one
qkv_proj and W_gate, W_up as one gate_up_proj, each split here, and may turn only part of each head. SmolLM3 turns
no position on every fourth layer (no_rope_layers). OLMo 2 has no norm before its attention or MLP: it norms their
updates instead, and norms the whole query and key. Granite scales the embeddings, the scores (attention_multiplier
in place of 1/√dh), each update and the logits; all but the first are folded into W_q, W_o, W_down and the final
norm here. Mixtral and Qwen3-MoE send each piece to its top experts (the engine's mixture).
The traps, handled here: nn.Linear's (out, in) weights are transposed to ours; transformers turns the pairs (i, i + d/2)
of q and k (rope_pairs="halves"), where a GGUF file's permuted weights turn (2i, 2i+1) (attnviz.models.gguf).
"""

from __future__ import annotations

import math

import torch

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models import files
from attnviz.models.errors import ModelError
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation
from attnviz.positions import SCALINGS, Rope

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "olmo2", "granite", "mixtral", "qwen3_moe")
WINDOWED_LAYERS = ("qwen2", "qwen3", "qwen3_moe", "smollm3")  # a window on the layers layer_types names only
PREFIXES = ("model.", "")


def rope_base(config: dict) -> float | Rope:
    """θ's base: rope_parameters (transformers 5) or rope_theta; a Rope where it is stretched (linear, Llama 3's,
    YaRN); a RoPE that changes with the text's length (dynamic, longrope) is Unsupported."""
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    base = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    if kind == "default":
        return base
    if kind not in SCALINGS:
        raise Unsupported(f"RoPE of type {kind!r}")
    given = {key: value for key, value in rope.items() if value is not None}
    trained = config.get("original_max_position_embeddings") or given.get("original_max_position_embeddings") \
        or config.get("max_position_embeddings", 2048)  # a top-level setting first, as transformers reads Phi-3's
    given = {"factor": config.get("max_position_embeddings", trained) / trained, "beta_slow": 1.0, "beta_fast": 32.0,
             **given, "original_max_position_embeddings": trained}
    factor, trained = number(given, "factor", 1.0), int(number(given, "original_max_position_embeddings", 1))
    if kind == "llama3":
        return Rope(base, kind, factor, trained, number(given, "low_freq_factor", 1.0),
                    number(given, "high_freq_factor", 4.0))
    if kind == "yarn":
        return Rope(base, kind, factor, trained, number(given, "beta_slow", 1.0), number(given, "beta_fast", 32.0),
                    yarn_attention(given, factor), bool(given.get("truncate", True)))
    return Rope(base, kind, factor)


def yarn_attention(rope: dict, factor: float) -> float:
    """YaRN's factor on cos and sin: attention_factor as given, else 0.1·ln(factor) + 1 (DeepSeek's mscale ratio where
    both are given)."""
    if rope.get("attention_factor") is not None:
        return number(rope, "attention_factor", 1.0)

    def scale(m: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0
    if rope.get("mscale") and rope.get("mscale_all_dim"):
        return scale(float(rope["mscale"])) / scale(float(rope["mscale_all_dim"]))
    return scale(1.0)


def bases_by_type(config: dict, types: list[str], full: tuple[str, float], local: tuple[str, float]
                  ) -> tuple[float | Rope, tuple[float | Rope, ...]]:
    """(the global layers' RoPE base, each layer's) for a model that turns its global and sliding layers by different
    bases (Gemma 3, ModernBERT): rope_parameters by layer type (transformers 5), or the older settings `full` and
    `local`, (key, default) each; a stretched RoPE as rope_base reads it (Gemma 3 stretches its global layers')."""
    rope = config.get("rope_parameters") or {}
    if "full_attention" in rope:
        length = {key: config[key] for key in ("max_position_embeddings", "original_max_position_embeddings") if key in config}
        by_type = {kind: rope_base({**length, "rope_parameters": rope.get(kind, {})})
                   for kind in ("full_attention", "sliding_attention")}
    else:
        scaling = {"rope_scaling": config.get("rope_scaling")} if config.get("rope_scaling") else {}
        by_type = {"full_attention": rope_base({"rope_theta": config.get(full[0], full[1]), **scaling}),
                   "sliding_attention": float(config.get(local[0], local[1]))}
    return by_type["full_attention"], tuple(by_type[t] for t in types)


def rotary_dims(config: dict, head_dim: int) -> int | None:
    """How many of each head's dimensions RoPE turns: rope_parameters' partial_rotary_factor (transformers 5), else the
    config's partial_rotary_factor or rotary_pct (GPT-NeoX), times head_dim; None where it turns them all."""
    rope = config.get("rope_parameters") or {}
    share = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", config.get("rotary_pct", 1.0)))
    if not (isinstance(share, (int, float)) and 0 < share <= 1):
        raise Unsupported(f"a rotary share of {share!r}")
    return int(head_dim * share) if share < 1 else None


def windows(config: dict, layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window: layer_types' sliding layers (Qwen2, Qwen3, SmolLM3, else use_sliding_window from
    max_window_layers on), Mistral's sliding_window on every layer, else none."""
    window = setting(config, "sliding_window") if config.get("sliding_window") is not None else None
    if config["model_type"] in WINDOWED_LAYERS:
        start = config.get("max_window_layers", layers) if config.get("use_sliding_window") else layers
        types = files.layer_types(config, layers, lambda i: i >= start)
        if config["model_type"] == "smollm3" and not config.get("use_sliding_window"):
            return ()
        return tuple(window if t == "sliding_attention" and window else None for t in types)
    return tuple(window if window else None for _ in range(layers))


def rope_bases(config: dict, layers: int, base: float) -> tuple[float | None, ...]:
    """SmolLM3's per-layer bases: None on its layers without positions (no_rope_layers' 0s, by default every fourth)."""
    if config["model_type"] != "smollm3":
        return ()
    turned = config.get("no_rope_layers")
    if turned is None:
        every = config.get("no_rope_layer_interval", 4)
        turned = [int((i + 1) % every != 0) for i in range(layers)]
    if len(turned) != layers:
        raise ModelError(f"config.json's no_rope_layers names {len(turned)} layers; the model has {layers}.")
    return tuple(base if use else None for use in turned)


def experts(config: dict) -> tuple[int, bool]:
    """(the experts each piece goes to, whether their probabilities are rescaled to sum to 1); (0, True) without."""
    if config["model_type"] == "mixtral":
        return setting(config, "num_experts_per_tok", 2), True
    if config["model_type"] == "qwen3_moe":
        return setting(config, "num_experts_per_tok", 8), bool(config.get("norm_topk_prob", False))
    return 0, True


def architecture(config: dict) -> Architecture:
    activation = checked_activation(config.get("hidden_act", "silu"))
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    layers = setting(config, "num_hidden_layers")
    kv = setting(config, "num_key_value_heads", heads)
    given = setting(config, "head_dim") if config.get("head_dim") is not None else None
    kv_heads, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads, "num_key_value_heads", kv, given)
    base = rope_base(config)
    top, renormalise = experts(config)
    return Architecture(
        family="llama", kind="decoder", layers=layers, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 2048), norm="rms", post_norm=False, positions="rotary",
        activation=activation, gated=True, rope_base=base, rope_pairs="halves",
        windows=windows(config, layers), rotary_dims=rotary_dims(config, head_dim),
        rope_bases=rope_bases(config, layers, base), top_experts=top, renormalise_experts=renormalise,
        embed_scale=number(config, "embedding_multiplier", 1.0) if config["model_type"] == "granite" else 1.0,
    )


def number(config: dict, key: str, default: float) -> float:
    """A config.json float setting (a multiplier, a cap), checked: finite and positive."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ModelError(f"config.json's {key} is {value!r}; it must be a positive number.")
    return float(value)


class Reader:
    """A checkpoint's linear layers as (in, out) weights and biases, and its RMSNorms."""

    def __init__(self, tensors: Tensors, eps: float, norm_offset: float = 0.0):
        self.tensors, self.eps, self.norm_offset = tensors, eps, norm_offset

    def linear(self, name: str, n_in: int, n_out: int, bias: bool):
        weight = self.tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # (in, out)
        return weight, self.tensors.get(f"{name}.bias", (n_out,)) if bias else None

    def norm(self, name: str, size: int) -> Norm:
        """RMSNorm `name`; Gemma's scale the stored weight by (1 + w), norm_offset 1, added here once."""
        weight = self.tensors.get(f"{name}.weight", (size,))  # (size,)
        return Norm("rms", weight + self.norm_offset if self.norm_offset else weight, None, self.eps)

    def experts(self, layer: str, names: tuple[str, str, str], count: int, d: int, ff: int):
        """(W_gate, W_up, W_down) of every expert of a mixture, stacked (E, d, ff), (E, d, ff), (E, ff, d)."""
        gate, up, down = names
        stack = [(self.linear(f"{layer}.{e}.{gate}", d, ff, False)[0], self.linear(f"{layer}.{e}.{up}", d, ff, False)[0],
                  self.linear(f"{layer}.{e}.{down}", ff, d, False)[0]) for e in range(count)]
        return tuple(torch.stack(ws) for ws in zip(*stack))


def scaled(w: torch.Tensor, b: torch.Tensor | None, factor: float):
    """W and b times `factor` (a multiplier folded into a layer), untouched where it is 1."""
    if factor == 1.0:
        return w, b
    return w * factor, None if b is None else b * factor


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    kind = config["model_type"]
    d, dh, eps = arch.d_model, arch.head_dim, config.get("rms_norm_eps", 1e-6)
    read = Reader(tensors, eps)
    qwen = kind == "qwen2"  # biases on q, k and v, always
    head_norms = kind in ("qwen3", "qwen3_moe", "olmo2")
    attention_bias, mlp_bias = config.get("attention_bias", False), config.get("mlp_bias", False)
    granite = kind == "granite"
    query_scale = number(config, "attention_multiplier", 1.0) * math.sqrt(dh) if granite else 1.0  # its own 1/√dh
    residual = number(config, "residual_multiplier", 1.0) if granite else 1.0
    sizes = (arch.heads * dh, arch.kv_heads * dh, arch.kv_heads * dh)  # the rows of W_q, W_k, W_v

    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        ff = setting(config, "intermediate_size")
        router = None
        if kind == "phi3":  # [W_q; W_k; W_v] and [W_gate; W_up], no biases
            qkv, _ = read.linear(p + "self_attn.qkv_proj", d, sum(sizes), False)  # (d, (H + 2·KV)·dh)
            w_q, w_k, w_v = (w.contiguous() for w in qkv.split(sizes, 1))
            gate_up, _ = read.linear(p + "mlp.gate_up_proj", d, 2 * ff, False)  # (d, 2·d_ff)
            w_gate, w_up = (w.contiguous() for w in gate_up.split(ff, 1))
            b_q = b_k = b_v = b_gate = b_up = None
        else:
            w_q, b_q = read.linear(p + "self_attn.q_proj", d, sizes[0], qwen or attention_bias)
            w_k, b_k = read.linear(p + "self_attn.k_proj", d, sizes[1], qwen or attention_bias)
            w_v, b_v = read.linear(p + "self_attn.v_proj", d, sizes[2], qwen or attention_bias)
            w_q, b_q = scaled(w_q, b_q, query_scale)
        b_gate = b_up = b_down = None
        if is_sparse(config, i):
            count = setting(config, "num_local_experts" if "num_local_experts" in config else "num_experts")
            ff = setting(config, "intermediate_size" if kind == "mixtral" else "moe_intermediate_size")
            where, names = ((p + "block_sparse_moe", ("w1", "w3", "w2")) if kind == "mixtral"
                            else (p + "mlp", ("gate_proj", "up_proj", "down_proj")))
            router = read.linear(where + ".gate", d, count, False)[0]  # (d, E)
            w_gate, w_up, w_down = read.experts(where + ".experts", names, count, d, ff)  # (E, d, ff) ×2, (E, ff, d)
        else:
            if kind != "phi3":
                w_gate, b_gate = read.linear(p + "mlp.gate_proj", d, ff, mlp_bias)
                w_up, b_up = read.linear(p + "mlp.up_proj", d, ff, mlp_bias)
            w_down, b_down = read.linear(p + "mlp.down_proj", ff, d, mlp_bias)
            w_down, b_down = scaled(w_down, b_down, residual)
        w_o, b_o = scaled(*read.linear(p + "self_attn.o_proj", arch.heads * dh, d, attention_bias), residual)
        norm_size = dh if kind != "olmo2" else None
        olmo = kind == "olmo2"  # its norms sit on the updates, not before the attention and MLP
        layers.append(LayerWeights(
            w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o,
            None if olmo else read.norm(p + "input_layernorm", d),
            None if olmo else read.norm(p + "post_attention_layernorm", d), w_up, b_up, w_down, b_down, w_gate, b_gate,
            read.norm(p + "self_attn.q_norm", norm_size or sizes[0]) if head_norms else None,
            read.norm(p + "self_attn.k_norm", norm_size or sizes[1]) if head_norms else None,
            attention_out_norm=read.norm(p + "post_attention_layernorm", d) if olmo else None,
            mlp_out_norm=read.norm(p + "post_feedforward_layernorm", d) if olmo else None, router=router))
    embeddings = tensors.get("embed_tokens.weight", (arch.vocab, d))
    tied = config.get("tie_word_embeddings", False) and not tensors.has("lm_head.weight")
    head = embeddings if tied else tensors.get("lm_head.weight", (arch.vocab, d))
    final = read.norm("norm", d)
    if granite:  # its logits are divided by logits_scaling: folded into the final norm's scale
        final = Norm("rms", final.weight / number(config, "logits_scaling", 1.0), None, eps)
    return Built(arch, Weights(embeddings=embeddings, layers=layers, final_norm=final, unembed=head.T))


def is_sparse(config: dict, layer: int) -> bool:
    """Whether layer `layer`'s MLP is a mixture of experts: every layer of Mixtral; Qwen3-MoE's every
    decoder_sparse_step-th, bar its mlp_only_layers."""
    if config["model_type"] == "mixtral":
        return True
    if config["model_type"] != "qwen3_moe":
        return False
    step = setting(config, "decoder_sparse_step", 1)
    return layer not in (config.get("mlp_only_layers") or []) and (layer + 1) % step == 0
