"""One head of a run in formulas: its weights as the model computes them (head_formula), and its walk from X to αV
(head_steps), every matrix the one the forward computed."""

from __future__ import annotations

from attnviz.models.engine import rules
from attnviz.models.loaded import Model
from attnviz.models.result import Run
from attnviz.sentence import Step, shape_latex


def head_formula(model: Model, tau: bool = False, layer: int | None = None) -> str:
    """The chosen head's weights as the model computes them, in LaTeX: its projections, RoPE where it turns q and k,
    the key/value head a grouped query head reads, and the keys its queries may read: layer `layer`'s (counted from
    0: a decoder's causal mask, a sliding window), or, with no layer, a decoder's causal mask."""
    rope = getattr(model, "positions", "") == "rotary"
    q = r"R_p(XW_q^{(h)} + b_q)" if rope else r"(XW_q^{(h)} + b_q)"
    k_head = r"g(h)" if model.kv_heads != model.heads else "h"
    k = (r"R_p(XW_k^{(%s)} + b_k)" if rope else r"(XW_k^{(%s)} + b_k)") % k_head
    scale = r"\sqrt{%d}%s" % (model.head_dim, r"\,\tau" if tau else "")
    arch = getattr(model, "arch", None)
    if arch is not None and layer is not None:
        mask = rules.keys(arch, layer).latex()
    else:
        mask = r" + M_{\text{causal}}" if model.kind == "decoder" else ""
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
    masked = rules.keys(arch, layer).latex() + (rules.Sink().latex() if arch.sinks else "")
    out.append(Step("Weights" + (" (the head's learned sink s_h is one more logit in each row; its share is left out, so "
                                 "a row sums to less than 1)" if arch.sinks else ""),
                    r"\alpha = \mathrm{softmax}_{\text{row}}(S%s)\ " % masked + shape_latex(weights), weights, "tokens",
                    "tokens", bounded=True, symbol="α"))
    head_output = trace.head_output[head].numpy()  # (n, dv)
    out.append(Step("This head's output", r"O^{(h)} = \alpha V\ " + shape_latex(head_output), head_output, "tokens", "dims",
                    symbol="O = αV"))
    return out
