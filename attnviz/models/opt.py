"""OPT into attnviz's layout.

Pre-norm layers with LayerNorm, learned positions, ReLU, biases everywhere, a final LayerNorm, and the output matrix
tied to the embeddings. The traps, handled in `build`: the position table has two rows before position 0 (OPT's
offset of 2, from its padding index), and where the embeddings are narrower than the layers (word_embed_proj_dim, as
in OPT-350m) they are widened by project_in on the way in and narrowed by project_out on the way out, both without a
bias, so both fold into the embeddings and the output matrix. OPT-350m's layers are post-norm (do_layer_norm_before
false) and have no final norm: such a checkpoint goes to transformers.
"""

from __future__ import annotations

import torch

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("opt",)
PREFIXES = ("model.decoder.", "decoder.", "")
OFFSET = 2  # OPTLearnedPositionalEmbedding: position i reads row i + 2


def architecture(config: dict) -> Architecture:
    if not config.get("do_layer_norm_before", True) or config.get("_remove_final_layer_norm", False):
        raise Unsupported("OPT's post-norm layers (do_layer_norm_before false, as in OPT-350m)")
    activation = checked_activation(config.get("activation_function", "relu"))
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    _, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads)
    return Architecture(
        family="opt", kind="decoder", layers=setting(config, "num_hidden_layers"), heads=heads, kv_heads=heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 2048), norm="layer", post_norm=False,
        positions="learned", activation=activation, gated=False,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, eps = arch.d_model, 1e-5  # nn.LayerNorm's default, which OPT keeps
    ff, width = setting(config, "ffn_dim"), config.get("word_embed_proj_dim") or d
    biased = config.get("enable_bias", True)

    def linear(name: str, n_in: int, n_out: int):
        weight = tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous()  # nn.Linear's (out, in) → (in, out)
        bias = tensors.get(f"{name}.bias", (n_out,)) if biased else torch.zeros(n_out, dtype=weight.dtype,
                                                                                 device=weight.device)
        return weight, bias

    def norm(name: str) -> Norm:
        weight, bias = tensors.optional(f"{name}.weight", (d,)), tensors.optional(f"{name}.bias", (d,))
        ones = torch.ones(d, dtype=tensors.dtype, device=tensors.device)  # (d,) layer_norm_elementwise_affine false
        return Norm("layer", ones if weight is None else weight, ones * 0 if bias is None else bias, eps)

    layers = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        w_q, b_q = linear(p + "self_attn.q_proj", d, d)
        w_k, b_k = linear(p + "self_attn.k_proj", d, d)
        w_v, b_v = linear(p + "self_attn.v_proj", d, d)
        w_o, b_o = linear(p + "self_attn.out_proj", d, d)
        w_up, b_up = linear(p + "fc1", d, ff)
        w_down, b_down = linear(p + "fc2", ff, d)
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm(p + "self_attn_layer_norm"),
                            norm(p + "final_layer_norm"), w_up, b_up, w_down, b_down))
    words = tensors.get("embed_tokens.weight", (arch.vocab, width))  # (vocab, p)
    head = tensors.optional("lm_head.weight", (arch.vocab, width))  # (vocab, p), or tied
    head = words if head is None else head
    embeddings, unembed = words, head.T  # (vocab, d), (d, vocab) where p = d
    if width != d:
        embeddings = words @ tensors.get("project_in.weight", (d, width)).T  # (vocab, p) @ (p, d) → (vocab, d)
        unembed = (head @ tensors.get("project_out.weight", (width, d))).T  # ((vocab, p) @ (p, d))ᵀ → (d, vocab)
    table = tensors.get("embed_positions.weight", (arch.max_positions + OFFSET, d))  # (max + 2, d)
    weights = Weights(embeddings=embeddings.contiguous(), positions=table[OFFSET:].contiguous(), layers=layers,
                      final_norm=norm("final_layer_norm"), unembed=unembed.contiguous())
    return Built(arch, weights)
