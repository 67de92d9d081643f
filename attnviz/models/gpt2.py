"""GPT-2 and GPT-BigCode (StarCoder, SantaCoder) into attnviz's layout.

Pre-norm layers with learned positions, GELU (tanh approximation) and a final LayerNorm; the output matrix is the
embeddings' transpose unless the checkpoint stores lm_head.weight. The trap, handled in `linear`: GPT-2's Conv1D
stores W as (in, out), already ours, where nn.Linear's is (out, in); and c_attn holds W_q, W_k and W_v side by side.
GPT-BigCode is GPT-2 with nn.Linear layers, and with multi_query one key/value head that every query head reads (its
c_attn is [W_q; W_k; W_v] of widths d, dh, dh); without it, c_attn holds each head's [q, k, v] rows together.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("gpt2", "gpt_bigcode")
PREFIXES = ("transformer.", "")


def architecture(config: dict) -> Architecture:
    if not config.get("scale_attn_weights", True) or config.get("scale_attn_by_inverse_layer_idx", False):
        raise Unsupported("attention scaled other than by 1/√d_k")
    if config.get("add_cross_attention"):
        raise Unsupported("GPT-2 with cross-attention")
    activation = checked_activation(config.get("activation_function", "gelu_new"))
    d, heads = setting(config, "n_embd"), setting(config, "n_head")
    _, head_dim = head_shape("n_embd", d, "n_head", heads)
    multi_query = config["model_type"] == "gpt_bigcode" and config.get("multi_query", True)
    return Architecture(
        family="gpt2", kind="decoder", layers=setting(config, "n_layer"), heads=heads, kv_heads=1 if multi_query else heads,
        head_dim=head_dim,
        d_model=d, vocab=setting(config, "vocab_size"), max_positions=setting(config, "n_positions", 1024), norm="layer",
        post_norm=False, positions="learned", activation=activation, gated=False,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, eps = arch.d_model, config.get("layer_norm_epsilon", 1e-5)
    ff = setting(config, "n_inner") if config.get("n_inner") is not None else 4 * d

    bigcode = config["model_type"] == "gpt_bigcode"

    def linear(name: str, n_in: int, n_out: int):
        if bigcode:  # nn.Linear: (out, in)
            return tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous(), tensors.get(f"{name}.bias", (n_out,))
        return tensors.get(f"{name}.weight", (n_in, n_out)), tensors.get(f"{name}.bias", (n_out,))  # Conv1D: (in, out)

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    layers = []
    for i in range(arch.layers):
        p = f"h.{i}."
        kv = arch.kv_heads * arch.head_dim
        w_qkv, b_qkv = linear(p + "attn.c_attn", d, d + 2 * kv)  # (d, d + 2·KV·dh), (d + 2·KV·dh,)
        if bigcode and arch.kv_heads == arch.heads:  # each head's [q, k, v] together, as GPT-NeoX
            w_qkv = w_qkv.view(d, arch.heads, 3, arch.head_dim).transpose(1, 2).reshape(d, 3 * d)  # (d, 3d) side by side
            b_qkv = b_qkv.view(arch.heads, 3, arch.head_dim).transpose(0, 1).reshape(3 * d)  # (3d,)
        (w_q, w_k, w_v), (b_q, b_k, b_v) = w_qkv.split((d, kv, kv), 1), b_qkv.split((d, kv, kv))  # (d, ·), (·,)
        w_o, b_o = linear(p + "attn.c_proj", d, d)
        w_up, b_up = linear(p + "mlp.c_fc", d, ff)
        w_down, b_down = linear(p + "mlp.c_proj", ff, d)
        layers.append(LayerWeights(w_q.contiguous(), b_q.contiguous(), w_k.contiguous(), b_k.contiguous(), w_v.contiguous(),
                            b_v.contiguous(), w_o, b_o,
                            norm(p + "ln_1"), norm(p + "ln_2"), w_up, b_up, w_down, b_down))
    embeddings = tensors.get("wte.weight", (arch.vocab, d))
    head = tensors.optional("lm_head.weight", (arch.vocab, d))
    weights = Weights(embeddings=embeddings, positions=tensors.get("wpe.weight", (arch.max_positions, d)), layers=layers,
                      final_norm=norm("ln_f"), unembed=(head if head is not None else embeddings).T)
    return Built(arch, weights)
