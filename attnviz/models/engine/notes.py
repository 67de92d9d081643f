"""What a picture of a model's attention means: one sentence for each mechanism that changes it, for the pages."""

from __future__ import annotations

from attnviz.positions import Rope
from attnviz.models.engine import rules
from attnviz.models.engine.layout import Architecture, Weights


def layers_named(indices: list[int]) -> str:
    """Layers by the pages' count, from 1 ("Layer 2", "Layers 1, 3"), for what a person reads."""
    return f"Layer{'s' if len(indices) > 1 else ''} {', '.join(str(i + 1) for i in indices)}"


def notes(arch: Architecture, weights: Weights) -> list[str]:
    """One sentence for each mechanism that changes what a picture of the model's attention means, for the pages to
    say beside it (layers counted from 1, as the pages count them); none for a model without any."""
    said = [rule.note() for rule in rules.every(arch)]
    if weights.logit_cap:
        said.append(f"Its next-piece logits are capped the same way, at ±{weights.logit_cap:g}.")
    bases = [arch.base(i) for i in range(arch.layers)]
    if arch.positions == "rotary" and None in bases:
        flat = [i for i, b in enumerate(bases) if b is None]
        said.append(f"{layers_named(flat)} turn{'' if len(flat) > 1 else 's'} no position (no RoPE): there a head tells "
                    "pieces apart by what they hold, and order only through the causal mask.")
    turned = sorted({getattr(b, "base", b) for b in bases if b is not None})
    if len(turned) > 1:
        said.append("Its layers turn q and k by different RoPE bases (" + ", ".join(f"{b:g}" for b in turned)
                    + "): slow turns on its global layers, fast ones on its sliding-window layers.")
    stretched = {b for b in bases if isinstance(b, Rope) and b.kind != "default"}
    if stretched:
        said.append("Its RoPE is stretched to read past the length it was first trained on ("
                    + ", ".join(sorted(f"{b.kind}, ×{b.factor:g}" for b in stretched)) + "): its slow pairs turn slower "
                    "still, so the same distance turns q and k less than the bare base would."
                    + "".join(f" YaRN also multiplies every score by {b.attention ** 2:.4g}." for b in stretched
                              if b.attention != 1))
    windowed = [i for i, w in enumerate(arch.windows) if w]
    if windowed and len(windowed) < arch.layers:
        widest = max(windowed, key=lambda i: rules.keys(arch, i).window)
        said.append(rules.keys(arch, widest).note(layers_named(windowed), len(windowed) > 1))
    if any(b.attention_out_norm is not None for b in weights.layers):
        said.append("Each attention update is normed before it joins the residual stream, so a head's share of a "
                    "layer's update is read through that norm, its scale frozen at the whole update's.")
    routers = [b.router for b in weights.layers if b.router is not None]
    if routers:
        said.append(f"Its MLPs are mixtures of {routers[0].shape[1]} experts, {arch.top_experts} for each piece, "
                    "chosen by a router: the attention is unchanged by them, its input is not.")
    return said
