"""What a family's mapping of a checkpoint gives the engine (Built), and how it declines a setting the engine does
not compute (Unsupported: the model then goes through transformers)."""

from __future__ import annotations

from dataclasses import dataclass

from attnviz.models.engine import ACTIVATIONS, Architecture, Weights


class Unsupported(ValueError):
    """A setting of a family that the engine does not compute, in words (the model then goes through transformers)."""


@dataclass(frozen=True)
class Built:
    """What a family's mapping gives: the architecture and the weights in our layout."""

    arch: Architecture
    weights: Weights
    end_ids: tuple[int, ...] = ()  # a decoder's end-of-text pieces


def activation(name) -> str:
    """A checkpoint's activation `name`, where the engine computes it: one list for every family (engine.ACTIVATIONS,
    each as transformers' ACT2FN computes it, whichever family names it); Unsupported otherwise."""
    if name not in ACTIVATIONS:
        raise Unsupported(f"the activation {name!r}")
    return name
