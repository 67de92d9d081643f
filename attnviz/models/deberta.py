"""DeBERTa-v2 and -v3 (model_type deberta-v2) into attnviz's layout.

BERT's post-norm layers, with disentangled attention: each score is the sum of three terms over √(d_h·s),
- content → content, q_i · k_j;
- content → position, q_i · P^k_δ, the query against a key made for the distance δ = bucket(i − j);
- position → content, k_j · P^q_δ, the key against a query made for that distance;
with s the count of terms (pos_att_type names the two positional ones). P^k and P^q are the shared table of 2k relative
embeddings (rel_embeddings, LayerNormed) through the layer's pos_key_proj and pos_query_proj (its key_proj and
query_proj where share_att_key): fixed for the layer, so they are made here once (the engine's position_key and
position_query). 1/√s is folded into W_q, b_q and P^q, so that the engine divides every term by √d_h alone.
DeBERTa-v3 adds no absolute positions (position_biased_input false) and no segments; v2 may add both.
The traps: distances past position_buckets / 2 go by log buckets (engine.relative_index, in float32 as transformers
computes them); the embeddings are normed after any segment. A convolution beside the first layer (conv_kernel_size)
and embeddings narrower than the layers (embedding_size) are Unsupported.
"""

from __future__ import annotations

import math

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("deberta-v2",)
PREFIXES = ("deberta.", "")


def terms(config: dict) -> tuple[str, ...]:
    """The positional terms pos_att_type names, of ("c2p", "p2c"), as a list or as "p2c|c2p". Each counts in s, the
    scale √(d_h·s), even where relative_attention is off and no term is added (as transformers computes it)."""
    named = config.get("pos_att_type") or []
    named = named.split("|") if isinstance(named, str) else list(named)
    unknown = set(named) - {"c2p", "p2c"}
    if unknown:
        raise Unsupported(f"the relative term(s) {', '.join(sorted(unknown))}")
    return tuple(t for t in ("c2p", "p2c") if t in named)


def span(config: dict) -> int:
    """k: the relative embeddings hold 2k rows, k = position_buckets, else max_relative_positions (else the context)."""
    buckets = config.get("position_buckets", -1) or -1
    top = config.get("max_relative_positions", -1) or -1
    return buckets if buckets > 0 else (top if top > 0 else setting(config, "max_position_embeddings", 512))


def architecture(config: dict) -> Architecture:
    if (config.get("conv_kernel_size") or 0) > 0:
        raise Unsupported("a convolution beside the first layer (conv_kernel_size)")
    d, heads = setting(config, "hidden_size"), setting(config, "num_attention_heads")
    if setting(config, "embedding_size", d) != d:
        raise Unsupported("embeddings narrower than the layers (embedding_size)")
    activation = checked_activation(config.get("hidden_act", "gelu"))
    _, head_dim = head_shape("hidden_size", d, "num_attention_heads", heads,
                             head_dim=setting(config, "attention_head_size", d // heads))
    top = config.get("max_relative_positions", -1) or -1
    return Architecture(
        family="deberta", kind="encoder", layers=setting(config, "num_hidden_layers"), heads=heads, kv_heads=heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 512), norm="layer", post_norm=True,
        positions="learned" if config.get("position_biased_input", True) else "relative", activation=activation,
        gated=False, token_type=config.get("type_vocab_size", 0) > 0,
        relative_span=span(config) if terms(config) and config.get("relative_attention") else 0, relative_buckets=config.get("position_buckets", -1) or -1,
        relative_max=top if top > 0 else setting(config, "max_position_embeddings", 512),
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    d, dh, heads, eps = arch.d_model, arch.head_dim, arch.heads, config.get("layer_norm_eps", 1e-7)
    named, ff = terms(config), setting(config, "intermediate_size")
    root = math.sqrt(1 + len(named))  # √s: the content term and each positional one
    kinds = named if arch.relative_span else ()  # the terms added

    def linear(name: str, n_in: int, n_out: int):
        return tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous(), tensors.get(f"{name}.bias", (n_out,))  # (in, out)

    def norm(name: str, size: int = d) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (size,)), tensors.get(f"{name}.bias", (size,)), eps)

    table = None
    if kinds:
        k = arch.relative_span
        stored = tensors.get("encoder.rel_embeddings.weight", (2 * k, d))  # (2k, d); a ModelError where it lacks them
        normed = "layer_norm" in [t.strip() for t in str(config.get("norm_rel_ebd", "none")).lower().split("|")]
        table = norm("encoder.LayerNorm")(stored) if normed else stored  # (2k, d)
    shared = bool(config.get("share_att_key", False))
    layers = []
    for i in range(arch.layers):
        p = f"encoder.layer.{i}."
        a = p + "attention.self."
        w_q, b_q = linear(a + "query_proj", d, heads * dh)
        w_k, b_k = linear(a + "key_proj", d, heads * dh)
        w_v, b_v = linear(a + "value_proj", d, heads * dh)
        position_key = position_query = None
        if "c2p" in kinds:
            w, b = (w_k, b_k) if shared else linear(a + "pos_key_proj", d, heads * dh)
            position_key = table @ w + b  # (2k, H·dh)
        if "p2c" in kinds:
            w, b = (w_q, b_q) if shared else linear(a + "pos_query_proj", d, heads * dh)
            position_query = (table @ w + b) / root  # (2k, H·dh), its 1/√s folded in
        w_o, b_o = linear(p + "attention.output.dense", heads * dh, d)
        w_up, b_up = linear(p + "intermediate.dense", d, ff)
        w_down, b_down = linear(p + "output.dense", ff, d)
        layers.append(LayerWeights(w_q / root, b_q / root, w_k, b_k, w_v, b_v, w_o, b_o, norm(p + "attention.output.LayerNorm"),
                            norm(p + "output.LayerNorm"), w_up, b_up, w_down, b_down,
                            position_key=position_key, position_query=position_query))
    token_type = None
    if arch.token_type:
        token_type = tensors.get("embeddings.token_type_embeddings.weight", (setting(config, "type_vocab_size"), d))[0]  # (d,)
    positions = None
    if arch.positions == "learned":
        positions = tensors.get("embeddings.position_embeddings.weight", (arch.max_positions, d))
    weights = Weights(embeddings=tensors.get("embeddings.word_embeddings.weight", (arch.vocab, d)), positions=positions,
                      token_type=token_type, layers=layers, embedding_norm=norm("embeddings.LayerNorm"))
    return Built(arch, weights)
