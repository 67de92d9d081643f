"""Where each part of an update comes from: LM-TT's shares of every head's update, and the routes they draw back
to the input (Ferrando & Voita 2024)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models.engine import output_matrices
from attnviz.models.result import Run
from attnviz.effects.interventions import engine_model, pieces_of

PROXIMITY_EPS = 1e-5  # LM-TT's floor on a part's proximity, so every share is positive and the sum never 0
CONTRIBUTION_FLOATS = 2**24  # the decomposed update α_ij f_h(x_j) is computed in blocks of query rows within this


@dataclass
class Contributions:
    """Where each update comes from, layer by layer, by LM-TT's proximity (Ferrando & Voita 2024, "Information flow
    routes"). For layer l and position i, with x the layer's input, z_hj = α_ij^h f_h(x_j) (f_h(x_j) = (x̃_j W_v + b_v)
    W_o^(h), x̃ the normed input the layer reads) and y = x_i + Σ_hj z_hj + b_o the sum after the attention,

        proximity(z, y) = max(‖y‖₁ − ‖y − z‖₁, ε),   share(z) = proximity(z, y) / Σ_z' proximity(z', y)

    over the parts z ∈ {x_i, every z_hj} (b_o belongs to y but is no part, as in LM-TT). The MLP step likewise, with
    the parts {y, MLP(y)} of its sum. (A post-norm model, BERT, is decomposed before each LayerNorm.) The shares of a
    position's parts sum to 1."""

    attention: np.ndarray  # float32 (L, n, H, n): share of i's attention update from head h reading piece j
    residual: np.ndarray  # float32 (L, n): share from the residual stream x_i, in the attention step
    mlp: np.ndarray  # float32 (L, n): share of the MLP's output, in the MLP step
    mlp_residual: np.ndarray  # float32 (L, n): share of y, in the MLP step

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.attention, self.residual, self.mlp, self.mlp_residual))

    @property
    def pieces(self) -> np.ndarray:
        """(L, n, n) piece → piece: Σ_h share of (i ← j) plus, on the diagonal, the residual's share. Rows sum to 1."""
        edges = self.attention.sum(2)  # (L, n, n)
        n = edges.shape[-1]
        edges[:, np.arange(n), np.arange(n)] += self.residual
        return edges

    def routes(self, threshold: float = 0.04, start: int | None = None) -> list[Route]:
        """The edges on the paths from piece `start` (default the last) after the last layer back to the input
        pieces, through piece → piece shares ≥ `threshold` (LM-TT's graph, its MLPs folded into each piece's own
        stream): each edge once, top layer first."""
        pieces = self.pieces  # (L, n, n)
        layers, n = pieces.shape[:2]
        reached = {n - 1 if start is None else start}
        found = []
        for layer in range(layers - 1, -1, -1):
            below = set()
            for i in sorted(reached):
                for j in np.nonzero(pieces[layer, i] >= threshold)[0]:
                    through = self.attention[layer, i, :, j]  # (H,)
                    by_residual = j == i and self.residual[layer, i] >= through.sum()
                    found.append(Route(layer, int(j), i, float(pieces[layer, i, j]),
                                       None if by_residual else int(np.argmax(through))))
                    below.add(int(j))
            reached = below
        return found


@dataclass(frozen=True)
class Route:
    layer: int  # the edge runs from piece `source` before this layer to piece `target` after it
    source: int
    target: int
    share: float  # of the target's update
    head: int | None  # the head that carries most of it (None: mostly the residual stream)


def contributions(model, text: str) -> Contributions:
    """LM-TT's contributions of each layer's parts to each position's update (Contributions says how)."""
    model = engine_model(model, "contributions")
    return contributions_of(model, model.run_pieces(pieces_of(model, text)))


def contributions_of(model, run: Run) -> Contributions:
    arch = model.arch
    n = run.weights.shape[-1]
    shapes = (arch.layers, n)
    attention = np.zeros((arch.layers, n, arch.heads, n), np.float32)
    residual, mlp, mlp_residual = (np.zeros(shapes, np.float32) for _ in range(3))
    with torch.inference_mode():
        for l, trace in enumerate(run.traces):
            x = torch.from_numpy(run.hidden[l]).float()  # (n, d) the layer's input
            moved = head_vectors(model, l, trace)  # (H, n, d) f_h(x_j)
            weights = torch.from_numpy(run.weights[l])  # (H, n, n)
            scale = update_scale(model, l, trace)  # (n, d) or None
            y = x + trace.attention_out.float()  # (n, d) the sum after the attention, before any norm
            rows = max(1, CONTRIBUTION_FLOATS // max(1, arch.heads * n * arch.d_model))
            for first in range(0, n, rows):
                chunk = slice(first, first + rows)
                parts = weights[:, chunk, :, None] * moved[:, None]  # (H, r, n, d) z_hj for each query row
                if scale is not None:
                    parts = parts * scale[chunk, None]  # (H, r, n, d) through the update's norm, its scale frozen
                head_share, resid_share = shares(parts.permute(1, 0, 2, 3), x[chunk], y[chunk])
                attention[l, chunk] = head_share.numpy()  # (r, H, n)
                residual[l, chunk] = resid_share.numpy()
            mlp_in, mlp_out = trace.middle.float(), trace.mlp_out.float()  # (n, d) each: BERT's middle is normed
            mlp_share, kept = shares(mlp_out[:, None, None], mlp_in, mlp_in + mlp_out)
            mlp[l], mlp_residual[l] = mlp_share[:, 0, 0].numpy(), kept.numpy()
    return Contributions(attention, residual, mlp, mlp_residual)


def head_vectors(model, layer: int, trace) -> torch.Tensor:
    """(H, n, d) f_h(x_j) = v_j W_o^(h): what head h adds for each unit of weight on piece j (b_o left out)."""
    value = trace.value.float().repeat_interleave(model.group, 0)  # (H, n, dh)
    w_out = output_matrices(model.arch, model.weights.layers[layer]).float().cpu()  # (H, dh, d)
    return value @ w_out  # (H, n, d)


def update_scale(model, layer: int, trace) -> torch.Tensor | None:
    """(n, d) what a layer's norm of its attention's update (Gemma 2 and 3, OLMo 2) multiplies each row of the update
    by, g / rms(u) with u the whole update Σ_h z_h W_o^(h) + b_o: frozen at the clean run's u, the norm is linear, so
    each head's part goes through it alone. None where the family adds the update as it is."""
    params = model.weights.layers[layer]
    if params.attention_out_norm is None:
        return None
    heads_out = trace.head_output.double().transpose(0, 1).flatten(1)  # (n, H·dh)
    update = heads_out @ params.w_out.double().cpu()  # (n, d)
    if params.b_out is not None:
        update = update + params.b_out.double().cpu()
    fixed = params.attention_out_norm.frozen(update)  # the norm, its scale frozen at the whole update
    if fixed.centred:  # each head's part would lose its own mean: no family normalises its update with a LayerNorm
        raise NotImplementedError("an attention update normalised by a LayerNorm")
    return fixed.scale  # (n, d)


def shares(parts: torch.Tensor, residual: torch.Tensor, whole: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LM-TT's proximity shares: parts (r, ..., d) and the residual (r, d) of the sums `whole` (r, d). Returns the
    parts' shares (r, ...) and the residual's (r,), which sum to 1 for each row."""
    norm = whole.abs().sum(-1)  # (r,) ‖y‖₁
    extra = (1,) * (parts.dim() - 2)
    part = (norm.view(-1, *extra) - (parts - whole.view(len(whole), *extra, -1)).abs().sum(-1)).clamp_min(PROXIMITY_EPS)
    resid = (norm - (residual - whole).abs().sum(-1)).clamp_min(PROXIMITY_EPS)  # (r,)
    total = part.flatten(1).sum(1) + resid  # (r,)
    return part / total.view(-1, *extra), resid / total


# ---------------------------------------------------------------- direct logit attribution
