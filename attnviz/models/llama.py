"""Llama-like decoders (Llama, Mistral, Qwen2, Qwen3, Phi-3, SmolLM) into attnviz's layout.

Pre-norm layers with RMSNorm, rotary positions on q and k, grouped-query attention (each key/value head read by
heads / kv_heads query heads), a SwiGLU feed-forward, a final RMSNorm and an output matrix (tied to the embeddings
when tie_word_embeddings). Qwen2 adds biases to q, k and v; Llama may add them everywhere (attention_bias, mlp_bias);
Mistral and some Qwen2 and Qwen3 layers read a sliding window of the last pieces. Qwen3 norms each head's query
and key (RMSNorm over its dh, its own weights) before turning them by position. Phi-3 stores W_q, W_k and W_v as one
qkv_proj and W_gate, W_up as one gate_up_proj, each split here, and may turn only part of each head.
The traps, handled here: nn.Linear's (out, in) weights are transposed to ours; transformers turns the pairs (i, i + d/2)
of q and k (rope_pairs="halves"), where a GGUF file's permuted weights turn (2i, 2i+1) (attnviz.models.gguf).
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, Block, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.model import Built, Unsupported

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3")
PREFIXES = ("model.", "")


def rope_base(config: dict) -> float:
    """θ's base: rope_parameters (transformers 5) or rope_theta; a scaled RoPE (Llama 3's, YaRN, …) is Unsupported."""
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise Unsupported(f"RoPE of type {kind!r}")
    return float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))


def rotary_dims(config: dict, head_dim: int) -> int | None:
    """How many of each head's dimensions RoPE turns: rope_parameters' partial_rotary_factor (transformers 5), else the
    config's partial_rotary_factor or rotary_pct (GPT-NeoX), times head_dim; None where it turns them all."""
    rope = config.get("rope_parameters") or {}
    share = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", config.get("rotary_pct", 1.0)))
    if not (isinstance(share, (int, float)) and 0 < share <= 1):
        raise Unsupported(f"a rotary share of {share!r}")
    return int(head_dim * share) if share < 1 else None


def windows(config: dict, layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window: Qwen2's and Qwen3's layer_types (or use_sliding_window from max_window_layers
    on), Mistral's sliding_window on every layer, else none."""
    window = setting(config, "sliding_window") if config.get("sliding_window") is not None else None
    if config["model_type"] in ("qwen2", "qwen3"):
        types = config.get("layer_types")
        if types is None:
            start = config.get("max_window_layers", layers) if config.get("use_sliding_window") else layers
            types = ["sliding_attention" if i >= start else "full_attention" for i in range(layers)]
        return tuple(window if t == "sliding_attention" and window else None for t in types)
    return tuple(window if window else None for _ in range(layers))


def architecture(config: dict) -> Architecture:
    activation = config.get("hidden_act", "silu")
    if activation not in ("silu", "swish", "gelu", "gelu_pytorch_tanh", "relu"):
        raise Unsupported(f"the activation {activation!r}")
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    layers = setting(config, "num_hidden_layers")
    kv = setting(config, "num_key_value_heads", heads)
    given = setting(config, "head_dim") if config.get("head_dim") is not None else None
    kv_heads, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads, "num_key_value_heads", kv, given)
    return Architecture(
        family="llama", kind="decoder", layers=layers, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 2048), norm="rms", post_norm=False, positions="rotary",
        activation=activation, gated=True, rope_base=rope_base(config), rope_pairs="halves",
        windows=windows(config, layers), rotary_dims=rotary_dims(config, head_dim),
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, dh, ff, eps = arch.d_model, arch.head_dim, setting(config, "intermediate_size"), config.get("rms_norm_eps", 1e-6)
    qwen = config["model_type"] == "qwen2"  # biases on q, k and v, always
    head_norms = config["model_type"] == "qwen3"
    attention_bias, mlp_bias = config.get("attention_bias", False), config.get("mlp_bias", False)

    def linear(name: str, n_in: int, n_out: int, bias: bool):
        weight = tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # (in, out)
        return weight, tensors.get(f"{name}.bias", (n_out,)) if bias else None

    def norm(name: str, size: int = d) -> Norm:
        return Norm("rms", tensors.get(f"{name}.weight", (size,)), None, eps)

    fused = config["model_type"] == "phi3"
    sizes = (arch.heads * dh, arch.kv_heads * dh, arch.kv_heads * dh)  # the rows of W_q, W_k, W_v

    blocks = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        if fused:  # Phi-3: [W_q; W_k; W_v] and [W_gate; W_up], no biases
            qkv, _ = linear(p + "self_attn.qkv_proj", d, sum(sizes), False)  # (d, (H + 2·KV)·dh)
            w_q, w_k, w_v = (w.contiguous() for w in qkv.split(sizes, 1))
            gate_up, _ = linear(p + "mlp.gate_up_proj", d, 2 * ff, False)  # (d, 2·d_ff)
            w_gate, w_up = (w.contiguous() for w in gate_up.split(ff, 1))
            b_q = b_k = b_v = b_gate = b_up = None
        else:
            w_q, b_q = linear(p + "self_attn.q_proj", d, arch.heads * dh, qwen or attention_bias)
            w_k, b_k = linear(p + "self_attn.k_proj", d, arch.kv_heads * dh, qwen or attention_bias)
            w_v, b_v = linear(p + "self_attn.v_proj", d, arch.kv_heads * dh, qwen or attention_bias)
            w_gate, b_gate = linear(p + "mlp.gate_proj", d, ff, mlp_bias)
            w_up, b_up = linear(p + "mlp.up_proj", d, ff, mlp_bias)
        w_o, b_o = linear(p + "self_attn.o_proj", arch.heads * dh, d, attention_bias)
        w_down, b_down = linear(p + "mlp.down_proj", ff, d, mlp_bias)
        blocks.append(Block(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm(p + "input_layernorm"),
                            norm(p + "post_attention_layernorm"), w_up, b_up, w_down, b_down, w_gate, b_gate,
                            norm(p + "self_attn.q_norm", dh) if head_norms else None,
                            norm(p + "self_attn.k_norm", dh) if head_norms else None))
    embeddings = tensors.get("embed_tokens.weight", (arch.vocab, d))
    tied = config.get("tie_word_embeddings", False) and not tensors.has("lm_head.weight")
    head = embeddings if tied else tensors.get("lm_head.weight", (arch.vocab, d))
    return Built(arch, Weights(embeddings=embeddings, blocks=blocks, final_norm=norm("norm"), unembed=head.T))
