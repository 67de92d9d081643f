"""Does attention explain the prediction? Both model pages' panel (attnviz.effects): every head's effect when it is
removed, coloured on the atlas's diverging scale (a click ablates the head), the next-piece bars before and after,
the routes from the last piece back to the input (drawn by the browser, its threshold in the page), direct logit
attribution, and six measures of each piece's importance beside occlusion, with a sentence on which agree."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import effects, figures, models
from attnviz.export import Matrix
from attnviz.urlstate import Param, boolean, choice, encode_bool, int_range, nearest
from appkit.interactive import browser_figure, head_atlas, routes_graph
from appkit.served import contributions_of, every_head_of, importance_of, logit_attribution_of
from appkit.model_views import engine_only
from appkit.present import PRESENT, downloads

THRESHOLDS = figures.ROUTE_THRESHOLDS
EFFECT_PIECES = 32  # the panel measures texts of up to this many pieces (SmolLM2 here: 13.6 s at 26 pieces, 45 s at 72)
BARS = 10
EFFECT_PARAMS = {
    "effects": Param(False, boolean, encode_bool),  # "Does attention explain the prediction?" is open
    "how": Param("zero", choice(effects.HOWS)),  # how a head is removed
    "ablate": Param(False, boolean, encode_bool),  # the chosen head is removed: the bars before and after
    "rthr": Param(min(THRESHOLDS, key=lambda t: abs(t - 0.04)), nearest(THRESHOLDS)),  # the routes' threshold
    "piece": Param(0, int_range(0, models.MAX_PIECES - 1)),  # an encoder's piece whose final vector is read
}


def effects_section(model: models.Model, name: str, text: str, result: models.Run, layer: int, head: int) -> None:
    """The panel, in an expander that computes nothing until opened."""
    section = st.expander("Does attention explain the prediction? What each head changes, the routes, and importance "
                          "beside occlusion", key="effects", on_change="rerun")
    if not section.open:
        return
    with section:
        if not engine_only(model, "what a head changes (ablation, routes, importance)"):
            return
        labels = result.pieces.labels()
        n = len(labels)
        if n > EFFECT_PIECES:
            st.info(f"Effects are measured on texts of up to {EFFECT_PIECES:,} pieces; this one has {n:,}. Each of the "
                    f"{model.layers * model.heads:,} heads needs its own pass through the layers after it: shorten the "
                    "text to see them.")
            return
        decoder = model.kind == "decoder"
        if not decoder and st.session_state.get("piece", 0) >= n:
            st.session_state.piece = 0
        left, right = st.columns(2)
        how = left.radio("Remove a head by", list(effects.HOWS), key="how", horizontal=True,
                         format_func=lambda h: {"zero": "zeroing its output", "mean": "its mean output"}[h],
                         help="zero: the head's output αV set to 0 before W_o; mean: replaced by its mean over the "
                              "text's positions")
        piece = None
        if not decoder:
            piece = right.selectbox("Piece whose final vector is read", list(range(n)), key="piece",
                                    format_func=lambda i: f"#{i} {labels[i]}")
        try:
            found = every_head_of(name, text, how, piece)
        except (effects.EffectsError, models.TextError) as error:
            st.info(str(error))
            return
        effect_atlas(found.effects, model, layer, head, decoder, labels, piece)
        if decoder:
            before_after(model, found, layer, head, labels)
        else:
            st.write(f"Removing layer {layer}, head {head} turns the final vector of “{labels[piece]}” by "
                     f"1 − cos = {found.effects[layer - 1, head - 1]:.4f}.")
        routes_panel(model, name, text, labels, layer, head, n - 1 if decoder else piece)
        if decoder:
            logit_table(name, text, layer, head)
        importance_panel(name, text, piece, decoder)


def effect_atlas(found: np.ndarray, model: models.Model, layer: int, head: int, decoder: bool, labels: list[str],
                 piece: int | None) -> None:
    def ablate_head(chosen: tuple[int, int]) -> None:
        st.session_state.layer, st.session_state.head = chosen[0] + 1, chosen[1] + 1
        st.session_state.ablate = True

    presenting = bool(st.session_state.get(PRESENT))
    data, what = figures.effect_atlas_data(found, (layer - 1, head - 1), decoder=decoder,
                                           removed=effects.HOWS[st.session_state.get("how", "zero")],
                                           piece="" if decoder else labels[piece],
                                           font_px=16 if presenting else figures.FONT_PX,
                                           palette=st.session_state.get("palette", "viridis"))
    head_atlas(data, key="effect_atlas", on_open=ablate_head)
    order = np.argsort(found.ravel())
    strongest = order[:3] if decoder else order[::-1][:3]
    said = ", ".join(f"layer {i // model.heads + 1}, head {i % model.heads + 1} ({found.ravel()[i]:+.3f})"
                     for i in strongest)
    if decoder:
        st.caption("Each head's output set aside (" + effects.HOWS[st.session_state.how] + "), one at a time, and the "
                   "model run on: log p(the clean run's most likely next piece) with the head removed minus without. "
                   "Orange (below 0): the head helped that prediction; purple (above 0): it held it back; white: no change. Click a head "
                   f"to remove it and see the bars change. The heads it needs most here: {said}.")
    else:
        st.caption("Each head's output set aside, one at a time: 1 − cos between the chosen piece's final vector with "
                   f"and without it (0: no change). Click a head to open it. Largest here: {said}.")
    downloads(st, "effects", lambda: figures.matrix_heatmap(found, [str(l) for l in range(1, model.layers + 1)],
                                                            [str(h) for h in range(1, model.heads + 1)], title=what),
              Matrix(found, [str(l) for l in range(1, model.layers + 1)], [str(h) for h in range(1, model.heads + 1)],
                     corner="layer \\ head"), image_help="the figure as a page (HTML).")


def before_after(model, found: effects.EveryHead, layer: int, head: int, labels: list[str]) -> None:
    """The next-piece bars without and with the chosen head removed, over the same pieces, from every_head's numbers
    (each head's removal already ran; a click computes nothing)."""
    if not st.toggle(f"Remove the chosen head (layer {layer}, head {head}) and compare the next piece", key="ablate"):
        return
    clean_p, ablated_p = found.clean[:BARS], found.ablated[layer - 1, head - 1, :BARS]  # (k,) each
    names = model.reader.labels([int(i) for i in found.top[:BARS]])
    left, right = st.columns(2)
    with left:
        browser_figure(figures.bars_data(clean_p, names, axis="probability (T = 1)",
                                         title=f"Before: p(next piece | “…{labels[-1]}”)"), key="effect_before")
    with right:
        browser_figure(figures.bars_data(ablated_p, names, axis="probability (T = 1)",
                                         title=f"After removing layer {layer}, head {head}"), key="effect_after")
    change = float(np.log(ablated_p[0]) - np.log(clean_p[0]))
    new_top, new_p = int(found.best[layer - 1, head - 1]), float(found.best_p[layer - 1, head - 1])
    st.write(f"p(“{names[0]}”) goes from {clean_p[0]:.3f} to {ablated_p[0]:.3f} (Δ log p = {change:+.3f})"
             + (f"; the most likely next piece becomes “{model.reader.labels([new_top])[0]}” ({new_p:.3f})."
                if new_top != int(found.top[0]) else "; it stays the most likely next piece.")
             + " The bars are the model's own distribution (T = 1, no top-k or top-p), with and without the head.")


def routes_panel(model, name: str, text: str, labels: list[str], layer: int, head: int, start: int) -> None:
    st.subheader(f"Routes: where “{labels[start]}”'s information comes from")
    found = contributions_of(name, text)

    def open_head(chosen: tuple[int, int]) -> None:
        st.session_state.layer, st.session_state.head = chosen[0] + 1, chosen[1] + 1

    data = figures.routes_data(found.pieces, found.attention, found.residual, labels, threshold=st.session_state.rthr,
                               chosen=(layer - 1, head - 1), start=start,
                               title=f"Routes to “{labels[start]}” (#{start}) through {model.layers} layers "
                                     "(layers from 1)")
    routes_graph(data, key="routes", on_open=open_head, on_threshold=lambda value: _threshold(value))
    st.caption("LM-TT's contributions (Ferrando & Voita 2024): in each layer, the share of a piece's update that comes "
               "from each head reading each piece, by proximity max(‖y‖₁ − ‖y − z‖₁, ε), normalised over the parts. An "
               "edge runs from piece j before a layer to piece i after it with Σ_h share(i ← j) (plus, on i's own "
               "stream, the residual's share); the routes keep the edges at or above the threshold that lead to the "
               "piece read (a decoder's last piece). Grey: mostly the residual stream; blue: mostly one head (click it to open that head).")
    pieces = found.pieces.reshape(-1, len(labels))  # (L·n, n)
    rows = [f"layer {l + 1} · #{i} {labels[i]}" for l in range(found.pieces.shape[0]) for i in range(len(labels))]
    downloads(st, "contributions", lambda: figures.matrix_heatmap(pieces, rows, labels, title="piece → piece shares"),
              Matrix(pieces, rows, labels, corner="layer · target \\ source"), image_help="the figure as a page (HTML).")


def _threshold(value) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
        st.session_state.rthr = min(THRESHOLDS, key=lambda t: abs(t - float(value)))


def logit_table(name: str, text: str, layer: int, head: int) -> None:
    st.subheader("Direct logit attribution")
    found = logit_attribution_of(name, text)
    heads_count = found.heads.shape[1]
    order = np.argsort(-np.abs(found.heads).ravel())[:12]
    st.dataframe({
        "layer": [int(i // heads_count) + 1 for i in order],
        "head": [int(i % heads_count) + 1 for i in order],
        f"term in logit of “{found.label}”": [round(float(found.heads.ravel()[i]), 4) for i in order],
        "promotes most": [", ".join(found.promoted_labels[i // heads_count][i % heads_count]) for i in order],
        "suppresses most": [", ".join(found.suppressed_labels[i // heads_count][i % heads_count]) for i in order],
    }, hide_index=True)
    others = sorted(found.terms.items(), key=lambda kv: -abs(kv[1]))[:3]
    st.caption(f"The logit of “{found.label}” ({found.logit:.3f}) taken apart along the residual stream through the "
               "final norm with its scale frozen at this run's: the 12 heads with the largest terms. All heads sum to "
               f"{found.heads.sum():.3f}; the rest ({', '.join(f'{k} {v:+.3f}' for k, v in others)}, …) make up "
               f"{found.total - found.heads.sum():.3f}; together {found.total:.3f}. Layer {layer}, head {head}: "
               f"{found.heads[layer - 1, head - 1]:+.4f}. A head's direct term leaves out what it does through the "
               "layers after it: its ablation effect above counts both.")
    matrix = Matrix(found.heads, [str(l) for l in range(1, found.heads.shape[0] + 1)],
                    [str(h) for h in range(1, heads_count + 1)], corner="layer \\ head")
    downloads(st, "logit_attribution", lambda: figures.matrix_heatmap(found.heads, matrix.rows, matrix.cols,
                                                                      title="direct logit attribution"),
              matrix, image_help="the figure as a page (HTML).")


def importance_panel(name: str, text: str, piece: int | None, decoder: bool) -> None:
    st.subheader("Is attention the explanation?")
    found = importance_of(name, text, piece)
    names = {k: v.split(" (")[0].split(" ‖")[0] for k, v in effects.MEASURES.items()}
    agreement = {k: found.agreement[k] for k in found.measures}
    rows = {k: f"{names[k]} (ρ {'—' if r is None else f'{r:.2f}'})" for k, r in agreement.items()}
    what = f"the next piece “{found.target}”" if decoder else f"the final vector of “{found.tokens[found.read]}”"
    data, drawn = figures.importance_data(found.measures, rows, found.tokens,
                                          title=f"Each piece's importance to {what}, six ways and a baseline")
    browser_figure(data, key="importance")
    st.write(found.sentence())
    st.caption("Rows: each measure divided by its largest |value|, so they share one colour scale; ρ: Spearman's rank "
               "agreement with occlusion" + (" over every piece but the last, which no other piece reads" if decoder else "")
               + ". Occlusion knocks out every edge into the piece from any other, in every layer, and measures "
               + ("how far log p of the predicted piece moves, either way" if decoder else "1 − cos of the read piece's final vector")
               + ": what the model does without that piece's information. Attention weights say where a head looks, "
               "not how much its output weighs (value-weighted), whether later layers use it (contributions, "
               "occlusion), or whether another route would carry the same.")
    raw = np.stack([found.measures[k] for k in found.measures])  # (M, n)
    downloads(st, "importance", lambda: figures.matrix_heatmap(drawn, list(rows.values()), found.tokens,
                                                              title="importance", whole_rows=True),
              Matrix(raw, list(found.measures), found.tokens, corner="measure \\ piece"),
              image_help="the figure as a page (HTML).")
