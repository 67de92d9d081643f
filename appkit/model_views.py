"""The views every trained model gets, whatever its kind: the atlas of its heads (drawn by the browser), the chosen head
in the browser's heatmap with its score taken apart, the line view, the query–key space, its positions and the
step-by-step walk. The Trained model and Decoder pages draw them for the model their picker chose."""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st
import torch

from attnviz import effects, figures, heads, models, qkspace
from attnviz.effects.why import part_name
from attnviz.functional import scaled_dot_parts
from attnviz.export import Matrix
from attnviz.positions import Rope, cosine_similarity, rotary_angles, rotary_similarity
from attnviz.sentence import temperature_grid
from attnviz.models.errors import ENGINE_FAMILIES
from attnviz.models.generate import MAX_STEPS
from attnviz.urlstate import Param, boolean, choice, coerce, encode_bool, int_range
from appkit.common import md_escape, save_url_state
from appkit.explorer import draw_steps, inside_a_score, walk_section
from appkit.interactive import head_atlas, interactive_heatmap, on_screen, screen_sizes, view_state
from appkit.served import run
from appkit.present import PRESENT, chart, downloads

# The head scores and the value-weighted view, in both model pages' URL state.
HEAD_TYPE_PARAMS = {
    "score": Param("induction", choice(heads.SCORES)),  # the head score the atlas is coloured or sorted by
    "bycolour": Param(False, boolean, encode_bool),
    "bysort": Param(False, boolean, encode_bool),
    "types": Param(False, boolean, encode_bool),  # "What each head does" is open
    "moved": Param(False, boolean, encode_bool),  # "Weighted by what it moves" is open
}
LINES_LIMIT = 64  # the line view draws a row per piece up to this many
QK_PIECES = 128  # the text's own pieces join the built-in sentences in the query–key space up to this many
ENGINE_ONLY = ("Computed by transformers, this model keeps none of its queries and keys, so {what} is off: it needs "
               f"attnviz's own engine, which computes {ENGINE_FAMILIES}.")


def engine_only(model: models.Model, what: str) -> bool:
    """Whether the model's inside is at hand (attnviz's engine computed it); else say why `what` is off."""
    if model.can_intervene:
        return True
    st.info(ENGINE_ONLY.format(what=what))
    return False


def atlas(weights: np.ndarray, layer: int, head: int, *, group: int = 1, allowed: np.ndarray | None = None,
          key: str = "atlas", name: str | None = None) -> None:
    """Every head as a thumbnail, drawn by the browser; a click opens the head (session state layer and head). With the
    model's `name`, the atlas can be coloured and sorted by a head score (attnviz.heads, measured when first asked)."""
    def open_head(chosen: tuple[int, int]) -> None:
        st.session_state.layer, st.session_state.head = chosen[0] + 1, chosen[1] + 1

    score = atlas_score(name, weights.shape[:2]) if name is not None else None
    presenting = bool(st.session_state.get(PRESENT))
    data = figures.atlas_data(weights, chosen=(layer - 1, head - 1), scale=st.session_state.get("scale", "row"),
                              palette=st.session_state.get("palette", "viridis"), group=group, allowed=allowed,
                              font_px=16 if presenting else figures.FONT_PX, max_height=700 if presenting else figures.ATLAS_HEIGHT_PX,
                              score=score, colour="score" if st.session_state.get("bycolour") else "pattern",
                              sort=bool(st.session_state.get("bysort")))
    head_atlas(data, key=key, on_open=open_head)
    many = weights.shape[-1] > figures.ATLAS_BLOCKS
    st.caption("Layers run down, heads across. Click a head to open it below (or focus the atlas: arrow keys, Enter)."
               + (" Dark lines part the key/value groups: the heads between two lines share K and V." if data["group"] > 1 else "")
               + (" Each thumbnail shows the largest weight in each block." if many else "")
               + (f" Sorted: each layer's heads by {score[0]}, highest first; #1 … along the top are places, the hover "
                  "names the head." if data["order"] else "")
               + (" The orange bar along each head's foot (the full width = 1): " + coloured_by(st.session_state.score)
                  if score and st.session_state.get("bycolour") else ""))


def coloured_by(name: str) -> str:
    """What the atlas's colour is, for a head score `name`, in words and symbols."""
    if name == "positional":
        return f"each head's positional score over the corpus, {heads.DEFINITIONS[name]}."
    return f"each head's score Σ α∘P / Σ α over the corpus, with {heads.DEFINITIONS[name]}."


def atlas_score(name: str, shape: tuple[int, int]) -> tuple[str, np.ndarray] | None:
    """The score the atlas is coloured or sorted by (its controls, above it), measured over the corpus once for the
    server; None while neither is asked for, or where the scores do not fit the heads shown."""
    left, middle, right = st.columns([2, 1, 1], vertical_alignment="bottom")
    chosen = left.selectbox("Head score", list(heads.SCORES), key="score", format_func=heads.SCORES.get,
                            help="What each head does, measured over a corpus of generated sentences and a probe of "
                                 "random pieces repeated twice (see “What each head does” below).")
    colour = middle.toggle("Show it on each head", key="bycolour",
                           help="A bar along each thumbnail's foot, its length the head's score; the thumbnails keep "
                                "their patterns.")
    order = right.toggle("Sort by it", key="bysort")
    if not (colour or order or st.session_state.get("types")):
        return None
    measured = measured_types(name)
    if measured is None or chosen not in measured.scores or measured.scores[chosen].shape != tuple(shape):
        if measured is not None:
            st.info(f"{name} has no {heads.SCORES[chosen]} score here (it needs special pieces an encoder adds).")
        return None
    return heads.SCORES[chosen], measured.scores[chosen]


def measured_types(name: str) -> heads.Measured | None:
    """The model's head scores (appkit.served.head_types); while they are measured, a progress bar that redraws the
    page when they are ready, and None (the rest of the page is drawn meanwhile); a message for what fails."""
    from appkit.served import head_types

    try:
        found = head_types(name)
    except heads.HeadsError as error:
        st.info(str(error))
        return None
    except (models.ModelError, OSError) as error:
        st.info(f"{name}'s heads cannot be measured: {error}")
        return None
    if found is None:
        measuring(name)
    return found


@st.fragment(run_every=1.0)
def measuring(name: str) -> None:
    """The measure's progress, checked every second; when the scores are ready, the whole page is drawn again."""
    from appkit.served import head_types_progress

    done, total, ready = head_types_progress(name)
    if ready:
        st.rerun(scope="app")
    st.progress(done / total if total else 0.0,
                text=f"Measuring every head of {name} over {heads.CORPUS_SIZE} generated sentences and {heads.PROBES} "
                     f"probes of random pieces repeated twice: {done} of {total or '…'}, once for this machine (kept on "
                     "disk; `attnviz heads` measures them before class). The rest of the page is drawn meanwhile.")


def head_types_section(name: str, layer: int, head: int, schema: dict) -> None:
    """What each head does over the corpus: the top heads of each score (a row opens its head) and the chosen head's
    scores, with each score's definition."""
    section = st.expander("What each head does, measured over a corpus: previous piece, duplicate, induction, sink, "
                          "positional …", key="types", on_change="rerun")
    if not section.open:
        return
    with section:
        measured = measured_types(name)
        if measured is None:
            return
        st.write(f"Every head scored on {measured.sentences} generated sentences (`attnviz.heads.corpus()`, made from "
                 f"templates by seeded code, no outside text) and, for duplicate and induction, on {measured.probes} "
                 f"probes of {heads.PROBE_PIECES} random pieces of the model's vocabulary repeated twice (seeded), in "
                 f"{measured.seconds:.1f} s, once for this server. A score is Σ α∘P / Σ α over the rows where the "
                 "pattern P marks a cell (TransformerLens's measure): 1 for a head that does exactly that.")
        chosen = {SHORT.get(k, k): f"{v[layer - 1, head - 1]:.2f}" for k, v in measured.scores.items()}
        st.write(f"**Layer {layer}, head {head}**: " + " · ".join(f"{k} {v}" for k, v in chosen.items()))
        rows = [(heads.SCORES[k], place + 1, l + 1, h + 1, round(v, 3), heads.DEFINITIONS[k])
                for k in measured.scores for place, (l, h, v) in enumerate(measured.top(k, 3))]

        def open_row() -> None:
            picked = st.session_state.types_table.selection.rows
            if picked:
                _, _, st.session_state.layer, st.session_state.head, _, _ = rows[picked[0]]

        st.dataframe({"score": [r[0] for r in rows], "place": [r[1] for r in rows], "layer": [r[2] for r in rows],
                      "head": [r[3] for r in rows], "value": [r[4] for r in rows], "pattern P": [r[5] for r in rows]},
                     hide_index=True, on_select=open_row, selection_mode="single-row", key="types_table")
        st.caption("The three highest heads of each score. Select a row to open that head above. Colour or sort the "
                   "atlas by a score with the controls above it.")


SHORT = {"duplicate": "duplicate", "induction": "induction", "previous": "previous", "sink": "sink", "self": "self",
         "cls": "[CLS]", "sep": "[SEP]", "local": "local", "positional": "positional"}


def moved_section(model: models.Model, result: models.Run, layer: int, head: int, labels: list[str]) -> None:
    """Kobayashi et al.'s view: ‖α_ij f(x_j)‖ beside α_ij for the chosen head, and per layer each key's share of the
    weight against its share of the norm the heads move, said in a sentence where they disagree."""
    section = st.expander("Weighted by what it moves: ‖α_ij f(x_j)‖ beside α_ij for the chosen head",  # one label: a
                          key="moved", on_change="rerun")  # label that changes with the head closes the expander
    if not section.open:
        return
    with section:
        if not engine_only(model, "the view weighted by what a head moves"):
            return
        st.latex(r"f_h(x_j) = (x_j W_v^{(h)} + b_v^{(h)})\,W_o^{(h)},\qquad \lVert \alpha_{ij} f_h(x_j) \rVert = "
                 r"\alpha_{ij}\,\lVert f_h(x_j) \rVert")
        norms = heads.moved_norms(model, result, layer - 1)  # (H, n)
        weights = result.weights[layer - 1]  # (H, n, n)
        alpha, moved = weights[head - 1], heads.moved(weights[head - 1], norms[head - 1])  # (n, n) each
        left, right = st.columns(2)
        chart(left, figures.matrix_heatmap(alpha, labels, labels, bounded=True, width="half",
                                           title=f"α_ij, layer {layer}, head {head}"),
              key="moved_alpha", matrix=Matrix(alpha.copy(), labels, labels))
        chart(right, figures.matrix_heatmap(moved, labels, labels, nonnegative=True, width="half",
                                            title="‖α_ij f(x_j)‖: what it moves"),
              key="moved_norm", matrix=Matrix(moved, labels, labels))
        n = len(labels)
        mine = heads.layer_shares(alpha[None], norms[head - 1][None])
        st.write(heads.disagreement(mine, labels, f"layer {layer}, head {head}"))
        shares = heads.layer_shares(weights, norms)
        chart(st, figures.share_bars(shares.weight, shares.norm, labels,
                                     title=f"Layer {layer}, all {weights.shape[0]} heads: each key's share"),
              key="moved_shares", matrix=Matrix(np.stack([shares.weight, shares.norm]), ["weight", "norm"], labels))
        st.write(heads.disagreement(shares, labels, f"layer {layer} (all its heads)"))
        st.caption(f"f_h(x_j) is what head h adds to a query's output per unit of weight on key j (b_o, added once "
                   f"whatever the weights, left out). Shares over the layer's {n} queries: Σ_h Σ_i α_ij / Σ α for the "
                   "weight, Σ_h Σ_i ‖α_ij f_h(x_j)‖ / Σ ‖…‖ for the norm (Kobayashi et al., 2020).")


def chosen_head(model: models.Model, result: models.Run, layer: int, head: int, labels: list[str], unknown: list[bool],
                schema: dict, *, kind: str | None = None, key_labels: list[str] | None = None) -> np.ndarray:
    """The chosen head drawn by the browser from its scores (n, n), with the query inspector: τ, hard, a mask, the colour
    scale and the query redraw at once. Below, the chosen cell's score taken apart (attnviz's engine only). Returns the
    weights it shows."""
    attention = result.attention[kind or result.main.name]
    scores = result.head_scores(layer - 1, head - 1, kind)  # (Tq, Tk)
    rows, cols = scores.shape
    if not 0 <= st.session_state.get("query", 0) < rows:  # a position the text no longer has: the first
        st.session_state.query = 0
    st.session_state.hide = [i for i in st.session_state.get("hide", []) if isinstance(i, int) and 0 <= i < cols]
    view = view_state(schema)
    window = model.window(layer - 1) if kind in (None, "self") else None
    # the layer's sliding window is part of the model's own mask, under every mask chosen
    own = dict(window=window, window_both=not model.causal) if window else {}
    # (Tq, Tk), or (Tq, Tk + 1) with a learned sink's logit as one more column: its share drawn beside the pieces'
    drawn, drawn_keys, sink = model.drawn_scores(result, layer - 1, head - 1, key_labels or labels, kind)
    own = {**own, "sink": True} if sink is not None else own
    shown, allowed = on_screen(drawn, {**view, **own})  # (Tq, Tk) each, (Tq, Tk + 1) with a sink
    title = f"Layer {layer}, head {head}: {rows} queries × {cols} keys" + (" and its sink" if sink is not None else "")
    data = figures.interactive_heatmap(
        drawn, labels, drawn_keys, row_oov=unknown, view=view, title=title, taus=temperature_grid(), file="attnviz_head",
        bars_limit=LINES_LIMIT, **screen_sizes(),
        overflow="The scores divided by τ are larger than float32 can hold, so the softmax has no answer. Choose a larger τ.",
    )
    if attention.causal:
        data["masks"] = {"causal": "causal", "causal_keys": "causal, hide keys"}
    data.update(own)
    interactive_heatmap(data, key="live_head", clean=lambda sent: coerce(sent, schema))
    whole = shown
    downloads(st, "head_map", lambda: figures.attention_heatmap(whole, labels, drawn_keys, scores=drawn, row_oov=unknown,
                                                                scale=view["scale"], palette=view["palette"], title=title),
              Matrix(whole, labels, drawn_keys or labels), image_help="PNG or SVG: the buttons above the heatmap.")
    shown, allowed = shown[:, :cols], allowed[:, :cols]  # (Tq, Tk) the pieces' own
    st.caption(("The model's weights are those at τ = 1 under its own mask; " if attention.causal else
                "The model's weights are those at τ = 1 with no mask; ")
               + "the controls above the heatmap show what τ, hard attention or a mask would make of the same scores, "
                 "computed in your browser."
               + (" Under “causal, hide keys”, click a key's label to hide it (an attention sink's first piece, say): "
                  "each row is renormalised over the keys left." if attention.causal else "")
               + (f" This layer reads a sliding window ({window_text(model, window)}), part of its own mask under "
                  "every choice." if window else "")
               + (f" The last column, {drawn_keys[-1]}, is the share of each row that the head's learned sink takes "
                  f"(its logit s = {sink:.4g} in every row's softmax, under every mask): the pieces get the rest."
                  if sink is not None else ""))
    if result.scores_are_logs:
        st.caption("Computed by transformers: the scores are ln α, which the softmax turns back into the model's own "
                   "weights (a row's scores are known up to a constant the softmax removes).")
        st.latex(r"\alpha = \mathrm{softmax}\big(\ln \alpha\,/\,\tau\big)")
        return shown
    st.latex(models.head_formula(model, tau=True, layer=layer - 1))
    trace = result.traces[layer - 1]
    q, k = trace.query[head - 1], trace.key[(head - 1) // model.group]  # (n, dh) each: this head's, its group's
    rope = model.positions == "rotary"
    names = ("q = R_p(xW_q + b_q)", "k = R_p(xW_k + b_k)") if rope else ("q = xW_q + b_q", "k = xW_k + b_k")

    def parts(i: int, j: int):  # q·k/√d_k taken apart, then the family's own steps: DeBERTa's relative terms, ALiBi, a cap
        return model.score_steps(trace, head - 1, i, j, scaled_dot_parts(q[i], k[j]))

    inside_a_score(parts, scores, shown,
                   allowed, labels, unknown,
                   st.session_state.query, tau=view["temp"], hard=view["hard"], names=names, schema=schema)
    why_section(model, result, layer, head, labels, shown, schema)
    return shown


def row_sum(model: models.Model) -> str:
    """What a row of the model's weights sums to, in words."""
    return "sums to 1 minus its head's learned sink's share" if model.has_sinks else "sums to 1"


def window_text(model: models.Model, window: int) -> str:
    return (f"each piece reads the last {window} pieces" if model.causal else
            f"each piece reads the pieces within {window} either side")


@st.fragment
def why_section(model: models.Model, result: models.Run, layer: int, head: int, labels: list[str], shown: np.ndarray,
                schema: dict) -> None:
    """"Why here?": the chosen cell's score taken apart into what wrote its query's and its key's parts of the stream
    (attnviz.effects.score_parts), and which earlier heads feed the chosen head (composition scores)."""
    section = st.expander("Why here? What wrote this score's query and key: the embeddings, each earlier head, each MLP",
                          key="why", on_change="rerun")
    if section.open:
        with section:
            why_view(model, result, layer, head, labels, shown)
    save_url_state(schema, note=False)


def why_view(model: models.Model, result: models.Run, layer: int, head: int, labels: list[str], shown: np.ndarray) -> None:
    query = st.session_state.query
    chosen = st.session_state.get("key", -1)
    if not isinstance(chosen, int) or not 0 <= chosen < shown.shape[1]:
        st.session_state["key"] = chosen = -1  # the link then says what is shown: the strongest key, not key=511
    key = int(np.argmax(shown[query])) if chosen < 0 else chosen
    if model.kind == "decoder" and key > query:
        st.info(f"Key #{key} comes after query #{query}, which a decoder never reads: choose a key up to the query.")
        return
    found, values = why_parts(model.name, run_digest(result, layer - 1, head - 1, query), layer - 1, head - 1, query,
                              key, model, result)
    rows, cols, table = found.strongest(6)
    folded = "" if (len(rows), len(cols)) == (len(found.query_names), len(found.key_names)) else (
        f"; the table shows the strongest parts of each side and folds the rest by kind into “other …”, "
        f"{len(rows)} × {len(cols)}")
    st.write(f"Query #{query} **{md_escape(labels[query])}** against key #{key} **{md_escape(labels[key])}**: score "
             f"{found.score:.4g}. Each part of the stream is put through the layer's norm (its scale frozen at the "
             "whole stream's), W_q or W_k and the turn by position, so each cell is one query-side part against one "
             f"key-side part, and the {len(found.query_names)} × {len(found.key_names)} cells sum to the score{folded}.")
    st.latex(r"a_{%d,%d} = \sum_{a,b} \frac{q_a \cdot k_b}{\sqrt{%d}} = %.6g" % (query, key, model.head_dim, found.score))
    title = f"Layer {layer}, head {head}: the score's parts (query side × key side)"
    chart(st, figures.matrix_heatmap(table, [f"q: {r}" for r in rows], [f"k: {c}" for c in cols], title=title,
                                     width="half"), key="why_table",
          matrix=Matrix(table, [f"q: {r}" for r in rows], [f"k: {c}" for c in cols], corner="query part \\ key part"))
    magnitude = np.abs(table).sum()
    cells = sorted(((table[a, b], rows[a], cols[b]) for a in range(len(rows)) for b in range(len(cols))
                    if abs(table[a, b]) >= 0.01 * magnitude), key=lambda cell: -abs(cell[0]))[:3]  # none of ~0 %
    if found.score:
        st.caption("The largest cells, each with its share of the score (its value / the score): "
                   + "; ".join(f"q: {r} × k: {c} {v:+.3g} ({v / found.score:.0%})" for v, r, c in cells) + ".")
    measured = measured_types(model.name)
    st.write(found.sentence(measured.scores if measured is not None else None))
    strongest = sorted(values.items(), key=lambda item: -abs(item[1]))[:5]
    st.write(f"**What wrote the values it mixes at query #{query}**: each part's share z_c·z / ‖z‖² of the head's "
             "output z = Σ_j α_j v_j (the shares sum to 1): "
             + ", ".join(f"{name} {share:+.2f}" for name, share in strongest) + ".")
    feeding = composed(model.name, model)
    if feeding is not None and layer > 1:
        st.write(f"**Which earlier heads feed layer {layer}, head {head}** (Elhage et al.'s composition scores, from "
                 "the weights alone, 0 to 1):")
        st.dataframe({kind_name: [f"{part_name(l, h)} {v:.2f}" for l, h, v in top_feeders(feeding[kind], layer - 1, head - 1)]
                      for kind_name, kind in (("query (Q)", "q"), ("key (K)", "k"), ("value (V)", "v"))},
                     hide_index=True)


def run_digest(result: models.Run, layer: int, head: int, query: int) -> str:
    """What a layer's score and value parts depend on in a run: the stream it reads and the query's weights."""
    digest = hashlib.blake2b(np.ascontiguousarray(result.hidden[layer]).tobytes(), digest_size=16)
    digest.update(np.ascontiguousarray(result.weights[layer, head, query]).tobytes())
    return digest.hexdigest()


@st.cache_resource(max_entries=16, show_spinner="Taking the score apart …")
def why_parts(name: str, digest: str, layer: int, head: int, query: int, key: int, _model: models.Model,
              _result: models.Run) -> tuple[effects.ScoreParts, dict[str, float]]:
    """The score's parts and the values' shares (effects.score_parts_of, value_parts_of), once for a run's cell: a
    rerun of the page (a slider moved, another figure clicked) does not take them apart again."""
    return (effects.score_parts_of(_model, _result, layer, head, query, key),
            effects.value_parts_of(_model, _result, layer, head, query))


def top_feeders(scores: np.ndarray, layer: int, head: int, count: int = 5) -> list[tuple[int, int, float]]:
    """The `count` earlier heads (layer, head, score) of the highest composition score into `head` of `layer`."""
    into = scores[:layer, :, layer, head]  # (layer, H)
    order = np.argsort(-into, axis=None, kind="stable")[:count]
    return [(int(l), int(h), float(into[l, h])) for l, h in zip(*np.unravel_index(order, into.shape))]


@st.cache_resource(max_entries=4, show_spinner="Composition scores of every pair of heads …")
def composed(name: str, _model: models.Model) -> dict[str, np.ndarray] | None:
    """The offered model `name`'s composition scores (effects.composition), once for the server."""
    return effects.composition(_model)


def lines(weights: np.ndarray, labels: list[str], layer: int, head: int, *, query: int | None = None, key: str = "lines",
          where=st) -> None:
    """bertviz's line view of one head (n, n), up to LINES_LIMIT pieces."""
    if len(labels) > LINES_LIMIT:
        where.info(f"The line view draws one row per piece, so it is shown up to {LINES_LIMIT:,}; this text has {len(labels):,}.")
        return
    chart(where, figures.line_view(weights[None], labels, query=query, head_names=[f"layer {layer}, head {head}"]), key=key)


def positions(model: models.Model, result: models.Run) -> None:
    """The model's positions for this text: its learned table (the rows added to each piece's embedding) and how alike
    every two rows are; or, under RoPE, how far each pair of q and k is turned at each position, and the similarity
    that alone induces."""
    if not engine_only(model, "the view of its positions"):
        return
    n, pieces = len(result.pieces), result.pieces
    names = [f"{p} · {t}" for p, t in enumerate(figures.labels(pieces.labels(), pieces.unknown))]
    if model.positions == "alibi":
        alibi_view(model, n, names)
        return
    if model.positions == "relative":
        relative_view(model, n, names)
        return
    if model.positions == "learned":
        table = model.position_table(n)  # (n, d)
        similarity, cols, corner = cosine_similarity(table), figures.dims(table.shape[1]), "position \\ dimension"
        st.latex(r"x_p = E_{\text{piece}} + P_p\ (\text{then the model's norm}),\quad P: %d \times %d" % table.shape)
        title = "P: one learned row per position"
        how = r"\cos(P_m, P_n)"
    else:
        d, base = model.rotary()  # the dimensions turned, and how far
        if d < model.head_dim:
            st.caption(f"{model.name} turns the first {d} of each head's {model.head_dim} dimensions; the rest are "
                       "left as they are, and play no part below.")
        if isinstance(base, Rope) and base.kind != "default":
            st.caption(f"{model.name} stretches RoPE ({base.kind}, ×{base.factor:g}): its θ_i are base^(−2i/d) rescaled "
                       "as that rule says, and the tables below use the rescaled θ_i.")
        table = np.cos(rotary_angles(torch.arange(n), d, base).numpy())  # (n, d // 2)
        similarity, cols, corner = rotary_similarity(n, d, base), [f"pair {i}" for i in range(d // 2)], "position \\ pair"
        st.latex(r"q_p, k_p \text{ turned pair by pair by } p\,\theta_i,\ \theta_i = %g^{-2i/%d},\ \cos(p\,\theta_i): %d \times %d"
                 % (float(getattr(base, "base", base)), d, n, d // 2))
        title = "cos(p·θ_i): how far pair i of row p is turned"
        how = r"\tfrac{1}{%d}\sum_i \cos((m-n)\,\theta_i)" % (d // 2)
    st.latex(r"\mathrm{similarity}(m, n) = " + how + r",\ %d \times %d" % (n, n))
    left, right = st.columns(2)
    chart(left, figures.matrix_heatmap(table, names, cols, title=title, width="half"), key="learned_table",
          matrix=Matrix(table, names, cols, corner=corner))
    chart(right, figures.matrix_heatmap(similarity, names, names, title="Position–position similarity", width="half"),
          key="learned_similarity", matrix=Matrix(similarity, names, names, corner="position \\ position"))
    st.caption("Near positions come out alike, far ones less so. The pieces label their positions; neither table "
               "depends on them.")


def relative_view(model: models.Model, n: int, names: list[str]) -> None:
    """DeBERTa's positions: none in the stream; each score reads a key and a query made for the bucketed distance."""
    distance, span, far = model.relative_distances(n)  # (n, n), k, and where the log buckets begin
    st.latex(model.score_formula() + r",\quad \delta = \mathrm{bucket}(i - j) \in [-%d, %d]" % (span, span - 1))
    st.caption(f"{model.name} adds no position to the stream: each layer has a key P^k_δ and a query P^q_δ for each "
               f"distance δ, made from one table of {2 * span} relative embeddings. "
               + (f"Distances up to {far} back or ahead are their own; farther ones share log-spaced buckets, so far "
                  "pieces look alike." if far else "Each distance is its own, up to the table's reach."))
    chart(st, figures.matrix_heatmap(distance, names, names, title="δ(i, j): the bucketed distance each score reads",
                                     width="half"), key="relative_distance",
          matrix=Matrix(distance, names, names, corner="query \\ key"))


def alibi_view(model: models.Model, n: int, names: list[str]) -> None:
    """ALiBi's positions: none in the stream; a bias −m_h (i − j) added to each score, one slope m_h a head."""
    slopes = model.alibi_slopes()  # (H,)
    st.latex(model.score_formula())
    st.caption(f"{model.name} adds no position to the stream: each head's score of an earlier piece is lowered in "
               f"proportion to how far back it lies, at a slope of its own, from {slopes.max():.4g} (head 1) down to "
               f"{slopes.min():.4g}: the first heads read near pieces, the last ones far.")
    bias = -slopes[:, None, None] * np.maximum(np.arange(n)[:, None] - np.arange(n)[None, :], 0)  # (H, n, n)
    left, right = st.columns(2)
    heads = [f"head {h + 1}" for h in range(model.heads)]
    chart(left, figures.matrix_heatmap(slopes[:, None], heads, ["m_h"], title="Each head's slope m_h", width="half"),
          key="alibi_slopes", matrix=Matrix(slopes[:, None], heads, ["m_h"], corner="head \\ slope"))
    chart(right, figures.matrix_heatmap(bias[0], names, names, title="Head 1's bias −m₁(i − j) on each score",
                                        width="half"), key="alibi_bias",
          matrix=Matrix(bias[0], names, names, corner="query \\ key"))


@st.fragment
def qk_space_section(name: str, sentence: str, layer: int, head: int, schema: dict) -> None:
    """The query–key space's expander, a fragment: opening it and a click in it rerun it alone."""
    section = st.expander(f"The query–key space of layer {layer}, head {head}: queries and keys of a few sentences in "
                          "one picture", key="qk", on_change="rerun")
    if section.open:
        with section:
            qk_space_view(name, sentence, layer, head)
    save_url_state(schema, note=False)


def qk_space_view(name: str, sentence: str, layer: int, head: int) -> None:
    """Layer/head's queries and keys of this text and of qkspace.SENTENCES in one PCA projection (attnviz.qkspace):
    a click on a query rings it and draws its strongest keys in its own sentence."""
    from appkit.served import model as loaded

    chosen_model = loaded(name)
    if not engine_only(chosen_model, "the query–key space"):
        return
    mine = run(name, sentence)
    texts = ([sentence] if len(mine.pieces) <= QK_PIECES else []) + list(qkspace.SENTENCES)
    points = qkspace.head_points([run(name, text) for text in texts], layer - 1, head - 1)
    names, which, where = points.names, points.which, points.where
    space = qkspace.joint_space(points.query, points.key)
    chosen = st.session_state.qkq if 0 <= st.session_state.qkq < len(names) else None
    targets = points.strongest_keys(chosen) if chosen is not None else []
    first = len(texts) - len(qkspace.SENTENCES)  # 1 when the text is drawn (sentence 0), else 0
    st.caption(("Sentence 0 is your text. " if first else f"Your text has over {QK_PIECES} pieces, so it is left out. ")
               + "The built-in ones: " + " · ".join(f"{first + k}: {t}" for k, t in enumerate(qkspace.SENTENCES)))
    chart(st, figures.qk_space(space.queries, space.keys, names, which, where, space.explained, chosen=chosen, targets=targets,
                               title=f"Layer {layer}, head {head}: {len(names)} queries and {len(names)} keys"),
          key="qk_map", on_select=_pick_qk, selection_mode="points")
    st.latex(r"q \to c\,q,\ \ k \to k/c - \bar k/c + c\,\bar q,\ \ c = \sqrt{\overline{\lVert k \rVert} / \overline{\lVert q \rVert}} = %.3g"
             % space.scale)
    st.caption("Scaling and the translation leave every softmax row as it was, and make a query sit near the keys it "
               "attends to (AttentionViz's alignment); then PCA of queries and keys together. Click a query (a circle) "
               "to ring it and join it to its three strongest keys in its own sentence, with their weights.")


def _pick_qk() -> None:
    """A click on a query (the first trace: the circles) rings it; a click on a key leaves the view as it is."""
    from appkit.common import clicked_point

    points = st.session_state["qk_map"].selection.points
    point = clicked_point("qk_map")
    if point and len(point) == 3 and points[0].get("curve_number") == 0:
        st.session_state.qkq = int(point[0])


def walk(model: models.Model, result: models.Run, layer: int, head: int, schema: dict) -> None:
    """The step-by-step walk of the chosen head, every matrix the one the forward computed (attnviz's engine only)."""
    label = f"Step by step for layer {layer}, head {head}: X → Q, K, V → QKᵀ/√d_k → softmax → αV"
    if not model.can_intervene:
        st.expander(label, key="steps", on_change="rerun").info(ENGINE_ONLY.format(what="the step-by-step walk"))
        return

    def draw() -> None:
        st.caption("On the model's pieces. Every matrix is the one the forward computed.")
        pieces = result.pieces
        draw_steps(models.head_steps(result, layer - 1, head - 1), figures.labels(pieces.labels(), pieces.unknown), "viridis")

    walk_section(label, len(result.pieces), "pieces", draw, schema)


WRITE_PARAMS = {"write": Param(0, int_range(0, MAX_STEPS))}  # the pieces "Watch it write" writes (0: none written)


def write_controls(label: str, *, seed: bool) -> bool:
    """"Watch it write"'s controls (both model pages): how many pieces, the seed where the page samples, Write and
    Clear. Whether the page is to write (the link's `write`, 1 to 64, or 0)."""
    st.header("Watch it write")
    columns = st.columns([2, 2, 1, 1] if seed else [4, 1, 1], vertical_alignment="bottom")
    if "write_n" not in st.session_state:
        st.session_state.write_n = st.session_state.write or 16
    columns[0].number_input(f"{label} (1 to {MAX_STEPS})", 1, MAX_STEPS, key="write_n")
    if seed:
        columns[1].number_input("Seed (when T > 0)", 0, 2**31 - 1, key="seed")
    columns[-2].button("Write", icon=":material/edit_note:",
                       on_click=lambda: st.session_state.update(write=st.session_state.write_n))
    columns[-1].button("Clear", disabled=not st.session_state.write, on_click=lambda: st.session_state.update(write=0))
    return bool(st.session_state.write)


def stopped_text(written) -> str:
    """A sentence where a generation stopped at the model's end-of-text piece, else nothing."""
    return " It stopped at the model's end-of-text piece." if written.stopped == "end of text" else ""
