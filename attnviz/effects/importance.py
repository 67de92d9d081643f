"""Each piece's importance measured six ways, beside occlusion, the ground truth."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from attnviz.encdec import rollout as rollout_of
from attnviz.models import engine
from attnviz.models.result import Run
from attnviz.effects.ablation import COPY_ROWS, log_prob, output_vector
from attnviz.effects.interventions import CopyOcclusion, EffectsError, check_piece, engine_model, pieces_of
from attnviz.effects.routes import contributions_of

MEASURES = {
    "attention": "raw attention (last layer, mean over heads)",
    "rollout": "attention rollout (Abnar & Zuidema 2020)",
    "value": "value-weighted ‖α_ij f(x_j)‖ (last layer, mean over heads)",
    "contributions": "contributions (LM-TT's routes, Ferrando & Voita 2024)",
    "gradient": "gradient × input ‖∂m/∂e_j ⊙ e_j‖",
    "occlusion": "occlusion |Δm| (every edge into the piece knocked out): the ground truth",
    "uniform": "uniform attention (a baseline: rollout of equal weights)",
}


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


def importance(model, text: str, *, piece: int | None = None, progress=None) -> Importance:
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
    from attnviz.models.summaries import rollout

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

    def value() -> np.ndarray:
        norms = head_types.moved_norms(model, run, last)  # (H, n)
        return (run.weights[last, :, read] * norms).mean(0)  # α_rj ‖f_h(x_j)‖ (H, n) -> (n,)

    def contributions() -> np.ndarray:
        flow = np.eye(n, dtype=np.float64)[read]  # (n,)
        for edges in contributions_of(model, run).pieces[::-1]:
            flow = flow @ edges  # (n,)
        return flow

    change = None

    def occluded() -> np.ndarray:
        nonlocal change
        change = occlusion(model, run, read, target)  # (n,)
        return np.abs(change)

    computes = {
        "attention": lambda: run.weights[last, :, read].mean(0),
        "rollout": lambda: rollout(run)[read],
        "value": value,
        "contributions": contributions,
        "gradient": lambda: gradient_times_input(model, pieces, read, target),
        "occlusion": occluded,
        "uniform": lambda: uniform_rollout(model, n)[read],
    }
    measures = {}
    for done, (name, compute) in enumerate(computes.items()):
        if progress is not None:
            progress(done, len(computes), name)
        measures[name] = compute()
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




def uniform_rollout(model, n: int) -> np.ndarray:
    """(n, n) rollout (½A + ½I per layer, encdec.rollout) of attention that weighs every key a query may read
    equally, each layer's keys as `model.allowed` gives them (its window included)."""
    flows = []
    for layer in range(model.layers):
        allowed = model.allowed(n, layer)  # (n, n) or None
        uniform = np.ones((n, n)) if allowed is None else allowed.astype(np.float64)  # (n, n)
        flows.append(torch.from_numpy(uniform / uniform.sum(1, keepdims=True)))  # (n, n) each row sums to 1
    return rollout_of(flows).numpy()  # (n, n)
