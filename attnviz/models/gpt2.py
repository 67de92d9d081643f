"""GPT-2 into attnviz's layout.

Pre-norm layers with learned positions, GELU (tanh approximation) and a final LayerNorm; the output matrix is the
embeddings' transpose unless the checkpoint stores lm_head.weight. The trap, handled in `linear`: GPT-2's Conv1D
stores W as (in, out), already ours, where nn.Linear's is (out, in); and c_attn holds W_q, W_k and W_v side by side.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, Block, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.model import Built, Unsupported

MODEL_TYPES = ("gpt2",)
PREFIXES = ("transformer.", "")


def architecture(config: dict) -> Architecture:
    if not config.get("scale_attn_weights", True) or config.get("scale_attn_by_inverse_layer_idx", False):
        raise Unsupported("attention scaled other than by 1/√d_k")
    if config.get("add_cross_attention"):
        raise Unsupported("GPT-2 with cross-attention")
    activation = config.get("activation_function", "gelu_new")
    if activation not in ("gelu_new", "gelu", "gelu_pytorch_tanh", "gelu_fast", "relu"):
        raise Unsupported(f"the activation {activation!r}")
    d, heads = setting(config, "n_embd"), setting(config, "n_head")
    _, head_dim = head_shape("n_embd", d, "n_head", heads)
    return Architecture(
        family="gpt2", kind="decoder", layers=setting(config, "n_layer"), heads=heads, kv_heads=heads, head_dim=head_dim,
        d_model=d, vocab=setting(config, "vocab_size"), max_positions=setting(config, "n_positions", 1024), norm="layer",
        post_norm=False, positions="learned", activation=activation, gated=False,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, eps = arch.d_model, config.get("layer_norm_epsilon", 1e-5)
    ff = setting(config, "n_inner") if config.get("n_inner") is not None else 4 * d

    def linear(name: str, n_in: int, n_out: int):
        return tensors.get(f"{name}.weight", (n_in, n_out)), tensors.get(f"{name}.bias", (n_out,))  # Conv1D: (in, out)

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    blocks = []
    for i in range(arch.layers):
        p = f"h.{i}."
        w_qkv, b_qkv = linear(p + "attn.c_attn", d, 3 * d)  # (d, 3d), (3d,)
        (w_q, w_k, w_v), (b_q, b_k, b_v) = w_qkv.split(d, 1), b_qkv.split(d)  # (d, d) each, (d,) each
        w_o, b_o = linear(p + "attn.c_proj", d, d)
        w_up, b_up = linear(p + "mlp.c_fc", d, ff)
        w_down, b_down = linear(p + "mlp.c_proj", ff, d)
        blocks.append(Block(w_q.contiguous(), b_q, w_k.contiguous(), b_k, w_v.contiguous(), b_v, w_o, b_o,
                            norm(p + "ln_1"), norm(p + "ln_2"), w_up, b_up, w_down, b_down))
    embeddings = tensors.get("wte.weight", (arch.vocab, d))
    head = tensors.optional("lm_head.weight", (arch.vocab, d))
    weights = Weights(embeddings=embeddings, positions=tensors.get("wpe.weight", (arch.max_positions, d)), blocks=blocks,
                      final_norm=norm("ln_f"), unembed=(head if head is not None else embeddings).T)
    return Built(arch, weights)
