"""Ablation: a head's output removed, or an edge knocked out, and what that does to the next piece: every head's
effect at once (heads batched as copies of the text), the staircase of the strongest heads turned off, and the
control heads drawn beside them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models import engine
from attnviz.models.result import Run
from attnviz.effects.interventions import (
    Ablation, CopyAblation, EffectsError, Knockout, check_heads, check_how, check_piece, engine_model, pairs, pieces_of,
)

COPY_ROWS = 8_192  # the most (copies × pieces) rows one batched layer computes: bounds a batch's memory


def ablate(model, text: str, heads, how: str = "zero") -> Run:
    """The run with the `heads` [(layer, head), …] removed before W_o: "zero" sets a head's output αV to 0, "mean"
    replaces it by its mean over the run's positions. Carries every layer's weights and, for a decoder, `logits` at
    every position (n, vocab)."""
    model = engine_model(model, "ablating a head")
    chosen = Ablation(check_heads(model, heads), check_how(how))
    run = model.run_pieces(pieces_of(model, text), intervention=chosen)
    return with_logits(model, run)


def knock_out(model, text: str, edges, layers=None) -> Run:
    """The run in which each query → key edge of `edges` [(query, key), …] is blocked in `layers` (every layer by
    default): its weight set to 0 and the row renormalised over the keys left, as a mask (Geva et al. 2023)."""
    model = engine_model(model, "knocking out an edge")
    pieces = pieces_of(model, text)
    n = len(pieces)
    blocked = pairs(edges, "edge (query, key)", (n, n), f"the text has pieces 0 … {n - 1}")
    if layers is not None:
        layers = tuple(sorted({int(l) for l in layers}))
        if not layers or not all(0 <= l < model.layers for l in layers):
            raise EffectsError(f"Layers run 0 … {model.layers - 1}, got {list(layers)}.")
    return with_logits(model, model.run_pieces(pieces, intervention=Knockout(blocked, layers)))


def with_logits(model, run: Run) -> Run:
    if model.kind == "decoder" and model.weights.unembed is not None:
        run.logits = model.logits(run)  # (n, vocab)
    return run


# ---------------------------------------------------------------- every head's effect, at once


def head_effects(model, text: str, how: str = "zero", *, piece: int | None = None) -> np.ndarray:
    """(layers, heads) float32: what removing each head (one at a time, as `ablate`) does.

    Decoder: log p(t | text) with the head ablated − log p(t | text) without, at the last position, t the clean run's
    most likely next piece. Negative: the head helped that prediction; positive: it held it back.
    Encoder: 1 − cos(h, h′) between the final vector of piece `piece` (default 0, [CLS] or the first piece) without
    (h) and with (h′) the head ablated; 0: the head changed nothing there.

    One call: each layer's ablated copies start from the clean run's input to that layer (the layers before it are
    not computed again) and run on together, batched, through the layers after it."""
    return every_head(model, text, how, piece=piece).effects


@dataclass
class EveryHead:
    """Every head removed in turn (head_effects): the effects, and for a decoder the `top` pieces of the clean run's
    next-piece distribution with their probabilities without (`clean`) and with each head removed (`ablated`)."""

    effects: np.ndarray  # float32 (L, H)
    top: np.ndarray | None = None  # int (k,) piece ids, most likely first
    clean: np.ndarray | None = None  # float32 (k,)
    ablated: np.ndarray | None = None  # float32 (L, H, k)
    best: np.ndarray | None = None  # int (L, H) the most likely next piece with each head removed
    best_p: np.ndarray | None = None  # float32 (L, H) its probability

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.effects, self.top, self.clean, self.ablated, self.best, self.best_p)
                   if a is not None)


def every_head(model, text, how: str = "zero", *, piece: int | None = None, top: int = 10) -> EveryHead:
    """head_effects, with a decoder's next-piece probabilities of its `top` pieces under each head's removal."""
    model = engine_model(model, "a head's effect")
    how = check_how(how)
    pieces = pieces_of(model, text)
    clean = model.run_pieces(pieces)
    n = len(pieces)
    read = check_piece(piece, n, n - 1 if model.kind == "decoder" else 0)
    final = torch.cat([staircase(model, clean, start, stop, how, read)
                       for start, stop in layer_chunks(model.layers, model.heads, n)])  # (L·H, d) the read piece's
    shape = (model.layers, model.heads)
    if model.kind != "decoder":
        reference = torch.from_numpy(clean.hidden[-1, read]).to(final)  # (d,)
        final, reference = output_vector(model, final), output_vector(model, reference)  # ModernBERT's final norm
        cosine = torch.nn.functional.cosine_similarity(final.double(), reference.double()[None], dim=-1)  # (L·H,)
        return EveryHead((1 - cosine).cpu().numpy().reshape(shape).astype(np.float32))
    with torch.inference_mode():
        logp = torch.log_softmax(engine.logits(model.weights, final.to(model.dtype)).double(), -1)  # (L·H, vocab)
    clean_logp = torch.log_softmax(torch.from_numpy(clean.next_logits).double(), -1)  # (vocab,)
    best = torch.topk(clean_logp, min(top, len(clean_logp))).indices  # (k,)
    target = int(best[0])
    effects = (logp[:, target].cpu() - clean_logp[target]).numpy().reshape(shape).astype(np.float32)
    ablated = logp[:, best.to(logp.device)].exp().cpu().numpy().reshape(*shape, -1).astype(np.float32)  # (L, H, k)
    after = logp.max(-1)  # (L·H,) each copy's most likely piece and its log p
    return EveryHead(effects, best.numpy(), clean_logp[best].exp().numpy().astype(np.float32), ablated,
                     after.indices.cpu().numpy().reshape(shape), after.values.exp().cpu().numpy().reshape(shape).astype(np.float32))


def layer_chunks(layers: int, heads: int, n: int) -> list[tuple[int, int]]:
    """Ranges of layers whose ablated copies run as one batch, each batch within COPY_ROWS rows at its widest."""
    per_chunk = max(1, COPY_ROWS // max(1, heads * n))
    return [(start, min(layers, start + per_chunk)) for start in range(0, layers, per_chunk)]


def staircase(model, clean: Run, start: int, stop: int, how: str, read: int) -> torch.Tensor:
    """(copies, d) the final vector at position `read` of every copy that ablates one head of layers start … stop − 1:
    at layer l the H copies that ablate its heads join the batch, taken from the clean input to layer l."""
    arch, device = model.arch, model.device
    n = clean.weights.shape[-1]

    def join(i: int, x: torch.Tensor | None):  # before layer i: its H copies join, each ablating one of its heads
        if i >= stop:
            return x, None
        fresh = torch.from_numpy(clean.hidden[i]).to(device, model.dtype).expand(arch.heads, -1, -1)  # (H, n, d)
        first = 0 if x is None else len(x)
        return (fresh if x is None else torch.cat([x, fresh])), CopyAblation(i, first, how)  # (B + H, n, d)

    with torch.inference_mode():
        x = engine.through(arch, model.weights, None, torch.arange(n, device=device), start=start, before=join,
                           last_row=read if how == "zero" else None)  # (B, n or read + 1, d)
        return x[:, read].float()  # (B, d)


def log_prob(logits: np.ndarray, piece: int) -> float:
    return float(torch.log_softmax(torch.from_numpy(logits).double(), -1)[piece])


# ---------------------------------------------------------------- contributions and routes

def output_vector(model, x: torch.Tensor) -> torch.Tensor:
    """An encoder's output of its last stream x (..., d): after its final norm where it has one (ModernBERT), the
    vector an encoder's effects compare."""
    norm = model.weights.final_norm
    if model.kind == "decoder" or norm is None:
        return x
    return norm(x.to(norm.weight.device, norm.weight.dtype)).to(x.dtype)


@dataclass
class HeadOff:
    """A head turned off beside a control head of its layer, on a random sequence repeated (lesson step 17): whether
    the model still predicts the repeat. Indices count from 0."""

    layer: int
    head: int
    control: int
    repeat: int | None  # the piece that followed the last piece in the first copy (None: no piece did)
    p: np.ndarray  # (3,) p(repeat) after the last piece: with every head, without `head`, without `control`
    hits: list[tuple[int, int]]  # for the same three runs: second-copy positions whose top prediction is the repeat, of how many


# The share of its weight a head puts on a known pattern of the sequence for it to have that type there. A trained
# model's heads all park some weight on the first piece (SmolLM2's induction layer: 0.38 to 1.00 over its nine heads),
# so a sink is a head that puts nearly all of it there.
TYPED = {"previous": 0.3, "duplicate": 0.3, "induction": 0.3, "sink": 0.8}


def typed_heads(weights: np.ndarray, ids: list[int], thresholds: dict[str, float] = TYPED) -> set[int]:
    """The heads of one layer, weights (H, n, n) on the pieces `ids`, that follow a known type there: the previous
    piece, an earlier duplicate, the piece after an earlier copy (induction) or the first piece (a sink)."""
    from attnviz import heads as types

    n = len(ids)
    patterns = {"previous": types.previous_pattern(n), "duplicate": types.duplicate_pattern(ids),
                "induction": types.induction_pattern(ids), "sink": types.column_pattern(n, 0, 1)}
    typed: set[int] = set()
    for name, pattern in patterns.items():
        scores = types.pattern_score(np.asarray(weights, np.float64), pattern)  # (H,) or None
        if scores is not None:
            typed |= {int(h) for h in np.flatnonzero(scores >= thresholds[name])}
    return typed


def control_head(head: int, heads: int, seed: int, exclude=()) -> int:
    """A head of the same layer other than `head`, drawn with `seed` among those not in `exclude` (the layer's typed
    heads: a control that is itself a sink or a copying head controls for nothing); from all the others where every
    one is excluded."""
    others = [h for h in range(heads) if h != head and h not in exclude] or [h for h in range(heads) if h != head]
    return others[np.random.default_rng(seed).integers(len(others))]


def head_off(model, probe, runs: tuple[Run, Run, Run], layer: int, head: int, control: int) -> HeadOff:
    """What turning `head` off did, from the runs of `probe`'s repeated pieces (attnviz.heads.Probe, cut short) with
    every head, with `head` ablated and with `control` ablated (Ablation; `turn_head_off` makes them)."""
    from attnviz.heads import repeats_predicted

    repeat = repeats_predicted(model, runs[0], probe.lead, probe.length)[2]
    hits = [repeats_predicted(model, run, probe.lead, probe.length)[:2] for run in runs]
    p = np.array([float(torch.softmax(torch.from_numpy(run.next_logits).double(), -1)[repeat]) if repeat is not None
                  else np.nan for run in runs], np.float32)  # (3,)
    return HeadOff(layer, head, control, repeat, p, hits)


def turn_head_off(model, layer: int, head: int, *, seed: int = 1000, length: int = 20, cut: int = 3,
                  control_seed: int = 7) -> HeadOff:
    """Lesson step 17 for any decoder attnviz computes: `length` random pieces repeated (seeded, the second copy
    `cut` pieces short), run with every head, without layer `layer`'s head `head`, and without a control head of
    the same layer with no known type on the sequence (typed_heads), drawn with `control_seed`."""
    from attnviz.heads import cut_short, probes

    model = engine_model(model, "turning a head off")
    probe = probes(model, 1, length, seed)[0]
    pieces = cut_short(model, probe, cut=cut)
    intact = model.run_pieces(pieces)
    control = control_head(head, model.heads, control_seed, typed_heads(intact.weights[layer], intact.pieces.ids))
    runs = (intact, *(model.run_pieces(pieces, intervention=Ablation(((layer, h),))) for h in (head, control)))
    return head_off(model, probe, runs, layer, head, control)
