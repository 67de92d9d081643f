"""What a head does, measured: every head of a model scored over a corpus against the patterns interpretability work
names (previous piece, duplicate piece, induction, the first-piece sink, itself, [CLS] and [SEP], local, positional),
and what a head moves from each key, ‖α_ij f(x_j)‖ (Kobayashi et al., 2020).

    from attnviz import heads, models
    model = models.load("smollm2")
    found = heads.measure(model)                 # once per model; about 11 s for SmolLM2 on two CPU cores
    found.top("induction", 3)                    # [(layer, head, score), …], counted from 0
    found.scores["sink"]                         # (layers, heads)

The scores. A pattern P (n, n) marks the cells a head of that type attends to. A head's score on one sequence is
TransformerLens's "mul" measure Σ α∘P / Σ α, taken over the rows where P marks a cell (`rows="all"`: over every row,
as TransformerLens does, so a row with nothing to find counts as 0); the score over the corpus is its mean over the
sequences where P marks a cell. Previous piece, sink, itself, [CLS], [SEP] and local are scored on the generated
sentences (`corpus()`); duplicate and induction on the induction probe: random pieces of the model's vocabulary,
repeated twice, seeded (Olsson et al., 2022). Positional is 1 minus the mean total-variation distance between a head's
offset profile on each sentence (the mean over its rows of the weight at each offset j − i) and its mean profile: 1
where the head looks at the same offsets on every sentence, whatever the words.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from attnviz.cache import content_key
from attnviz.models.pieces import TextError

SCORES = {
    "previous": "previous piece",
    "duplicate": "duplicate piece",
    "induction": "induction",
    "sink": "first-piece sink",
    "self": "itself",
    "cls": "[CLS] (the opening special piece)",
    "sep": "[SEP] (the closing special piece)",
    "local": "local (within ±2)",
    "positional": "positional (the same offsets on every sentence)",
}
DEFINITIONS = {
    "previous": "P_ij = 1 where j = i − 1",
    "duplicate": "P_ij = 1 where j < i and piece j is piece i (on the probe)",
    "induction": "P_ij = 1 where piece j − 1 is piece i, j ≤ i (on the probe: the piece after an earlier copy of i)",
    "sink": "P_i0 = 1 for i ≥ 1",
    "self": "P_ii = 1",
    "cls": "P_ic = 1, c the opening special piece",
    "sep": "P_is = 1, s the closing special piece",
    "local": "P_ij = 1 where |i − j| ≤ 2",
    "positional": "1 − mean over sentences of ½ Σ_δ |π_s(δ) − π̄(δ)|, π_s(δ) = mean over rows of α_i,i+δ",
}
ON_PROBE = ("duplicate", "induction")
PROBE_PIECES = 24  # each probe: this many random pieces, then the same again
PROBES = 8
CORPUS_SIZE = 240
SEED = 0
SPAN = 32  # offsets up to ±31 are told apart in the positional score


class HeadsError(ValueError):
    """What cannot be measured (an empty corpus, a model with no heads, a sequence of one piece), in words."""


# ---------------------------------------------------------------- the corpus

_NAMES = ["Mary", "John", "Alice", "Bob", "Sara", "Tom", "Anna", "David", "Emma", "James", "Lucy", "Peter"]
_PLACES = ["the store", "the park", "the station", "the library", "the market", "school", "the river", "the office"]
_THINGS = ["a drink", "a book", "the keys", "a letter", "an apple", "the ball", "a ticket", "the map", "a coat"]
_ANIMALS = ["dog", "cat", "horse", "bird", "fox", "rabbit", "cow", "mouse"]
_ADJECTIVES = ["happy", "tired", "hungry", "quiet", "old", "small", "brave", "sleepy", "angry", "calm"]
_VERBS = ["saw", "followed", "helped", "called", "found", "watched", "thanked", "met"]
_TEMPLATES = [
    "When {a} and {b} went to {place}, {b} gave {thing} to {a}.",
    "Then {a} and {b} had a long day at {place}. {a} gave {thing} to {b}.",
    "When he saw his owner, the {animal} was {adj}, so he wagged his tail.",
    "The {adj} {animal} {verb} the {animal2} near {place}, and the {animal2} ran away.",
    "{a} {verb} {b} at {place} and said that {b} looked {adj}.",
    "After the rain, {a} took {thing} to {place} because {b} asked for it.",
    "The {animal} and the {animal2} slept by the fire while {a} read to {b}.",
    "Every morning {a} walks to {place}, and every evening {a} walks home.",
    "{a} lost {thing} at {place}; {b} found {thing} the next day.",
    "The {adj} {animal} looked at the {animal}, and then at {a}.",
    "If {a} is {adj}, {b} will bring {thing} from {place}.",
    "{a} told {b} that the {animal} was {adj} and that {place} was closed.",
]


def corpus(size: int = CORPUS_SIZE, seed: int = SEED) -> list[str]:
    """`size` English sentences generated from the templates above (seeded; no outside text, so no licence to
    state): names and nouns that repeat inside a sentence, so duplicate pieces occur, and lengths of about 10 to 25
    pieces."""
    rng = random.Random(seed)
    sentences = []
    for k in range(size):
        a, b = rng.sample(_NAMES, 2)
        animal, animal2 = rng.sample(_ANIMALS, 2)
        sentences.append(_TEMPLATES[k % len(_TEMPLATES)].format(
            a=a, b=b, place=rng.choice(_PLACES), thing=rng.choice(_THINGS), animal=animal, animal2=animal2,
            adj=rng.choice(_ADJECTIVES), verb=rng.choice(_VERBS)))
    return sentences


# ---------------------------------------------------------------- patterns


def previous_pattern(n: int) -> np.ndarray:
    return np.eye(n, k=-1, dtype=bool)  # (n, n)


def duplicate_pattern(ids: list[int]) -> np.ndarray:
    same = np.equal.outer(ids, ids)  # (n, n)
    return np.tril(same, k=-1)


def induction_pattern(ids: list[int]) -> np.ndarray:
    """TransformerLens's: the duplicate pattern moved one key to the right (the key after an earlier copy)."""
    duplicate = duplicate_pattern(ids)  # (n, n)
    pattern = np.zeros_like(duplicate)
    pattern[:, 1:] = duplicate[:, :-1]
    return pattern


def column_pattern(n: int, column: int, first_row: int = 0) -> np.ndarray:
    pattern = np.zeros((n, n), bool)
    pattern[first_row:, column] = True
    return pattern


def local_pattern(n: int, width: int = 2) -> np.ndarray:
    offsets = np.subtract.outer(np.arange(n), np.arange(n))  # (n, n) i − j
    return np.abs(offsets) <= width


def specials(special: list[bool]) -> tuple[int | None, int | None]:
    """The opening and closing special pieces' positions ([CLS] and [SEP], <s> and </s>), where the text has them."""
    n = len(special)
    opening = 0 if n and special[0] else None
    closing = n - 1 if n > 1 and special[-1] else None
    return opening, closing


def patterns(ids: list[int], special: list[bool], *, encoder: bool) -> dict[str, np.ndarray]:
    """The patterns of one sentence, by score name (positional has none; [CLS] and [SEP] only for an encoder's text that
    has them)."""
    n = len(ids)
    found = {"previous": previous_pattern(n), "sink": column_pattern(n, 0, 1), "self": np.eye(n, dtype=bool),
             "local": local_pattern(n), "duplicate": duplicate_pattern(ids), "induction": induction_pattern(ids)}
    if encoder:
        opening, closing = specials(special)
        if opening is not None:
            found["cls"] = column_pattern(n, opening)
        if closing is not None:
            found["sep"] = column_pattern(n, closing)
    return found


# ---------------------------------------------------------------- scores


def pattern_score(weights: np.ndarray, pattern: np.ndarray, rows: str = "covered") -> np.ndarray | None:
    """Σ α∘P / Σ α for every head of weights (..., n, n): over the rows where P marks a cell ("covered"), or over
    every row ("all", TransformerLens's "mul"). None where P marks no cell (the sequence says nothing of it)."""
    covered = pattern.any(1)  # (n,)
    if not covered.any():
        return None
    keep = covered if rows == "covered" else np.ones_like(covered)
    w = weights[..., keep, :]  # (..., m, n)
    return (w * pattern[keep]).sum((-1, -2)) / w.sum((-1, -2))  # (...)


def offset_profile(weights: np.ndarray, span: int = SPAN) -> np.ndarray:
    """(..., 2·span − 1) the mean over rows of the weight at each offset δ = j − i, from −(span − 1) to span − 1 (the
    farther offsets pooled into the two ends). A row sums to 1, so the profile does too."""
    n = weights.shape[-1]
    profile = np.zeros(weights.shape[:-2] + (2 * span - 1,), np.float64)  # (..., 2·span − 1)
    for offset in range(1 - n, n):
        at = min(max(offset, 1 - span), span - 1) + span - 1
        profile[..., at] += weights.diagonal(offset, -2, -1).sum(-1)  # (...) the cells (i, i + δ)
    return profile / n


def positional_score(profiles: list[np.ndarray], reduce=None) -> np.ndarray:
    """1 − the mean over sentences of the total-variation distance between each sentence's offset profile (..., k)
    and their mean. `reduce(array)` sums an array over processes that each hold some of the sentences (measure())."""
    reduce = reduce or (lambda array: array)
    stacked = np.asarray(profiles)  # (s, ..., k); a process may hold none of them
    count = float(reduce(np.array([len(stacked)], np.float64))[0])
    mean = reduce(stacked.sum(0)) / count  # (..., k)
    return 1.0 - reduce(0.5 * np.abs(stacked - mean).sum(-1).sum(0)) / count  # (...)


@dataclass
class Measured:
    """Every head's scores over a corpus: `scores[name]` is (layers, heads), each in 0 … 1."""

    model: str
    scores: dict[str, np.ndarray]
    sentences: int
    probes: int
    seconds: float = 0.0
    control: dict[str, np.ndarray] = field(default_factory=dict)  # the offset score on the repeat and on its shuffle

    def top(self, name: str, count: int = 5) -> list[tuple[int, int, float]]:
        """The `count` heads that score highest for `name`: (layer, head, score), counted from 0, best first."""
        values = self.scores[name]
        order = np.argsort(-values, axis=None, kind="stable")[:count]
        return [(int(l), int(h), float(values[l, h])) for l, h in zip(*np.unravel_index(order, values.shape))]


def measure(model, sentences: list[str] | None = None, *, probes: int = PROBES, probe_pieces: int = PROBE_PIECES,
            seed: int = SEED, rows: str = "covered", progress=None, part: tuple[int, int] = (0, 1),
            reduce=None) -> Measured:
    """Every head of `model` (anything attnviz.models loads) scored over `sentences` (default corpus()) and the
    induction probe. `progress(done, total)` hears of each sequence measured. `part` (rank, world): this process
    measures every world-th sentence and probe from rank on, and `reduce(array)` sums an array over the processes
    (torch.distributed's all-reduce; attnviz.heads_cli sets both): every process gets the whole corpus's scores."""
    started = time.perf_counter()
    sentences = corpus() if sentences is None else [s for s in sentences if s and s.strip()]
    if not sentences:
        raise HeadsError("The corpus is empty: give at least one sentence to measure the heads on.")
    if model.layers < 1 or model.heads < 1:
        raise HeadsError(f"{model.name} has no attention heads to measure.")
    if model.kind == "encoder-decoder":
        raise HeadsError(f"{model.name} is an encoder–decoder, whose heads read two texts; attnviz measures the heads "
                         "of encoders and decoders.")
    rank, world = part
    reduce = reduce or (lambda array: array)
    encoder = model.kind != "decoder"
    shape = (model.layers, model.heads)
    mine = sentences[rank::world]
    found_probes = probe_list(model, probes, probe_pieces, seed)[rank::world]
    total, done = len(mine) + len(found_probes), 0
    sums = {name: np.zeros(shape) for name in SCORES if name not in ON_PROBE and name != "positional"}
    counts = {name: 0.0 for name in sums}
    profiles = []
    readable = []
    for sentence in mine:
        try:
            readable.append(model.tokenize(sentence))
        except TextError:  # longer than the model reads: the other sentences say enough
            readable.append(None)
    for pieces, weights in batched_weights(model, readable):
        if pieces is not None and len(pieces) >= 2:
            for name, pattern in patterns(pieces.ids, pieces.special, encoder=encoder).items():
                score = pattern_score(weights, pattern, rows) if name not in ON_PROBE else None
                if score is not None:
                    sums[name] += score  # (L, H)
                    counts[name] += 1
            profiles.append(offset_profile(weights))  # (L, H, 2·SPAN − 1)
        done += 1
        if progress:
            progress(done, total)
    counts = dict(zip(counts, reduce(np.array(list(counts.values())))))
    sums = {name: reduce(value) for name, value in sums.items()}
    if not any(counts.values()):
        raise HeadsError("No sentence of the corpus gives the model two pieces to read (each is one piece, or longer "
                         "than the model reads): a head needs two pieces to choose between.")
    scores = {name: (sums[name] / counts[name]).astype(np.float32) for name in sums if counts[name]}
    local = np.stack(profiles) if profiles else np.zeros((0, *shape, 2 * SPAN - 1))  # (s, L, H, k)
    if reduce(np.array([len(local)], np.float64))[0] >= 2:  # one sentence is trivially "the same offsets everywhere"
        scores["positional"] = positional_score(local, reduce).astype(np.float32)

    def counted(probe_done: int) -> None:
        if progress:
            progress(done + probe_done, total)

    probe_sums = {name: reduce(value) for name, value in probe_totals(model, found_probes, rows, counted).items()}
    count = float(reduce(np.array([len(found_probes)], np.float64))[0])
    means = {name: (value / count).astype(np.float32) for name, value in probe_sums.items()}
    scores.update({name: means[name] for name in ON_PROBE})
    ordered = {name: scores[name] for name in SCORES if name in scores}
    control = {name: means[name] for name in ("repeat", "shuffled")}
    return Measured(model.name, ordered, len(sentences), probes, time.perf_counter() - started, control)


BATCH = 32  # sequences per forward in the corpus pass (16 → 32: 9.2 → 8.3 s for SmolLM2 here)


def batched_weights(model, sequences: list):
    """(pieces, weights (L, H, n, n)) for each of `sequences` (Pieces, or None for one the model cannot read, given
    back with None weights), shortest first. A model attnviz's engine computes reads them BATCH at a time in one padded
    forward, so that little of a batch is padding; another model reads one at a time."""
    yield from ((None, None) for pieces in sequences if pieces is None)
    ordered = sorted((p for p in sequences if p is not None), key=len)
    for start in range(0, len(ordered), BATCH):
        batch = ordered[start:start + BATCH]
        if hasattr(model, "batch_weights"):
            yield from zip(batch, model.batch_weights(batch))
        else:
            yield from ((pieces, model.run_pieces(pieces).weights) for pieces in batch)


# ---------------------------------------------------------------- the induction probe


@dataclass
class Probe:
    """Random pieces repeated twice, between the model's own special pieces (lead of them before): `repeated` is
    lead + first + first + trail, `shuffled` the control, lead + first + a shuffle of first + trail."""

    repeated: object  # attnviz.models.Pieces
    shuffled: object
    lead: int
    length: int  # the random pieces in each copy

    def repeat_pattern(self) -> np.ndarray:
        """(n, n) each second-copy position i's cell i − length + 1: the piece after its first occurrence in
        `repeated`; in `shuffled` the same cells hold no such piece."""
        n = len(self.repeated)
        pattern = np.zeros((n, n), bool)
        rows = np.arange(self.lead + self.length, self.lead + 2 * self.length)  # the second copy
        pattern[rows, rows - self.length + 1] = True
        return pattern


@functools.lru_cache(maxsize=8)
def vocabulary(reader) -> tuple[int, ...]:
    """The ids a probe draws from: the model's ordinary pieces, neither special nor unused nor part of a character
    (found once per model: a scan of its whole vocabulary)."""
    tokenizer = reader.tokenizer
    added = set(getattr(tokenizer, "get_added_tokens_decoder", dict)())
    ids = []
    for i in range(tokenizer.get_vocab_size()):
        token = tokenizer.id_to_token(i)
        if i in added or not token or "unused" in token or token.startswith(("<", "[")) and token.endswith((">", "]")):
            continue
        if reader.style == "bytes" and "\ufffd" in tokenizer.decode([i]):
            continue
        ids.append(i)
    return tuple(ids)


def pieces_of(reader, ids: list[int], special: list[bool]):
    """Pieces made from ids (no text gave them), labelled as the model's reader labels them."""
    from attnviz.models.pieces import Pieces

    tokenizer = reader.tokenizer
    tokens = [tokenizer.id_to_token(i) or "" for i in ids]
    words, k = [], 0
    for s in special:
        words.append(None if s else k)
        k += not s
    return Pieces(tokens, list(ids), words, [(0, 0)] * len(ids), tokenizer.decode(ids), list(special),
                  [False] * len(ids), reader.labels(ids))


def probes(model, count: int = PROBES, length: int = PROBE_PIECES, seed: int = SEED) -> list[Probe]:
    """`count` probes of `length` random pieces each (seeded), cut to what the model reads."""
    reader = model.reader
    encoding = reader.tokenizer.encode("the")
    marks = [bool(m) for m in encoding.special_tokens_mask]
    words = [k for k, m in enumerate(marks) if not m]  # where "the" is: the special pieces before it lead, after it trail
    lead, trail = encoding.ids[: words[0]], encoding.ids[words[-1] + 1:]
    length = min(length, (reader.max_pieces - len(lead) - len(trail)) // 2)
    if length < 2:
        raise HeadsError(f"{model.name} reads too few pieces for a probe of two pieces repeated.")
    pool = vocabulary(reader)
    if len(pool) < length:
        raise HeadsError(f"{model.name}'s vocabulary has {len(pool)} ordinary pieces, too few for a probe.")
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        first = rng.sample(pool, length)
        mixed = first[:]
        while mixed == first:
            rng.shuffle(mixed)
        special = [True] * len(lead) + [False] * 2 * length + [True] * len(trail)
        found.append(Probe(pieces_of(reader, lead + first + first + trail, special),
                           pieces_of(reader, lead + first + mixed + trail, special), len(lead), length))
    return found


def cut_short(model, probe: Probe, *, shuffled: bool = False, cut: int = 3):
    """The probe's pieces (or its shuffled control's) with the second copy `cut` pieces short of its end, so that the
    piece after the last is a repeat for the model to predict."""
    whole = probe.shuffled if shuffled else probe.repeated
    keep = len(whole) - cut
    return pieces_of(model.reader, whole.ids[:keep], whole.special[:keep])


def repeats_predicted(model, run, lead: int, length: int) -> tuple[int, int, int | None]:
    """On a probe's run (`lead` special pieces, then `length` random ones, then a second copy, maybe cut short or
    shuffled): at how many second-copy positions the model's most likely next piece is the piece that followed the same
    piece in the first copy, out of how many, and that piece for the last position (None where the first copy has none
    after it)."""
    ids = run.pieces.ids
    after_first = {ids[i]: ids[i + 1] for i in range(lead, lead + length - 1)}  # piece → the piece after it
    predicted, _ = model.logit_lens(run.hidden[-1:])  # (1, n, 1) the model's own most likely next piece
    second = range(lead + length, len(ids))
    hits = sum(int(predicted[0, i, 0]) == after_first.get(ids[i]) for i in second)
    return hits, len(second), after_first.get(ids[-1])


def probe_scores(model, count: int, length: int, seed: int,
                 rows: str = "covered") -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Duplicate and induction scores over the probes (the mean over probes), and the control: each head's weight on
    the cells of Probe.repeat_pattern on the repeated probes and on their shuffles."""
    found = probes(model, count, length, seed)
    means = {name: (value / len(found)).astype(np.float32) for name, value in probe_totals(model, found, rows).items()}
    return {n: means[n] for n in ON_PROBE}, {n: means[n] for n in ("repeat", "shuffled")}


def probe_list(model, count: int, length: int, seed: int) -> list[Probe]:
    return probes(model, count, length, seed) if count else []


def probe_totals(model, found: list[Probe], rows: str = "covered", progress=None) -> dict[str, np.ndarray]:
    """The sums over `found` probes of each head's duplicate, induction, repeat and shuffled scores (L, H)."""
    totals = {name: np.zeros((model.layers, model.heads)) for name in ("duplicate", "induction", "repeat", "shuffled")}
    sequences = [p for probe in found for p in (probe.repeated, probe.shuffled)]
    computed = {id(pieces): weights for pieces, weights in batched_weights(model, sequences)}
    for k, probe in enumerate(found):
        repeated = computed[id(probe.repeated)]  # (L, H, n, n)
        ids = probe.repeated.ids
        totals["duplicate"] += pattern_score(repeated, duplicate_pattern(ids), rows)
        totals["induction"] += pattern_score(repeated, induction_pattern(ids), rows)
        offsets = probe.repeat_pattern()  # (n, n)
        totals["repeat"] += pattern_score(repeated, offsets, rows)
        totals["shuffled"] += pattern_score(computed[id(probe.shuffled)], offsets, rows)
        if progress:
            progress(k + 1)
    return totals


# ---------------------------------------------------------------- what a head moves


def moved_norms(model, run, layer: int) -> np.ndarray:
    """(H, n) ‖f_h(x_j)‖ for every head h of `layer` (from 0) and key j, f_h(x) = (x W_v + b_v) W_o^(h): the vector head
    h adds to a query's output for each unit of weight on key j (W_o^(h): W_o's rows that read head h; b_o, added once
    whatever the weights, is left out, as Kobayashi et al. do). From the run's own values (attnviz's engine only)."""
    if run.traces is None:
        raise HeadsError("What a head moves needs the model's values and output matrix, which only attnviz's engine "
                         "keeps; this model is computed by transformers.")
    value = run.traces[layer].value.float()  # (KV, n, dh) x W_v + b_v
    value = value.repeat_interleave(model.group, 0)  # (H, n, dh) each query head's key/value head
    w_out = model.weights.layers[layer].w_out.float().cpu()  # (H·dh, d)
    per_head = w_out.view(model.heads, model.head_dim, -1)  # (H, dh, d)
    return torch.linalg.vector_norm(value @ per_head, dim=-1).numpy()  # (H, n, d) -> (H, n)


def moved(weights: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """‖α_ij f(x_j)‖ = α_ij ‖f(x_j)‖ (α ≥ 0): weights (..., n, n) times each key's norm (..., n)."""
    return weights * norms[..., None, :]


@dataclass
class Shares:
    """Per key of one layer: its share of all the heads' weight and its share of the summed norms they move."""

    weight: np.ndarray  # (n,) Σ_h Σ_i α_ij / Σ α
    norm: np.ndarray  # (n,) Σ_h Σ_i ‖α_ij f_h(x_j)‖ / Σ ‖…‖


def layer_shares(weights: np.ndarray, norms: np.ndarray) -> Shares:
    """Shares of layer weights (H, n, n) with norms (H, n)."""
    weight = weights.sum((0, 1))  # (n,)
    norm = moved(weights, norms).sum((0, 1))  # (n,)
    return Shares(weight / weight.sum(), norm / max(norm.sum(), np.finfo(np.float32).tiny))


def disagreement(shares: Shares, labels: list[str], where: str) -> str:
    """One plain sentence on the key that takes the most weight: its share of the weight and of the norm."""
    top = int(np.argmax(shares.weight))
    said = (f"In {where}, {labels[top]!r} (piece {top}) takes {shares.weight[top]:.0%} of the weight and "
            f"{shares.norm[top]:.0%} of the norm")
    if shares.norm[top] < 0.5 * shares.weight[top]:
        most = int(np.argmax(shares.norm))
        return said + f": weight parked there moves little. The most moved comes from {labels[most]!r} ({shares.norm[most]:.0%})."
    return said + "."


# ---------------------------------------------------------------- kept on disk

FORMAT = 1  # the file's layout and the scores' definitions: a change here makes every kept file stale


def model_key(model) -> str:
    """The model's content: the SHA-256 of its file (a GGUF file, as its de-quantized cache is keyed), or of its
    folder's config.json and weights, wherever they lie."""
    source = Path(model.source)
    if source.is_file():
        return content_key(source)
    files = sorted(p for p in source.iterdir() if p.suffix == ".safetensors" or p.name == "config.json")
    if not files:
        raise HeadsError(f"{model.name}: no weights at {source} to key its head scores by.")
    return hashlib.sha256("".join(content_key(p) for p in files).encode()).hexdigest()[:16]


def corpus_key(sentences: list[str] | None, probes: int, probe_pieces: int, seed: int, rows: str) -> str:
    """The corpus's definition: the sentences (the default corpus by its size and seed), the probes, the rows rule."""
    said = ["default", CORPUS_SIZE] if sentences is None else sentences
    text = json.dumps([FORMAT, said, probes, probe_pieces, seed, rows], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(model, sentences: list[str] | None = None, *, probes: int = PROBES, probe_pieces: int = PROBE_PIECES,
               seed: int = SEED, rows: str = "covered") -> Path:
    """Where the scores of `model` over this corpus are kept: ATTNVIZ_CACHE (default ~/.cache/attnviz)/heads/."""
    from attnviz.cache import cache_root

    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in model.name)[:40]
    return cache_root() / "heads" / f"{name}-{model_key(model)}-{corpus_key(sentences, probes, probe_pieces, seed, rows)}.npz"


def save(found: Measured, path: Path) -> Path:
    """The scores as a .npz of plain arrays (read back with allow_pickle=False), written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"score_{k}": v for k, v in found.scores.items()} | {f"control_{k}": v for k, v in found.control.items()}
    meta = json.dumps({"format": FORMAT, "model": found.model, "sentences": found.sentences, "probes": found.probes,
                       "seconds": found.seconds})
    partial = path.with_name(path.name + f".{os.getpid()}.part")
    with open(partial, "wb") as file:
        np.savez(file, meta=np.array(meta), **arrays)
    os.replace(partial, path)
    return path


def load(path: Path) -> Measured:
    """Scores written by save() (or `attnviz heads --out`); a HeadsError for a file that is not one."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            scores = {k.removeprefix("score_"): data[k].astype(np.float32) for k in data.files if k.startswith("score_")}
            control = {k.removeprefix("control_"): data[k] for k in data.files if k.startswith("control_")}
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        raise HeadsError(f"{path.name} is not a file of head scores attnviz wrote ({error}).") from None
    if meta.get("format") != FORMAT:
        raise HeadsError(f"{path.name} was written by another version of attnviz's head scores.")
    ordered = {name: scores[name] for name in SCORES if name in scores}
    return Measured(meta["model"], ordered, int(meta["sentences"]), int(meta["probes"]), float(meta["seconds"]), control)


def kept(model, sentences: list[str] | None = None) -> Measured | None:
    """The scores kept on disk for this model's content and this corpus, or None."""
    path = cache_path(model, sentences)
    if not path.is_file():
        return None
    try:
        return load(path)
    except HeadsError:
        return None


def cached(model, sentences: list[str] | None = None, *, progress=None) -> Measured:
    """The kept scores, else measure() them and keep them: once per model per machine, not per server."""
    found = kept(model, sentences)
    if found is None:
        found = measure(model, sentences, progress=progress)
        save(found, cache_path(model, sentences))
    return found
