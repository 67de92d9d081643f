"""Direct logit attribution: each head's own term in the predicted piece's logit."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models import engine
from attnviz.models.engine import FrozenNorm, output_matrices
from attnviz.models.result import Run
from attnviz.effects.interventions import EffectsError, engine_model, pieces_of
from attnviz.effects.routes import update_scale

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
    read = final.frozen(state) if final is not None else FrozenNorm.identity(state)  # components c (..., d) → (..., d)
    unembed = weights.unembed.double().cpu()  # (d, vocab)
    column = unembed[:, target]  # (d,)

    terms = {"embeddings": float(read(torch.from_numpy(run.hidden[0, last]).double()) @ column)}
    head_terms = np.zeros((arch.layers, arch.heads))
    per_head = []
    with torch.inference_mode():
        for l, (params, trace) in enumerate(zip(weights.layers, run.traces)):
            w_out = output_matrices(arch, params).double().cpu()  # (H, dh, d)
            outputs = (trace.head_output[:, last, None, :].double() @ w_out)[:, 0]  # (H, d)
            frozen = update_scale(model, l, trace)  # (n, d) or None
            through = (lambda u: u) if frozen is None else (lambda u, s=frozen[last]: u * s)  # the update's frozen norm
            direct = read(through(outputs))  # (H, d)
            head_terms[l] = (direct @ column).numpy()
            per_head.append(direct)
            if params.b_out is not None:
                terms[f"layer {l} attention bias"] = float(read(through(params.b_out.double().cpu())) @ column)
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
