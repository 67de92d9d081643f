"""Reading a model's run the way the Trained model page does: what each head looks at on average (after Clark et al.,
2019), the rollout across layers, and one head's walk from X to αV, every matrix the one the forward computed.

    from attnviz import models
    model = models.load("minilm")
    run = model.run("When he saw his owner, the dog was happy, so he wagged his tail")
    models.head_summaries(run.weights, run.pieces.tokens)["previous"]  # (layers, heads)
    models.rollout(run)                                                 # (n, n)
"""

from __future__ import annotations

import unicodedata

import numpy as np
import torch

from attnviz.attention import entropy
from attnviz.encdec import rollout as _rollout
from attnviz.models.engine import rules
from attnviz.models.model import Model
from attnviz.models.run import Run
from attnviz.selfattention import Step, shape_latex


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


SUMMARIES = {
    "cls": "to the first piece",
    "sep": "to the last piece",
    "self": "to itself",
    "previous": "to the previous piece",
    "next": "to the next piece",
    "punctuation": "to punctuation",
    "entropy": "entropy (nats)",
}


def summary_names(labels: list[str]) -> dict[str, str]:
    """SUMMARIES with the text's own first and last pieces named ("to the first piece [CLS]")."""
    return {**SUMMARIES, "cls": f"to the first piece {labels[0]}", "sep": f"to the last piece {labels[-1]}"}


def head_summaries(weights: np.ndarray, tokens: list[str]) -> dict[str, np.ndarray]:
    """For each head (layers, heads): the mean weight per query to the first piece ([CLS] in BERT), to the last ([SEP]),
    to itself, to the previous and the next piece, to punctuation, and the mean entropy of its rows (Clark et al.)."""
    n = weights.shape[-1]
    rows = np.arange(n)  # (n,)
    punct = np.array([is_punctuation(t) for t in tokens])  # (n,)
    w = torch.from_numpy(weights)  # (L, H, n, n)
    zero = np.zeros(weights.shape[:2], np.float32)  # (L, H)
    return {
        "cls": weights[..., :, 0].mean(-1),
        "sep": weights[..., :, n - 1].mean(-1),
        "self": weights[..., rows, rows].mean(-1),
        "previous": weights[..., rows[1:], rows[1:] - 1].mean(-1) if n > 1 else zero,
        "next": weights[..., rows[:-1], rows[:-1] + 1].mean(-1) if n > 1 else zero,
        "punctuation": weights[..., punct].sum(-1).mean(-1),
        "entropy": entropy(w).mean(-1).numpy(),
    }


def rollout(run: Run) -> np.ndarray:
    """(n, n) attention rollout of the head-averaged weights through every layer (Abnar and Zuidema, 2020)."""
    return _rollout([torch.from_numpy(layer.mean(0)) for layer in run.weights]).numpy()


def head_formula(model: Model, tau: bool = False) -> str:
    """The chosen head's weights as the model computes them, in LaTeX: its projections, RoPE where it turns q and k,
    the key/value head a grouped query head reads, and the causal mask of a decoder."""
    rope = getattr(model, "positions", "") == "rotary"
    q = r"R_p(XW_q^{(h)} + b_q)" if rope else r"(XW_q^{(h)} + b_q)"
    k_head = r"g(h)" if model.kv_heads != model.heads else "h"
    k = (r"R_p(XW_k^{(%s)} + b_k)" if rope else r"(XW_k^{(%s)} + b_k)") % k_head
    scale = r"\sqrt{%d}%s" % (model.head_dim, r"\,\tau" if tau else "")
    mask = r" + M_{\text{causal}}" if model.kind == "decoder" else ""
    arch = getattr(model, "arch", None)
    if arch is not None and arch.sinks:  # a learned sink: one more logit in every row, its column dropped after
        mask += rules.Sink().latex(tau)
    relative = None if arch is None else rules.relative(arch)
    if relative:  # DeBERTa: content → position and position → content terms
        score = relative.latex(r"\sqrt{%d}%s" % (model.head_dim, r"\,\tau" if tau else ""))
        return r"\alpha = \mathrm{softmax}_j\Big(%s\Big),\ q = XW_q^{(h)} + b_q,\ k = XW_k^{(h)} + b_k" % score
    if arch is not None and rules.shaping(arch):  # the score shaped after q·k/√d_k
        score = rules.shaped_latex(arch, r"\frac{%s\,%s^\top}{\sqrt{%d}}" % (q, k, model.head_dim))
        return r"\alpha = \mathrm{softmax}\Big(%s%s\Big)" % (r"\tfrac{1}{\tau}\big(%s\big)" % score if tau else score, mask)
    return r"\alpha = \mathrm{softmax}\Big(\frac{%s\,%s^\top}{%s}%s\Big)" % (q, k, scale, mask)


def head_steps(run: Run, layer: int, head: int) -> list[Step]:
    """The walk X → Q, K, V → QKᵀ/√d_k → softmax → αV for one head (both counted from 0) of a run the engine computed,
    every matrix the one the forward computed."""
    arch, trace = run.architecture, run.traces[layer]
    group = arch.kv_head(head)
    x = trace.x.numpy()  # (n, d)
    q, k, v = (t.numpy() for t in trace.head(arch, head))  # (n, dk) each
    scores, weights = run.head_scores(layer, head), run.weights[layer, head]  # (n, n) each
    d_k = q.shape[1]
    rope = arch.positions == "rotary"
    where = f"layer {layer + 1}, head {head + 1}"
    kv = f"key/value head {group + 1}" if arch.kv_heads != arch.heads else where
    source = ("the embeddings" if layer == 0 else f"layer {layer}'s output") + (" after the layer's norm" if not arch.post_norm else "")
    out = [Step(f"Input X of layer {layer + 1} ({source})", r"X " + shape_latex(x), x, "tokens", "dims", symbol="X")]
    for name, matrix, whose, columns in (("Q", q, where, head), ("K", k, kv, group), ("V", v, kv, group)):
        sub = name.lower()
        cols = f"{columns * d_k + 1}–{(columns + 1) * d_k}"  # counted from 1, as on screen
        turned = rope and name != "V"
        formula = (rf"{name} = R_p(XW_{{{sub}}}^{{(h)}} + b_{{{sub}}}^{{(h)}})" if turned
                   else rf"{name} = XW_{{{sub}}}^{{(h)}} + b_{{{sub}}}^{{(h)}}")
        out.append(Step(f"{name} of {whose}: columns {cols} of the trained W_{sub} and b_{sub}"
                        + (", turned by position (RoPE)" if turned else ""),
                        formula + " " + shape_latex(matrix) + rf",\quad W_{{{sub}}}^{{(h)}} \in \mathbb{{R}}^{{{x.shape[1]} \times {d_k}}}",
                        matrix, "tokens", "dims", symbol=name))
    slope = r",\ m_h = %.6g" % float(rules.alibi_slopes(arch.heads)[head]) if arch.alibi else ""
    content = r"\frac{QK^\top + \mathrm{c2p} + \mathrm{p2c}}{\sqrt{d_k}}" if arch.relative_span else r"\frac{QK^\top}{\sqrt{d_k}}"
    out.append(Step("Scaled scores" + (" (with DeBERTa's two relative terms, q_i·P^k_δ and k_j·P^q_δ)" if arch.relative_span else ""),
                    r"S = %s,\ d_k = %d%s\ " % (rules.shaped_latex(arch, content), d_k, slope)
                    + shape_latex(scores), scores, "tokens", "tokens", symbol="S"))
    masked = (r" + M_{\text{causal}}" if arch.causal else "") + (rules.Sink().latex() if arch.sinks else "")
    out.append(Step("Weights" + (" (the head's learned sink s_h is one more logit in each row; its share is left out, so "
                                 "a row sums to less than 1)" if arch.sinks else ""),
                    r"\alpha = \mathrm{softmax}_{\text{row}}(S%s)\ " % masked + shape_latex(weights), weights, "tokens",
                    "tokens", bounded=True, symbol="α"))
    head_output = trace.head_output[head].numpy()  # (n, dv)
    out.append(Step("This head's output", r"O^{(h)} = \alpha V\ " + shape_latex(head_output), head_output, "tokens", "dims",
                    symbol="O = αV"))
    return out


def logit_lens_table(model: Model, run: Run, last: int) -> dict[str, list[str]]:
    """The logit lens of `run`'s `last` positions as a table: a "layer" column (the embeddings, then each layer, from
    1) and one column a position ("#i piece"), each cell the piece that layer's hidden state would predict next and
    its probability at T = 1, "piece 0.42" (Model.logit_lens)."""
    n = len(run.pieces)
    start = max(0, n - last)
    ids, probs = model.logit_lens(run.hidden[:, start:])  # (L + 1, shown, 1) each
    pieces = model.reader.labels([int(i) for i in ids[..., 0].ravel()])
    shown = n - start
    labels = run.pieces.labels()
    table = {"layer": ["embeddings", *(str(layer) for layer in range(1, model.layers + 1))]}
    for i in range(shown):
        table[f"#{start + i} {labels[start + i]}"] = [f"{pieces[layer * shown + i]} {probs[layer, i, 0]:.2f}"
                                                     for layer in range(model.layers + 1)]
    return table
