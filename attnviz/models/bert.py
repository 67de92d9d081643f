"""BERT-like encoders (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA; MiniLM is a BERT) into attnviz's layout.

Post-norm layers: x = LayerNorm(x + attention(x)), then x = LayerNorm(x + feed-forward(x)). Learned absolute positions
and, for BERT and RoBERTa, segment A's embedding are added to each piece's embedding, then normalised.
The traps, handled here: nn.Linear stores W as (out, in) for y = xWᵀ + b, ours is (in, out); RoBERTa's positions start
at its padding index + 1 (XLM-RoBERTa's too); DistilBERT has its own names and no segments; ELECTRA's embeddings may
be narrower than its layers (embedding_size), widened by embeddings_project after their norm.
"""

from __future__ import annotations

from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.files import Tensors, head_shape, setting
from attnviz.models.mapping import Built, Unsupported, activation as checked_activation

MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra")
PREFIXES = ("bert.", "roberta.", "distilbert.", "electra.", "model.", "")
PADDED = ("roberta", "xlm-roberta")  # positions counted from the padding index + 1


def architecture(config: dict) -> Architecture:
    distil = config["model_type"] == "distilbert"
    get = (lambda a, b: setting(config, a)) if distil else (lambda a, b: setting(config, b))  # DistilBERT's, else BERT's
    d, heads = get("dim", "hidden_size"), get("n_heads", "num_attention_heads")
    _, head_dim = head_shape("dim" if distil else "hidden_size", d, "n_heads" if distil else "num_attention_heads", heads)
    activation = checked_activation(config.get("activation" if distil else "hidden_act", "gelu"))
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise Unsupported(f"position_embedding_type {config.get('position_embedding_type')!r}")
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise Unsupported("a BERT used as a decoder")
    padding = config.get("pad_token_id", 1) if config["model_type"] in PADDED else None
    return Architecture(
        family="bert", kind="encoder", layers=get("n_layers", "num_hidden_layers"), heads=heads, kv_heads=heads,
        head_dim=head_dim, d_model=d, vocab=setting(config, "vocab_size"),
        max_positions=setting(config, "max_position_embeddings", 512),
        norm="layer", post_norm=True, positions="learned", activation=activation, gated=False, padding_index=padding,
        token_type=not distil and config.get("type_vocab_size", 0) > 0,
    )


def build(config: dict, tensors: Tensors) -> Built:
    arch = architecture(config)
    distil = config["model_type"] == "distilbert"
    eps = 1e-12 if distil else config.get("layer_norm_eps", 1e-12)
    d, ff = arch.d_model, setting(config, "hidden_dim") if distil else setting(config, "intermediate_size")

    def linear(name: str, n_in: int, n_out: int):
        return tensors.get(f"{name}.weight", (n_out, n_in)).T.contiguous(), tensors.get(f"{name}.bias", (n_out,))  # (in, out)

    def norm(name: str) -> Norm:
        return Norm("layer", tensors.get(f"{name}.weight", (d,)), tensors.get(f"{name}.bias", (d,)), eps)

    layers = []
    for i in range(arch.layers):
        if distil:
            p = f"transformer.layer.{i}."
            names = (p + "attention.q_lin", p + "attention.k_lin", p + "attention.v_lin", p + "attention.out_lin",
                     p + "sa_layer_norm", p + "ffn.lin1", p + "ffn.lin2", p + "output_layer_norm")
        else:
            p = f"encoder.layer.{i}."
            names = (p + "attention.self.query", p + "attention.self.key", p + "attention.self.value",
                     p + "attention.output.dense", p + "attention.output.LayerNorm", p + "intermediate.dense",
                     p + "output.dense", p + "output.LayerNorm")
        q, k, v, o, attention_norm, up, down, mlp_norm = names
        w_q, b_q = linear(q, d, d)
        w_k, b_k = linear(k, d, d)
        w_v, b_v = linear(v, d, d)
        w_o, b_o = linear(o, d, d)
        w_up, b_up = linear(up, d, ff)
        w_down, b_down = linear(down, ff, d)
        layers.append(LayerWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm(attention_norm), norm(mlp_norm),
                            w_up, b_up, w_down, b_down))
    width = setting(config, "embedding_size", d) if config["model_type"] == "electra" else d  # the embeddings' width
    token_type = None
    if arch.token_type:
        token_type = tensors.get("embeddings.token_type_embeddings.weight", (setting(config, "type_vocab_size"), width))[0]  # (E,)
    widen = linear("embeddings_project", width, d) if width != d else None  # ELECTRA: (E, d), (d,)
    weights = Weights(
        embeddings=tensors.get("embeddings.word_embeddings.weight", (arch.vocab, width)),
        positions=tensors.get("embeddings.position_embeddings.weight", (arch.max_positions, width)),
        token_type=token_type, layers=layers, embedding_project=widen,
        embedding_norm=Norm("layer", tensors.get("embeddings.LayerNorm.weight", (width,)),
                            tensors.get("embeddings.LayerNorm.bias", (width,)), eps),
    )
    return Built(arch, weights)
