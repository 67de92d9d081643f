"""Position encodings: self-attention by itself is blind to word order (permute the words and its weights permute
with them), so a transformer adds where each word is.

- sinusoidal (Vaswani et al. 2017): PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)), added to X;
- rotary (RoPE, Su et al. 2021): each pair of dimensions (2i, 2i+1) of q and k turned by the angle p·θ_i,
  θ_i = base^(-2i/d), so q_mᵀk_n depends on m − n only;
- learned: a trained model's own table of position vectors (attnviz.models reads it from the weights).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

POSITIONS = ("none", "sinusoidal", "rotary")
BASE = 10000.0


def sinusoidal(n: int, d: int, base: float = BASE) -> torch.Tensor:
    """(n, d) PE: sin in the even dimensions, cos in the odd ones, one frequency per pair."""
    position = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    angle = position / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (n, ⌈d/2⌉)
    pe = torch.zeros(n, d, dtype=torch.float64)  # (n, d)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.float()


SCALINGS = ("default", "linear", "llama3", "yarn")


@dataclass(frozen=True)
class Rope:
    """RoPE stretched past the context a model was trained on (`original` pieces), as transformers' rope_type names it:
    - "linear": every θ_i divided by `factor`;
    - "llama3" (Llama 3.1): θ_i divided by `factor` where its wavelength 2π/θ_i is over original / `low`, kept where
      it is under original / `high`, blended between;
    - "yarn" (YaRN, Peng et al. 2023): the same blend, its ramp set by how many turns (`high` = β_fast, `low` = β_slow)
      pair i makes over `original` pieces; and cos and sin times `attention`, so every score times attention².
    """
    base: float = BASE
    kind: str = "default"
    factor: float = 1.0
    original: int = 0
    low: float = 1.0
    high: float = 4.0
    attention: float = 1.0
    truncate: bool = True

    def theta(self, d: int, device: torch.device) -> torch.Tensor:
        """(d // 2,) float64 θ_i of pairs i of a head's d turned dimensions."""
        theta = self.base ** (-torch.arange(0, d // 2, dtype=torch.float64, device=device) * 2 / d)  # (d // 2,)
        if self.kind == "linear":
            return theta / self.factor  # (d // 2,)
        if self.kind == "llama3":
            wavelength = 2 * math.pi / theta  # (d // 2,)
            share = ((self.original / wavelength - self.low) / (self.high - self.low)).clamp(0, 1)  # (d // 2,) 1 = kept
            return share * theta + (1 - share) * theta / self.factor  # (d // 2,)
        if self.kind == "yarn":
            kept = 1 - self._ramp(d).to(device)  # (d // 2,) 1 where pair i turns as trained
            return theta * kept + theta / self.factor * (1 - kept)  # (d // 2,)
        return theta

    def _ramp(self, d: int) -> torch.Tensor:
        """(d // 2,) YaRN's ramp over the pairs: 0 up to the pair that turns β_fast times in `original` pieces, 1 from
        the one that turns β_slow times, linear between."""
        def pair(turns: float) -> float:
            return d * math.log(self.original / (turns * 2 * math.pi)) / (2 * math.log(self.base))
        low, high = pair(self.high), pair(self.low)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        high = high + 0.001 if low == high else high
        return ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)  # (d // 2,)


def rotary_angles(positions: torch.Tensor, d: int, base: float | Rope = BASE) -> torch.Tensor:
    """(n, d // 2) the angle p·θ_i of each position and pair, θ_i = base^(-2i/d) (a Rope's, where it is stretched)."""
    return positions.to(torch.float64)[:, None] * _theta(d, base, positions.device)  # (n, d // 2)


@functools.lru_cache(maxsize=64)
def _theta(d: int, base: float | Rope, device: torch.device) -> torch.Tensor:
    """(d // 2,) θ_i, float64; the same for every layer and step of a model, so made once."""
    return (base if isinstance(base, Rope) else Rope(float(base))).theta(d, device)  # (d // 2,)


def turns(positions: torch.Tensor, d: int, base: float | Rope, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) (n, d // 2) each of the angles rotate() turns rows at `positions` by (times YaRN's attention factor)."""
    angle = rotary_angles(positions, d, base)  # (n, d // 2)
    scale = base.attention if isinstance(base, Rope) else 1.0
    return (torch.cos(angle) * scale).to(dtype), (torch.sin(angle) * scale).to(dtype)


PAIRINGS = ("adjacent", "halves")


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = BASE, pairs: str = "adjacent",
           turned_by: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """x (..., n, d) with each pair of dimensions of row p turned by p·θ_i (RoPE). The pairs are (2i, 2i+1)
    ("adjacent", RoPE's paper and llama.cpp's files) or (i, i + d/2) ("halves", as transformers' Llama turns them);
    the same angle θ_i = base^(-2i/d) turns pair i either way. An odd d keeps its last dimension. `turned_by`, when
    given, is turns() of these positions (a layer turns its queries and keys by the same angles)."""
    d = x.shape[-1]
    half = d // 2
    cos, sin = turned_by or turns(positions, d, base, x.dtype)  # (n, d // 2) each
    if pairs == "halves":
        first, second = slice(0, half), slice(half, 2 * half)
    elif pairs == "adjacent":
        first, second = slice(0, 2 * half, 2), slice(1, 2 * half, 2)
    else:
        raise ValueError(f"Unknown RoPE pairing '{pairs}'. Choose one of: {', '.join(PAIRINGS)}.")
    even, odd = x[..., first], x[..., second]  # (..., n, d // 2) each: the two members of every pair
    turned = x.clone()  # (..., n, d)
    turned[..., first] = even * cos - odd * sin
    turned[..., second] = even * sin + odd * cos
    return turned


def rotary_similarity(n: int, d: int, base: float = BASE) -> np.ndarray:
    """(n, n) what RoPE alone makes of two positions: the cosine between a vector turned to position m and the same
    vector turned to n, averaged over its pairs, mean_i cos((m − n)·θ_i). It depends on m − n only."""
    angle = rotary_angles(torch.arange(n), d, base)  # (n, d // 2)
    return torch.cos(angle[:, None, :] - angle[None, :, :]).mean(-1).float().numpy()  # (n, n)


def cosine_similarity(rows: np.ndarray) -> np.ndarray:
    """(n, n) the cosine between every two rows of a position table (n, d); a zero row gives 0."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)  # (n, 1)
    unit = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)  # (n, d)
    return unit @ unit.T  # (n, n)


def permutation(a: list[str], b: list[str]) -> list[int] | None:
    """π with b[k] = a[π[k]] (repeated words matched in order), or None when b is not a reordering of a."""
    if sorted(a) != sorted(b):
        return None
    unused: dict[str, list[int]] = {}
    for i, token in enumerate(a):
        unused.setdefault(token, []).append(i)
    return [unused[token].pop(0) for token in b]
