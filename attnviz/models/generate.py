"""A decoder writing, step by step: each new piece from the K/V cache (engine.extend: one query row per head), what
the model offered before sampling, the set top-k and top-p kept, and the piece chosen.

    from attnviz import models
    written = models.load("smollm2").generate("When he saw his owner, the dog was", steps=8)
    written.text                 # the prompt and the pieces written
    written.run.weights          # (L, H, n, n) over the prompt and the new pieces, every layer
    written.steps[0].kept        # the pieces the sampler could draw at the first step

What Next word draws from, on one run:

    run = model.run("When he saw his owner, the dog was")
    probs = models.next_distribution(torch.from_numpy(run.next_logits), temperature=0.7, top_k=50, top_p=0.95)
    ids, labels = models.top_pieces(model, probs.numpy(), 5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnviz._deprecated import renamed, warn
from attnviz.models.errors import ENGINE_FAMILIES, ModelError, a_or_an
from attnviz.models.result import Run

MAX_STEPS = 64
OFFERED = 10  # each step keeps this many of the pieces offered, the most likely, before sampling


@dataclass
class Step:
    """One step of a generation."""

    offered: np.ndarray  # int (k,) the pieces offered: the most likely next, before top-k and top-p (T = 1 when greedy)
    probs: np.ndarray  # float32 (k,) their probabilities under the temperature
    kept: np.ndarray  # int: the pieces top-k and top-p keep, most likely first (greedy: the one chosen)
    chosen: int
    p_chosen: float = 0.0  # the chosen piece's probability under the temperature, before top-k and top-p
    p_drawn: float = 0.0  # the chosen piece's P(drawn): the sampler's distribution (next_distribution), 1 when greedy

    @property
    def top(self) -> np.ndarray:
        warn("Step.top", "Step.offered")
        return self.offered


@dataclass
class Generation:
    """What the model wrote after `prompt` pieces: the new pieces, the run over all of them and every step."""

    prompt: int  # the prompt's pieces
    new_ids: list[int]
    run: Run
    steps: list[Step]
    stopped: str  # "steps" (all were written) or "end of text" (the model's end piece was chosen)

    @property
    def text(self) -> str:
        """The prompt and the pieces written (an encoder–decoder's: its output, read after the start piece)."""
        written = self.run.attention.get("decoder")
        return written.queries.text if written is not None else self.run.pieces.text

    @property
    def nbytes(self) -> int:
        return self.run.nbytes + sum(s.offered.nbytes + s.probs.nbytes + s.kept.nbytes for s in self.steps)


def check(model, steps, temperature, top_k, top_p, prompt: int) -> int:
    """The number of steps to take, or a ModelError that says what to change."""
    if not getattr(model, "can_generate", False):
        raise ModelError(f"{model.name} is {a_or_an(model.kind)}; writing piece by piece needs a decoder computed by "
                         f"attnviz's engine (it computes {ENGINE_FAMILIES}), or an encoder–decoder (T5, BART, Marian).")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ModelError(f"steps must be a whole number from 1 to {MAX_STEPS}, got {steps!r}.")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise ModelError(f"temperature must be a number ≥ 0 (0: greedy), got {temperature!r}.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ModelError(f"top_k must be a whole number ≥ 0 (0: every piece), got {top_k!r}.")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise ModelError(f"top_p must be in (0, 1], got {top_p!r}.")
    room = model.max_pieces - prompt
    if room < 1:
        raise ModelError(f"The prompt has {prompt:,} pieces, and {model.name} reads at most {model.max_pieces:,} here: "
                         "there is no room to write. Shorten the prompt.")
    return min(steps, room)


def next_distribution(logits_row, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(vocab,) the probabilities a sampler draws the next token from: softmax(logits / T), kept to the top_k most
    likely (0: all) and to the smallest set whose mass reaches top_p, renormalised. T = 0 is greedy (one-hot).
    `logits_row` (vocab,): a tensor, or an array (a run's next_logits)."""
    logits_row = torch.as_tensor(logits_row).float()  # (vocab,)
    if temperature <= 0:
        return torch.nn.functional.one_hot(logits_row.argmax(), logits_row.numel()).float()  # (vocab,)
    probs = torch.softmax(logits_row / temperature, -1)  # (vocab,)
    order = torch.argsort(probs, descending=True)  # (vocab,)
    ranked = probs[order]  # (vocab,)
    keep = torch.ones_like(ranked, dtype=torch.bool)  # (vocab,)
    if top_k > 0:
        keep[top_k:] = False
    if top_p < 1.0:
        before = torch.cumsum(ranked, 0) - ranked  # (vocab,) the mass of the tokens ranked above
        keep &= before < top_p  # the first token always stays
    kept = torch.zeros_like(probs)  # (vocab,)
    kept[order[keep]] = ranked[keep]
    return kept / kept.sum()


def next_piece(logits_row, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, *,
               seed: int | None = None, position: int = 0) -> int:
    """One next piece from logits (vocab,): the most likely where `seed` is None, else drawn from next_distribution
    with a generator seeded by seed + position (the pieces read so far), so the same text, settings and seed give the
    same piece, as a link replays it (the Decoder's two "Next word" buttons)."""
    probs = next_distribution(logits_row, temperature, top_k, top_p)  # (vocab,)
    if seed is None:
        return int(probs.argmax())
    generator = torch.Generator().manual_seed(int(seed) + int(position))
    return int(torch.multinomial(probs, 1, generator=generator))


def sampler_text(temperature: float, top_k: int = 0, top_p: float = 1.0, seed: int | None = None) -> str:
    """The sampler next_distribution draws from, in words ("T = 0.7, top-k 50, top-p 0.95, seed 3"); the seed only
    where it matters (T > 0)."""
    if temperature <= 0:
        return "T = 0: greedy"
    return (f"T = {temperature:g}" + (f", top-k {top_k}" if top_k else "") + (f", top-p {top_p:g}" if top_p < 1 else "")
            + (f", seed {seed}" if seed is not None else ""))


def top_pieces(model, probs: np.ndarray, k: int) -> tuple[np.ndarray, list[str]]:
    """The `k` most likely next pieces of a distribution (vocab,), those with any probability, most likely first:
    their ids and labels."""
    likeliest = np.argsort(-probs, kind="stable")[:k]  # (≤k,)
    likeliest = likeliest[probs[likeliest] > 0]
    return likeliest, model.reader.labels([int(i) for i in likeliest])


def choose(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator: torch.Generator,
           offers: int = OFFERED) -> Step:
    """One step's choice from next-piece logits (vocab,): the `offers` most likely pieces under the temperature,
    the set top-k and top-p keep, and the piece chosen (the most likely at T = 0, else drawn with `generator`)."""
    logits = logits.double()  # (vocab,)
    tempered = torch.softmax(logits / (temperature if temperature > 0 else 1.0), -1)  # (vocab,)
    best = torch.topk(tempered, min(offers, len(tempered)))  # (k,)
    chosen_from = next_distribution(logits, temperature, top_k, top_p)  # (vocab,) the sampler's distribution
    kept = torch.nonzero(chosen_from).flatten()  # (m,)
    kept = kept[torch.argsort(chosen_from[kept], descending=True)]  # most likely first
    if temperature > 0:
        chosen = int(torch.multinomial(chosen_from.double(), 1, generator=generator))
    else:
        chosen = int(logits.argmax())
    return Step(best.indices.numpy(), best.values.float().numpy(), kept.numpy(), chosen, float(tempered[chosen]),
                float(chosen_from[chosen]))


def generate(model, text: str, steps: int = 16, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             seed: int = 0, offers: int = OFFERED, **old) -> Generation:
    """`steps` new pieces after `text` (fewer where the model's end piece comes first, or the pieces it reads run
    out). Temperature 0 is greedy; otherwise each piece is drawn from softmax(z / T) kept to the top_k most likely
    and the smallest set whose mass reaches top_p, with a generator seeded by `seed` (the same seed, the same text).
    Each step computes one query row per head from the K/V cache, and keeps the `offers` most likely pieces."""
    offers = renamed(old, "top", "offers", offers, "generate")
    if model.kind == "encoder-decoder":
        return generate_seq2seq(model, text, steps, temperature, top_k, top_p, seed, offers)
    run = model.run(text)
    steps = check(model, steps, temperature, top_k, top_p, len(run.pieces))
    generator = torch.Generator().manual_seed(int(seed))
    ends = set(getattr(model, "end_ids", ()))
    made, new_ids, stopped = [], [], "steps"
    for _ in range(steps):
        step = choose(torch.from_numpy(run.next_logits), temperature, top_k, top_p, generator, offers)
        made.append(step)
        new_ids.append(step.chosen)
        run = model.extend(run, step.chosen)
        if step.chosen in ends:
            stopped = "end of text"
            break
    return Generation(len(run.pieces) - len(new_ids), new_ids, run, made, stopped)


def generate_seq2seq(model, text: str, steps: int, temperature: float, top_k: int, top_p: float, seed: int,
                     offers: int = OFFERED) -> Generation:
    """An encoder–decoder computed by transformers writing after the source `text`: the encoder reads the source
    once, each step the decoder reads its pieces so far ([start] + those written) against it, and the run at the end
    holds the encoder's, the decoder's and the cross-attention over the whole output (the decoder's prompt is its
    start piece)."""
    source = model.tokenize(text)
    steps = check(model, steps, temperature, top_k, top_p, 1)
    generator = torch.Generator().manual_seed(int(seed))
    ends = set(model.end_ids)
    encoded = model.encode(source)
    ids, made, stopped = [model.start], [], "steps"
    for _ in range(steps):
        step = choose(model.next_logits(encoded, ids), temperature, top_k, top_p, generator, offers)
        made.append(step)
        ids.append(step.chosen)
        if step.chosen in ends:
            stopped = "end of text"
            break
    return Generation(1, ids[1:], model.run_target(source, ids), made, stopped)
