"""What a model computed on a text: its pieces, every head's attention weights and the scores before the softmax,
and what else the model's kind gives (a decoder's next-piece logits, an encoder–decoder's three kinds of attention)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.models.engine import Architecture, Intervention, Trace, rules, scores as trace_scores
from attnviz.models.pieces import Pieces, cut

# The smallest weight float32 holds: a weight the softmax left at exactly 0 is read as this one (see log_scores).
SMALLEST_WEIGHT = float(np.finfo(np.float32).smallest_subnormal)


def log_scores(weights: np.ndarray) -> np.ndarray:
    """ln α: scores that give exactly these weights under softmax (a row's scores are known only up to a constant,
    which the softmax removes), for weights computed elsewhere (by transformers). A weight of exactly 0 (masked, or
    below what float32 holds) becomes ln(SMALLEST_WEIGHT) ≈ −103.3, so every score is finite; masks hide those cells."""
    return np.log(np.maximum(weights, SMALLEST_WEIGHT)).astype(np.float32)


@dataclass
class Attention:
    """One kind of attention of a run, over every layer and head."""

    name: str  # "self"; for an encoder–decoder "encoder", "decoder" or "cross"
    title: str  # for people
    weights: np.ndarray  # float32 (L, H, Tq, Tk); each row sums to 1
    queries: Pieces
    keys: Pieces
    causal: bool  # a query reads no key after it


KIND_TITLES = {"self": "Self-attention", "encoder": "Encoder self-attention", "decoder": "Decoder self-attention (causal)",
               "cross": "Cross-attention: decoder queries, encoder keys"}


@dataclass(eq=False)
class Run:
    """A model's attention on a text.

    `weights` (L, H, n, n) and `scores` (the same shape, before the softmax) are the main attention's: the model's
    self-attention, or an encoder–decoder's encoder. `attention` holds every kind the model has by name. Computed by
    attnviz's engine, a run keeps each layer's queries, keys and values (`traces`) and the hidden states; computed
    by transformers it has neither, and its scores are ln α (log_scores)."""

    model: str  # the model's name
    kind: str  # "encoder", "decoder" or "encoder-decoder"
    computed_by: str  # "attnviz" or "transformers"
    pieces: Pieces
    attention: dict[str, Attention]
    hidden: np.ndarray | None = None  # float32 (L + 1, n, d): the embeddings, then each layer's output
    traces: list[Trace] | None = None  # on the CPU
    next_logits: np.ndarray | None = None  # float32 (vocab,): a decoder's logits for the piece after the last
    architecture: Architecture | None = field(default=None, repr=False)
    intervention: Intervention | None = None  # what the forward changed (attnviz.effects), None for the model as it is
    logits: np.ndarray | None = None  # float32 (n, vocab): a decoder's logits at every position, where asked for

    def __repr__(self) -> str:
        """A line, not the arrays: a notebook or a prompt that shows a run prints what it is."""
        n, shape = len(self.pieces.ids), self.weights.shape
        changed = "" if self.intervention is None else f", changed by {type(self.intervention).__name__}"
        return (f"Run({self.model!r}, {self.kind}, {n} pieces, {shape[0]} layers × {shape[1]} heads, computed by "
                f"{self.computed_by}{changed})")

    def allowed(self, kind: str | None = None, layer: int | None = None) -> np.ndarray | None:
        """(Tq, Tk) which keys each query of attention `kind` (the main one by default) may read, by the rule
        Model.allowed asks (engine.rules.Keys): the causal mask where that attention is causal, and layer `layer`'s
        window where the engine computed the run and the layer has one; None where every query reads every key."""
        attention = self.attention[kind] if kind else self.main
        windowed = layer is not None and self.architecture is not None and attention.name == "self"
        keys = rules.keys(self.architecture, layer) if windowed else rules.Keys(attention.causal)
        return keys.matrix(*attention.weights.shape[-2:])

    @property
    def main(self) -> Attention:
        return next(iter(self.attention.values()))

    @property
    def weights(self) -> np.ndarray:
        return self.main.weights

    @property
    def tokens(self) -> list[str]:
        return self.pieces.tokens

    @property
    def layers(self) -> int:
        return self.weights.shape[0]

    @property
    def heads(self) -> int:
        return self.weights.shape[1]

    def head_scores(self, layer: int, head: int, kind: str | None = None) -> np.ndarray:
        """(Tq, Tk) one head's scores before the softmax: QKᵀ/√d_k from the engine's queries and keys, or ln α for
        attention computed elsewhere. Layer and head count from 0."""
        if self.traces is not None and (kind is None or kind == self.main.name):
            return trace_scores(self.architecture, self.traces[layer], head).numpy()
        return log_scores(self.attention[kind or self.main.name].weights[layer, head])

    @functools.cached_property
    def scores(self) -> np.ndarray:
        """(L, H, n, n) every head's scores (head_scores), computed when first asked for."""
        if self.traces is not None:
            return torch.stack([trace_scores(self.architecture, t) for t in self.traces]).numpy()
        return log_scores(self.weights)

    @property
    def scores_are_logs(self) -> bool:
        return self.traces is None

    @functools.cached_property
    def words(self) -> Words:
        return words(self.pieces)

    @property
    def nbytes(self) -> int:
        arrays = [a.weights for a in self.attention.values()] + [self.hidden, self.next_logits, self.logits]
        held = sum(a.nbytes for a in arrays if a is not None)
        return held + sum(t.nbytes for t in self.traces or [])

    @property
    def sinks(self) -> np.ndarray:
        """(L, H) each head's mean weight on the first piece, over the queries after it (all of them for one piece)."""
        w = self.weights
        return w[:, :, 1:, 0].mean(-1) if w.shape[-1] > 1 else w[:, :, :, 0].mean(-1)


# ---------------------------------------------------------------- pieces as words


@dataclass
class Words:
    labels: list[str]  # each word's text (special pieces as they are)
    groups: list[list[int]]  # the pieces of each word, in order
    unknown: list[bool]  # a piece of the word stands for characters the vocabulary lacks
    special: list[bool]  # the word is a special piece ([CLS], <s>, …)


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
    labels = [pieces.tokens[g[0]] if pieces.words[g[0]] is None
              else cut(pieces.text[pieces.spans[g[0]][0]: pieces.spans[g[-1]][1]].strip() or pieces.labels()[g[0]])
              for g in groups]
    return Words(labels, groups, [any(pieces.unknown[i] for i in g) for g in groups],
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
