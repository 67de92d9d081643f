"""Does attention explain the prediction? What a head or an edge changes when it is removed, where each part of the
update comes from, and how far the attention maps agree with what removing a piece really does.

    from attnviz import effects, models
    model = models.load("smollm2")
    text = "When he saw his owner, the dog was"
    effects.head_effects(model, text)                  # (layers, heads): Δ log p of the next piece, each head ablated
    effects.ablate(model, text, heads=[(19, 7)])       # a Run with layer 19's head 7 (from 0) removed
    effects.knock_out(model, text, edges=[(8, 1)])     # a Run in which piece 8 never reads piece 1
    effects.contributions(model, text)                 # LM-TT's shares of each update, and its routes
    effects.logit_attribution(model, text)             # each head's direct term in the predicted piece's logit
    effects.importance(model, text)                    # six measures of each piece's importance, beside occlusion

Layers, heads and pieces count from 0, as in attnviz.heads. Every function needs the model's inside, so it works for
the models attnviz's own engine computes (BERT-like, GPT-2, Llama-like); a model computed by transformers gets an
EffectsError that says so. Interventions go through the engine's one seam (engine.Intervention): a layer's per-head
weights before they meet V, and a head's output before W_o.

What attention weights do not tell: a weight α_ij says how much of head h's output at i is read from j, not how large
that output is (‖α_ij f(x_j)‖ can be near 0 at a large weight), nor whether the layers after it use it (the residual
stream and the MLPs carry most of every update), nor whether another head would carry the same information if this
one did not. Ablation and occlusion measure the last directly; the importance panel puts them side by side.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from attnviz.models import Pieces, engine
from attnviz.models.engine import Intervention, output_matrices
from attnviz.models.files import ENGINE_FAMILIES
from attnviz.models.run import Run

HOWS = {"zero": "its output set to 0", "mean": "its output replaced by its mean over the positions"}
COPY_ROWS = 8_192  # the most (copies × pieces) rows one batched layer computes: bounds a batch's memory
PROXIMITY_EPS = 1e-5  # LM-TT's floor on a part's proximity, so every share is positive and the sum never 0
CONTRIBUTION_FLOATS = 2**24  # the decomposed update α_ij f_h(x_j) is computed in blocks of query rows within this
MEASURES = {
    "attention": "raw attention (last layer, mean over heads)",
    "rollout": "attention rollout (Abnar & Zuidema 2020)",
    "value": "value-weighted ‖α_ij f(x_j)‖ (last layer, mean over heads)",
    "contributions": "contributions (LM-TT's routes, Ferrando & Voita 2024)",
    "gradient": "gradient × input ‖∂m/∂e_j ⊙ e_j‖",
    "occlusion": "occlusion |Δm| (every edge into the piece knocked out): the ground truth",
    "uniform": "uniform attention (a baseline: rollout of equal weights)",
}


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
    w_out = output_matrices(model.arch, model.weights.blocks[layer]).float().cpu()  # (H, dh, d)
    return value @ w_out  # (H, n, d)


def update_scale(model, layer: int, trace) -> torch.Tensor | None:
    """(n, d) what a layer's norm of its attention's update (Gemma 2 and 3, OLMo 2) multiplies each row of the update
    by, g / rms(u) with u the whole update Σ_h z_h W_o^(h) + b_o: frozen at the clean run's u, the norm is linear, so
    each head's part goes through it alone. None where the family adds the update as it is."""
    block = model.weights.blocks[layer]
    if block.attention_out_norm is None:
        return None
    heads_out = trace.head_output.double().transpose(0, 1).flatten(1)  # (n, H·dh)
    update = heads_out @ block.w_out.double().cpu()  # (n, d)
    if block.b_out is not None:
        update = update + block.b_out.double().cpu()
    norm = block.attention_out_norm
    return norm.weight.double().cpu() * torch.rsqrt(update.pow(2).mean(-1, keepdim=True) + norm.eps)  # (n, d)


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


@dataclass
class LogitAttribution:
    """The predicted piece's logit at the last position taken apart along the residual stream, through the final norm
    with its scale frozen at the clean run's (so the map is linear): logit = Σ heads + Σ other terms.

    For a component c of the last hidden state: RMSNorm gives (c · s ∘ g) · u_t, s = 1/rms(x) of the whole state;
    LayerNorm gives ((c − mean c) · s ∘ g) · u_t, s = 1/σ(x), and its bias b · u_t is a term of its own; u_t the
    output matrix's column of piece t."""

    piece: int  # the piece attributed to: the clean run's most likely next piece
    label: str
    logit: float  # the model's logit of that piece (before Gemma 2's final soft cap, which is not linear)
    heads: np.ndarray  # float32 (L, H): each head's output h_h W_o^(h) at the last position, read onto the logit
    terms: dict[str, float]  # the rest: "embeddings", "layer l MLP", "layer l attention bias", "final norm bias", "output bias"
    promoted: np.ndarray  # int (L, H, k) the pieces each head's output raises most
    suppressed: np.ndarray  # int (L, H, k) … and lowers most
    promoted_labels: list[list[list[str]]]
    suppressed_labels: list[list[list[str]]]

    @property
    def nbytes(self) -> int:
        return self.heads.nbytes + self.promoted.nbytes + self.suppressed.nbytes + 64 * self.promoted.size

    @property
    def total(self) -> float:
        return float(self.heads.sum(dtype=np.float64) + sum(self.terms.values()))


def logit_attribution(model, text: str, *, top: int = 5) -> LogitAttribution:
    """Direct logit attribution of the last position's most likely next piece (LogitAttribution says how)."""
    model = engine_model(model, "direct logit attribution")
    if model.kind != "decoder" or model.weights.unembed is None:
        raise EffectsError("Direct logit attribution reads each head onto the next piece's logit, which only a decoder "
                           "has; for an encoder, see the head effects on the chosen piece's final vector.")
    run = model.run_pieces(pieces_of(model, text))
    return logit_attribution_of(model, run, top=top)


def logit_attribution_of(model, run: Run, *, top: int = 5) -> LogitAttribution:
    weights, arch = model.weights, model.arch
    last = run.weights.shape[-1] - 1
    target = int(np.argmax(run.next_logits))
    state = torch.from_numpy(run.hidden[-1, last]).double()  # (d,)
    final = weights.final_norm
    gain = final.weight.double().cpu() if final is not None else torch.ones_like(state)  # (d,)
    if final is None:
        scale = 1.0
    elif final.kind == "rms":
        scale = 1 / math.sqrt(float(state.pow(2).mean()) + final.eps)
    else:
        scale = 1 / math.sqrt(float(state.var(unbiased=False)) + final.eps)
    centre = final is not None and final.kind == "layer"
    unembed = weights.unembed.double().cpu()  # (d, vocab)
    column = unembed[:, target]  # (d,)

    def read(c: torch.Tensor) -> torch.Tensor:
        """(..., vocab or ()) what components c (..., d) add to the logits through the frozen norm."""
        c = c - c.mean(-1, keepdim=True) if centre else c
        return c * scale * gain

    terms = {"embeddings": float(read(torch.from_numpy(run.hidden[0, last]).double()) @ column)}
    head_terms = np.zeros((arch.layers, arch.heads))
    per_head = []
    with torch.inference_mode():
        for l, (block, trace) in enumerate(zip(weights.blocks, run.traces)):
            w_out = output_matrices(arch, block).double().cpu()  # (H, dh, d)
            outputs = (trace.head_output[:, last, None, :].double() @ w_out)[:, 0]  # (H, d)
            frozen = update_scale(model, l, trace)  # (n, d) or None
            through = (lambda u: u) if frozen is None else (lambda u, s=frozen[last]: u * s)  # the update's frozen norm
            direct = read(through(outputs))  # (H, d)
            head_terms[l] = (direct @ column).numpy()
            per_head.append(direct)
            if block.b_out is not None:
                terms[f"layer {l} attention bias"] = float(read(through(block.b_out.double().cpu())) @ column)
            terms[f"layer {l} MLP"] = float(read(trace.mlp_out[last].double()) @ column)
        if final is not None and final.bias is not None:
            terms["final norm bias"] = float(final.bias.double().cpu() @ column)
        if weights.unembed_bias is not None:
            terms["output bias"] = float(weights.unembed_bias[target])
        vocab_effects = torch.cat(per_head).float() @ unembed.float()  # (L·H, vocab)
        k = min(top, vocab_effects.shape[-1])
        promoted = vocab_effects.topk(k, -1).indices.view(arch.layers, arch.heads, k).numpy()
        suppressed = (-vocab_effects).topk(k, -1).indices.view(arch.layers, arch.heads, k).numpy()
    names = model.reader.labels
    logit = float(run.next_logits[target])
    if weights.logit_cap is not None:  # the logit before the cap, the sum the terms add up to
        uncapped = dataclasses.replace(weights, logit_cap=None)
        logit = float(engine.unembed(uncapped, state.to(weights.unembed.device, weights.unembed.dtype))[target])
    return LogitAttribution(
        target, names([target])[0], logit, head_terms.astype(np.float32), terms, promoted,
        suppressed, [[names([int(i) for i in promoted[l, h]]) for h in range(arch.heads)] for l in range(arch.layers)],
        [[names([int(i) for i in suppressed[l, h]]) for h in range(arch.heads)] for l in range(arch.layers)])


# ---------------------------------------------------------------- is attention the explanation?


@dataclass
class Importance:
    """Each piece's importance to what the model says at piece `read` (a decoder's last piece: its next piece; an
    encoder's chosen piece: its final vector), by MEASURES side by side, and each measure's rank agreement with
    occlusion (Spearman's ρ over the pieces `compared`)."""

    tokens: list[str]
    read: int
    target: str | None  # a decoder's predicted piece
    measures: dict[str, np.ndarray]  # name → (n,) float32, larger = more important
    agreement: dict[str, float | None]  # name → ρ with occlusion (None: a measure with no ranking, as a constant one)
    compared: list[int]  # the pieces the agreement is taken over
    change: np.ndarray | None = None  # float32 (n,) occlusion's signed change: m(clean) − m(knocked out); > 0: the
    # piece's information raised m (a decoder: log p of the predicted piece), < 0: it held m down

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.measures.values())

    def sentence(self) -> str:
        """One plain sentence: which measures agree with occlusion here and which do not."""
        occlusion = self.measures["occlusion"]
        top = max(self.compared, key=lambda j: occlusion[j])
        good = [f"{MEASURES[m].split(' (')[0]} (ρ = {r:.2f})" for m, r in self.agreement.items()
                if m != "occlusion" and r is not None and r >= 0.5]
        bad = [f"{MEASURES[m].split(' (')[0]} (ρ = {r:.2f})" for m, r in self.agreement.items()
               if m != "occlusion" and r is not None and r < 0.5]
        said = f"Knocking out {self.tokens[top]!r} (piece {top}) changes the prediction most"
        if self.target is not None and self.change is not None:
            fall = float(self.change[top])
            said += (f": log p({self.target!r}) {'falls' if fall > 0 else 'rises'} by {abs(fall):.2f}. " if fall else ". ")
        else:
            said += ". "
        said += ("Ranking the pieces as occlusion does: " + ", ".join(good) + ". " if good else
                 "No measure ranks the pieces as occlusion does. ")
        if bad:
            said += "Not: " + ", ".join(bad) + "."
        return said


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's ρ of two rankings; None where either is constant (no ranking to compare)."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(stats.spearmanr(a, b).statistic)


def importance(model, text: str, *, piece: int | None = None) -> Importance:
    """Each input piece's importance to the prediction at the last piece (a decoder) or to piece `piece`'s final
    vector (an encoder, default piece 0), by six measures and a baseline (MEASURES):

    attention: α_rj, the last layer's mean over heads of row r (the read piece); rollout: row r of Abnar & Zuidema's
    rollout of the head-averaged weights (½A + ½I per layer); value: the last layer's mean over heads of
    α_rj ‖f_h(x_j)‖; contributions: row r of P_L−1 ··· P_0, P_l the piece → piece shares of LM-TT's contributions;
    gradient: ‖∂m/∂e_j ⊙ e_j‖₂, e_j piece j's embedding; occlusion: |m(clean) − m(every edge into piece j from another
    piece knocked out in every layer)|, the ground truth (how much the prediction depends on the piece, either way;
    the signed change is Importance.change); uniform: row r of the rollout of equal weights over the keys
    each query may read. m is log p(the clean run's most likely next piece) for a decoder; for an encoder it is the
    read piece's final vector, occlusion taking 1 − cos(clean, knocked out) and the gradient that of its projection on
    the clean vector's direction. In a decoder nothing reads the last piece, so it is left out of the agreement."""
    from attnviz import heads as head_types
    from attnviz.models.reading import rollout

    model = engine_model(model, "importance")
    pieces = pieces_of(model, text)
    run = model.run_pieces(pieces)
    n = len(pieces)
    decoder = model.kind == "decoder"
    read = check_piece(piece, n, n - 1 if decoder else 0)
    if n < 2:
        raise EffectsError("Importance compares pieces: the text needs at least two.")
    target = int(np.argmax(run.next_logits)) if decoder else None
    last = model.layers - 1
    norms = head_types.moved_norms(model, run, last)  # (H, n)
    value = (run.weights[last, :, read] * norms).mean(0)  # α_rj ‖f_h(x_j)‖ (H, n) -> (n,)
    flow = np.eye(n, dtype=np.float64)[read]
    for edges in contributions_of(model, run).pieces[::-1]:
        flow = flow @ edges  # (n,)
    measures = {
        "attention": run.weights[last, :, read].mean(0),
        "rollout": rollout(run)[read],
        "value": value,
        "contributions": flow,
        "gradient": gradient_times_input(model, pieces, read, target),
        "occlusion": np.abs(change := occlusion(model, run, read, target)),
        "uniform": uniform_rollout(n, model.layers, decoder)[read],
    }
    measures = {k: np.nan_to_num(np.asarray(v, np.float32)) for k, v in measures.items()}
    compared = [j for j in range(n) if not (decoder and j == n - 1)]
    agreement = {k: spearman(v[compared], measures["occlusion"][compared]) for k, v in measures.items()}
    return Importance(pieces.labels(), read, model.reader.labels([target])[0] if decoder else None, measures, agreement,
                      compared, np.asarray(change, np.float32))


def occlusion(model, run: Run, read: int, target: int | None) -> np.ndarray:
    """(n,) for each piece j: the measure m (importance says which) knocked out of every layer, batched."""
    n = run.weights.shape[-1]
    arch, device = model.arch, model.device
    positions = torch.arange(n, device=device)  # (n,)
    found = []
    chunk = max(1, COPY_ROWS // n)
    with torch.inference_mode():
        for first in range(0, n, chunk):
            pieces = tuple(range(first, min(n, first + chunk)))
            x = torch.from_numpy(run.hidden[0]).to(device, model.dtype).expand(len(pieces), -1, -1)  # (B, n, d)
            x = engine.through(arch, model.weights, x, positions, intervention=CopyOcclusion(pieces))  # (B, n, d)
            found.append(x[:, read].float())  # (B, d)
        final = torch.cat(found)  # (n, d)
        if target is not None:
            logp = torch.log_softmax(engine.logits(model.weights, final.to(model.dtype)).double(), -1)[:, target]  # (n,)
            return (log_prob(run.next_logits, target) - logp).cpu().numpy()
        reference = output_vector(model, torch.from_numpy(run.hidden[-1, read]).to(final))  # (d,)
        final = output_vector(model, final)  # (n, d)
        return (1 - torch.nn.functional.cosine_similarity(final.double().cpu(), reference.double().cpu()[None], dim=-1)).numpy()


def gradient_times_input(model, pieces, read: int, target: int | None) -> np.ndarray:
    """(n,) ‖∂m/∂e_j ⊙ e_j‖₂ over piece j's embedding e_j (importance says what m is)."""
    arch, weights, device = model.arch, model.weights, model.device
    ids = torch.tensor(pieces.ids, device=device)  # (n,)
    positions = torch.arange(len(ids), device=device)  # (n,)
    vectors = weights.embeddings[ids].detach().clone().float().requires_grad_(True)  # (n, d)
    with torch.enable_grad():
        x = engine.embed(arch, weights, ids, positions, vectors.to(model.dtype))  # (n, d)
        final = output_vector(model, engine.through(arch, weights, x, positions)[read])  # (d,)
        if target is not None:
            measure = torch.log_softmax(engine.unembed(weights, final[None]).float(), -1)[0, target]
        else:
            measure = final.float() @ final.detach().float() / final.detach().float().norm()
        (grad,) = torch.autograd.grad(measure, vectors)
    return torch.linalg.vector_norm(grad * vectors.detach(), dim=-1).cpu().numpy()  # (n,)


def output_vector(model, x: torch.Tensor) -> torch.Tensor:
    """An encoder's output of its last stream x (..., d): after its final norm where it has one (ModernBERT), the
    vector an encoder's effects compare."""
    norm = model.weights.final_norm
    if model.kind == "decoder" or norm is None:
        return x
    return norm(x.to(norm.weight.device, norm.weight.dtype)).to(x.dtype)


def uniform_rollout(n: int, layers: int, causal: bool) -> np.ndarray:
    """(n, n) rollout (½A + ½I per layer) of attention that weighs every key a query may read equally."""
    allowed = np.tril(np.ones((n, n))) if causal else np.ones((n, n))
    uniform = allowed / allowed.sum(1, keepdims=True)
    step = 0.5 * uniform + 0.5 * np.eye(n)
    return np.linalg.matrix_power(step, layers)


# Why a head looks there (attnviz.why), offered here beside the other effects; why imports engine_model from here.
from attnviz.why import (  # noqa: E402
    PartsError, ScoreParts, composition, score_parts, score_parts_of, value_parts, value_parts_of,
)
