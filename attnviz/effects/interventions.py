"""What the effects remove, and the checks every measure shares: the interventions that go through the engine's
one seam (engine.Intervention), and the errors that say what cannot be measured."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnviz.models import Pieces
from attnviz.models.engine import Intervention
from attnviz.models.errors import ENGINE_FAMILIES

HOWS = {"zero": "its output set to 0", "mean": "its output replaced by its mean over the positions"}


class EffectsError(ValueError):
    """What cannot be measured, in words for people (a model computed by transformers, a head out of range, …)."""


# ---------------------------------------------------------------- the interventions


@dataclass(frozen=True)
class Ablation(Intervention):
    """Heads (layer, head) whose output is removed before W_o: set to 0 ("zero"), or replaced by its mean over the
    run's positions ("mean"; in a decoder that mean reads later positions too, which the model itself never does)."""

    heads: tuple[tuple[int, int], ...]
    how: str = "zero"

    def head_output(self, layer: int, output: torch.Tensor) -> torch.Tensor | None:
        chosen = sorted({h for l, h in self.heads if l == layer})
        if not chosen:
            return None
        changed = output.clone()  # (..., H, m, dh)
        changed[..., chosen, :, :] = removed(output[..., chosen, :, :], self.how)  # (..., c, m, dh)
        return changed

    @property
    def whole_sequence(self) -> bool:
        return self.how == "mean"

    def describe(self) -> str:
        named = ", ".join(f"layer {l}, head {h}" for l, h in self.heads)
        return f"ablated ({self.how}): {named}"


@dataclass(frozen=True)
class CopyAblation(Intervention):
    """On a batch of copies: copy `first` + h removes head h of `layer` (how: as Ablation), the copies before `first`
    are left alone in this layer. The batch of head_effects."""

    layer: int
    first: int
    how: str = "zero"

    def head_output(self, layer: int, output: torch.Tensor) -> torch.Tensor | None:
        if layer != self.layer:
            return None
        heads = output.shape[-3]
        copies = torch.arange(self.first, self.first + heads)  # (H,) one copy per head
        changed = output.clone()  # (B, H, m, dh)
        changed[copies, torch.arange(heads)] = removed(output[copies, torch.arange(heads)], self.how)  # (H, m, dh)
        return changed


@dataclass(frozen=True)
class Knockout(Intervention):
    """Query → key edges blocked in `layers` (every layer when None): each blocked weight is set to 0 and the row
    renormalised over the keys left, as a mask does before the softmax (Geva et al. 2023, "attention knockout")."""

    edges: tuple[tuple[int, int], ...]
    layers: tuple[int, ...] | None = None

    def weights(self, layer: int, weights: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | None:
        if self.layers is not None and layer not in self.layers:
            return None
        blocked = torch.zeros(weights.shape[-2:], dtype=torch.bool, device=weights.device)  # (m, k)
        for query, key in self.edges:
            rows = (positions == query).nonzero().flatten()  # the query's row here, if it is among these queries
            if len(rows) and key < weights.shape[-1]:
                blocked[rows, key] = True
        return renormalised(weights, blocked)

    def describe(self) -> str:
        where = "every layer" if self.layers is None else "layers " + ", ".join(map(str, self.layers))
        return f"knocked out in {where}: " + ", ".join(f"{q}→{k}" for q, k in self.edges)


@dataclass(frozen=True)
class CopyOcclusion(Intervention):
    """On a batch of copies: copy b blocks every edge into piece pieces[b] from any other piece, in every layer."""

    pieces: tuple[int, ...]

    def weights(self, layer: int, weights: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | None:
        copies = len(self.pieces)
        blocked = torch.zeros(copies, 1, *weights.shape[-2:], dtype=torch.bool, device=weights.device)  # (B, 1, m, k)
        for b, piece in enumerate(self.pieces):
            blocked[b, 0, :, piece] = positions != piece
        return renormalised(weights, blocked)


def removed(output: torch.Tensor, how: str) -> torch.Tensor:
    """A head's output (..., m, dh) as an ablation leaves it."""
    if how == "zero":
        return torch.zeros_like(output)
    return output.mean(-2, keepdim=True).expand_as(output)  # (..., m, dh)


def renormalised(weights: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
    """weights (..., m, k) with the `blocked` cells (broadcast) at 0 and each row renormalised: softmax over the keys
    left and, where the model has one, its learned sink, whose share 1 − Σ α stays in the sum. A row with nothing left
    is all 0, as a fully masked row is."""
    kept = weights.masked_fill(blocked, 0.0)  # (..., m, k)
    left = 1 - weights.sum(-1, keepdim=True)  # (..., m, 1) a learned sink's share; rounding without one
    total = kept.sum(-1, keepdim=True) + torch.where(left > 1e-5, left, 0.0)  # (..., m, 1)
    return torch.where(total > 0, kept / total.clamp_min(torch.finfo(kept.dtype).tiny), kept)


# ---------------------------------------------------------------- checks


def engine_model(model, what: str):
    """The model, where attnviz's engine computes it (its inside is at hand); else an EffectsError saying why."""
    if not getattr(model, "can_intervene", False):
        raise EffectsError(f"{what.capitalize()} needs the model's inside (its heads' outputs, its layers one by one), "
                           "which only attnviz's own engine keeps; this model is computed by transformers. attnviz "
                           f"computes {ENGINE_FAMILIES}.")
    return model


def pieces_of(model, text):
    """The model's pieces of `text` (a TextError for an empty or too long text); pieces made by hand (a probe of
    random pieces, attnviz.models.Pieces) are taken as they are."""
    if isinstance(text, Pieces):
        return text
    if not isinstance(text, str):
        raise EffectsError(f"text must be a string, got {type(text).__name__}.")
    return model.tokenize(text)


def pairs(items, what: str, within: tuple[int, int], missing: str) -> tuple[tuple[int, int], ...]:
    """`items` as pairs of whole numbers, each in range(within[0]) × range(within[1]); `what` names a pair ("head
    (layer, head)") and `missing` says, after "No …", what the ranges are."""
    found = []
    for item in items:
        try:
            first, second = (int(v) for v in item)
        except (TypeError, ValueError):
            raise EffectsError(f"A {what.split(' ')[0]} is a pair {what.split(' ', 1)[1]}, got {item!r}.") from None
        if not (0 <= first < within[0] and 0 <= second < within[1]):
            raise EffectsError(f"No {what.split(' ')[0]} ({first}, {second}): {missing}.")
        found.append((first, second))
    if not found:
        raise EffectsError(f"Name at least one {what}.")
    return tuple(found)


def check_heads(model, heads) -> tuple[tuple[int, int], ...]:
    return pairs(heads, "head (layer, head)", (model.layers, model.heads),
                 f"{model.name} has layers 0 … {model.layers - 1} and heads 0 … {model.heads - 1} (counted from 0)")


def check_how(how: str) -> str:
    if how not in HOWS:
        raise EffectsError(f"how must be one of {', '.join(HOWS)}, got {how!r}.")
    return how


def check_piece(piece: int | None, n: int, default: int) -> int:
    if piece is None:
        return default
    if not 0 <= int(piece) < n:
        raise EffectsError(f"No piece {piece}: the text has pieces 0 … {n - 1}.")
    return int(piece)


# ---------------------------------------------------------------- ablation and knockout
