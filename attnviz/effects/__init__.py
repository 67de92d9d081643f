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
the models attnviz's own engine computes (attnviz.models.errors.ENGINE_FAMILIES); a model computed by transformers gets an
EffectsError that says so. Interventions go through the engine's one seam (engine.Intervention): a layer's per-head
weights before they meet V, and a head's output before W_o.

What attention weights do not tell: a weight α_ij says how much of head h's output at i is read from j, not how large
that output is (‖α_ij f(x_j)‖ can be near 0 at a large weight), nor whether the layers after it use it (the residual
stream and the MLPs carry most of every update), nor whether another head would carry the same information if this
one did not. Ablation and occlusion measure the last directly; the importance panel puts them side by side.

The package's modules: `interventions` (what is removed, through the engine's seam, and the checks every measure
shares), `ablation` (heads removed, edges knocked out, every head's effect), `routes` (LM-TT's shares and routes),
`attribution` (direct logit attribution), `importance` (six measures beside occlusion) and `why` (what a head's score
is made of: "Why here?").
"""

from attnviz.effects.interventions import (  # noqa: F401
    HOWS, Ablation, CopyAblation, CopyOcclusion, EffectsError, Knockout, check_heads, check_how, check_piece,
    engine_model, pairs, pieces_of, removed, renormalised,
)
from attnviz.effects.ablation import (  # noqa: F401
    COPY_ROWS, EveryHead, HeadOff, ablate, control_head, typed_heads, every_head, head_effects, head_off, knock_out, layer_chunks,
    log_prob, output_vector, staircase, turn_head_off, with_logits,
)
from attnviz.effects.routes import (  # noqa: F401
    CONTRIBUTION_FLOATS, PROXIMITY_EPS, Contributions, Route, contributions, contributions_of, head_vectors, shares,
    update_scale,
)
from attnviz.effects.attribution import LogitAttribution, logit_attribution, logit_attribution_of  # noqa: F401
from attnviz.effects.importance import (  # noqa: F401
    MEASURES, Importance, gradient_times_input, importance, occlusion, spearman, uniform_rollout,
)
# Why a head looks there: what a head's score is made of.
from attnviz.effects.why import (  # noqa: F401
    PartsError, ScoreParts, composition, score_parts, score_parts_of, value_parts, value_parts_of,
)
