"""Decoder: a decoder's every causal head on any text, its next word, attention sinks and the logit lens. The built-in
SmolLM2-135M, or a decoder this server was started with, computed by attnviz's own engine (or by transformers)."""

import streamlit as st

from attnviz import figures, models
from attnviz.export import Matrix
from attnviz.sentence import DECODER_MASKS
from attnviz.urlstate import Param, int_range, nearest
from appkit.common import bounded_text_box, fragment_alone, save_url_state, scale_select
from appkit.served import generation, one_more, run
from appkit.model_page import flag, head_sections, keep_in_range, model_schema, open_model, pick_head, run_or_stop
from appkit.model_views import (atlas, chosen_head, engine_only, head_types_section, lines, row_sum, stopped_text,
                                 write_controls)
from appkit.interactive import browser_figure, catch_up, caught_up, timeline
from appkit.present import downloads

TEXT_CHARS = 4_000
TEMPERATURES = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 1.0, 1.2, 1.5, 2.0]
TOP_P = [0.5, 0.8, 0.9, 0.95, 1.0]
BARS = 10  # next-piece bars
LENS_POSITIONS = 12  # the logit lens's last positions
CATCH_UP = "decoder_catch_up"
WHOLE, CLICKED = "_decoder_whole", "_decoder_clicked"  # session: the text the whole page last drew; the last Next word's
SCHEMA = model_schema(
    model="smollm2", text="When he saw his owner, the dog was", text_chars=TEXT_CHARS,
    query=-1, mask="causal", masks=DECODER_MASKS,  # the query starts on the last piece, the one that predicts the next
    t=Param(0.7, nearest(TEMPERATURES)),
    topk=Param(50, int_range(0, 1000)),
    topp=Param(0.95, nearest(TOP_P)),
    seed=Param(0, int_range(0, 2**31 - 1)),
    lens=flag(),  # the logit lens is open
    lines=flag(),  # the line view is open
)

name, model = open_model("Decoder", SCHEMA, ("decoder",), "smollm2")
group = model.group
groups = (f"; they share {model.kv_heads} key/value heads (grouped-query attention: each {group} heads read one group's "
          "K and V)") if group > 1 else ""
st.write(f"A decoder reads text left to right and predicts the next piece. **{name}**: {model.describe()}. Each of its "
         f"{model.layers} layers has {model.heads} query heads{groups}. The causal mask hides the future, so the upper "
         "triangle of every head is empty by construction."
         + (" Positions enter as rotations of q and k (RoPE)." if model.positions == "rotary" else "")
         + (f" {model.note}." if model.note else ""))
for note in model.notes:
    st.caption(note)


# One rule for the page's probabilities, each labelled with its distribution: P(drawn), what the sampler (T, top-k,
# top-p) draws the next piece with, in the bars and in each written step; p_T = softmax(z/T) before top-k and top-p, the
# timeline's offer; p at T = 1, the model's own, in the logit lens.
DRAWN = "P(drawn): softmax(z/T) over the kept pieces"


def next_word(greedy: bool) -> None:
    """Append the next piece, drawn from the distribution the controls set (or the most likely one). Text the model
    cannot read (typed just before the click) is left as it is: the page then says why."""
    try:
        result = run(name, st.session_state.text)
    except (models.TextError, models.ModelError):
        return
    chosen = models.next_piece(result.next_logits, st.session_state.t, st.session_state.topk,
                               st.session_state.topp, seed=None if greedy else st.session_state.seed,
                               position=len(result.pieces))
    longer = one_more(name, st.session_state.text, chosen)
    if len(longer) <= TEXT_CHARS:  # the text box holds at most TEXT_CHARS characters
        st.session_state.text = st.session_state[CLICKED] = longer
        st.session_state.query = -1  # the new piece is inspected


def distribution(result: models.Run):
    """(vocab,) the next-piece probabilities under the page's temperature, top-k and top-p."""
    return models.next_distribution(result.next_logits, st.session_state.t, st.session_state.topk,
                                    st.session_state.topp)


def write_section(text: str, layer: int) -> None:
    """"Write N pieces": the model writes from its K/V cache under the controls' sampler, and every step is sent to the
    page's timeline at once."""
    if not write_controls("Pieces to write", seed=True):
        st.caption("The model writes piece after piece from its K/V cache (one query row per head a step), sampled as "
                   "the controls above say; the timeline then plays every step here, with no round trip.")
        return
    if not engine_only(model, "writing step by step"):
        return
    try:
        written = generation(name, text, st.session_state.write, st.session_state.t, st.session_state.topk,
                             st.session_state.topp, st.session_state.seed)
    except models.ModelError as error:
        st.warning(str(error))
        return
    labels = written.run.pieces.labels()
    sampler = models.sampler_text(st.session_state.t, st.session_state.topk, st.session_state.topp, st.session_state.seed)
    data = figures.timeline_data(written, labels, model.reader.labels, layer - 1, head=st.session_state.head - 1,
                                 sampler=sampler, title=f"{len(written.new_ids)} pieces written ({sampler}), layer {layer}")
    timeline(data, key="decoder_timeline")
    st.caption(f"Written: “{model.tokenizer.decode(written.new_ids)}”.{stopped_text(written)} Each step reads the pieces so far and "
               f"writes one: p_T is the chosen piece's probability under T, softmax(z/T) before top-k and top-p; P(drawn) "
               f"is what the sampler drew it with, the number the bars under The next word show. The layer is the one "
               f"chosen under All heads; the head can be changed here. The written pieces are drawn in blue. The same "
               f"link writes the same pieces (the seed is in it).")


def looks_back(result: models.Run, labels: list[str], layer: int) -> None:
    """The last piece's query row in each of the layer's heads, and the K/V cache it reads: what a click adds."""
    n = len(labels)
    heads = [f"head {h}" for h in range(1, model.heads + 1)]
    rows = result.weights[layer - 1, :, -1, :]  # (H, n)
    title = f"The last piece “{labels[-1]}” (#{n - 1}) looks back: layer {layer}, its {model.heads} heads"
    browser_figure(figures.matrix_data(rows, heads, labels, title=title, what="weight", axes=("head", "key"),
                                       height=min(160 + 18 * model.heads, 640)), key="decoder_last")
    downloads(st, "decoder_last", lambda: figures.matrix_heatmap(rows, heads, labels, bounded=True, title=title),
              Matrix(rows, heads, labels, corner="head \\ key"), image_help="PNG or SVG: the buttons above the chart.")
    floats = model.layers * 2 * model.kv_heads * n * model.head_dim
    st.caption(f"Each row {row_sum(model)} over the {n} pieces so far (the layer is chosen under "
               "All heads). The K/V cache now "
               f"holds {n} rows of K and V in each of the {model.layers} layers' {model.kv_heads} key/value heads "
               f"({model.layers} × 2 × {model.kv_heads} × {n} × {model.head_dim} floats, {floats * 4 / 2**20:.1f} MB); "
               "the next piece adds one row each.")


@st.fragment
def writing() -> tuple[str, models.Run]:
    """The text, the next word and what a click adds (the last piece's row, the writing), a fragment: a Next word or
    a sampler's control reruns it alone, at once. The heads, sinks and lens below follow once the clicks pause
    (catch_up); text typed into the box reruns the whole page at once."""
    caught_up(CATCH_UP)
    alone, typed = fragment_alone(), st.session_state.get("text")
    behind = typed != st.session_state.get(WHOLE)  # the rest of the page shows another text
    if alone and behind and typed != st.session_state.get(CLICKED):
        st.rerun(scope="app")  # typed, not a Next word's: the whole page reads it (before the box says what it cut)
    text = bounded_text_box(st.text_area, "Text", key="text", limit=TEXT_CHARS, height=80)
    result = run_or_stop(name, text, SCHEMA)
    labels = result.pieces.labels()
    n_layers, n_heads, n = result.weights.shape[:3]
    st.caption(f"{n} pieces (at most {model.max_pieces}; in labels · marks a space, ↵ a line break) · computed by "
               f"{model.computed_by} with torch on **{model.device}**")
    if not alone:
        keep_in_range(n_layers, n_heads)
    next_word_section(result, labels)
    looks_back(result, labels, st.session_state.layer)
    write_section(text, st.session_state.layer)
    if alone and behind:
        catch_up("The heads, sinks and logit lens below still show the text before the last click; they follow once "
                 "the clicks pause.", key=CATCH_UP)
    if alone:
        save_url_state(SCHEMA, note=False)
    return text, result


def next_word_section(result: models.Run, labels: list[str]) -> None:
    """The sampler's controls, the two Next word buttons and the next piece's bars."""
    st.header("The next word")
    controls, bars = st.columns([2, 3])
    controls.select_slider("Temperature T (0: greedy)", TEMPERATURES, key="t")
    controls.number_input("Top-k (0: every piece)", 0, 1000, key="topk")
    controls.select_slider("Top-p (nucleus)", TOP_P, key="topp")
    controls.latex(r"P(\text{drawn})_i = \frac{e^{z_i/T}}{\sum_{j\ \text{kept}} e^{z_j/T}}")
    sample, greedy = controls.columns(2)
    sample.button("Next word (sample)", on_click=next_word, args=(False,), icon=":material/casino:")
    greedy.button("Next word (greedy)", on_click=next_word, args=(True,), icon=":material/arrow_forward:")
    probs = distribution(result).numpy()  # (vocab,)
    top, names = models.top_pieces(model, probs, BARS)
    next_title = (f"Next piece after “…{labels[-1]}”: the {len(top)} most likely "
                  f"({models.sampler_text(st.session_state.t, st.session_state.topk, st.session_state.topp)})")
    with bars:
        browser_figure(figures.bars_data(probs[top], names, title=next_title, axis=DRAWN), key="next")
    downloads(bars, "next", lambda: figures.weight_bars(probs[top], names, title=next_title, axis=DRAWN),
              Matrix(probs[top][None].copy(), ["next"], names, corner="after the text \\ piece"),
              image_help="the figure as a page (HTML).")
    gap = model.reader.vocabulary_gap(len(probs))
    if gap:
        st.warning(gap)
    controls.caption("A click appends the piece. The model keeps each layer's keys and values of the pieces so far "
                     "(its K/V cache), so the new piece costs one query row per head: its attention back over the "
                     "text, below.")


with st.sidebar:
    scale_select(st)
text, result = writing()
labels = result.pieces.labels()
n_layers, n_heads, n = result.weights.shape[:3]

# ---------------------------------------------------------------- heads
layer, head = pick_head(f"All {n_layers * n_heads} heads", n_layers, n_heads)
atlas(result.weights, layer, head, group=group, allowed=model.allowed(n), key="decoder_atlas", name=name)
head_types_section(name, layer, head, SCHEMA)

where = f" (K/V group {(head - 1) // group + 1})" if group > 1 else ""
st.subheader(f"Layer {layer}, head {head}{where}")
if st.session_state.query < 0 or st.session_state.query >= n:
    st.session_state.query = n - 1  # the last piece, the one that predicts the next
head_weights = chosen_head(model, result, layer, head, labels, result.pieces.unknown, SCHEMA)
if st.toggle("Line view", key="lines", help="bertviz's lines from each piece to those it reads; drawn on request, so a "
                                            "next word redraws fewer charts"):
    lines(head_weights, labels, layer, head, query=st.session_state.query, key="decoder_lines")

head_sections(model, name, text, result, layer, head, labels, SCHEMA)

# ---------------------------------------------------------------- sinks and the logit lens
st.header("Attention sinks")
sinks = result.sinks  # (L, H)
heads_labels, layer_labels = [str(h) for h in range(1, n_heads + 1)], [str(l) for l in range(1, n_layers + 1)]
sinks_title = f"Mean weight on the first piece “{labels[0]}” (layers × heads)"
browser_figure(figures.matrix_data(sinks, layer_labels, heads_labels, title=sinks_title, what="mean weight on the first piece",
                                   axes=("layer", "head"), chosen_row=layer - 1, height=min(160 + 18 * n_layers, 900)),
               key="sinks")
downloads(st, "sinks", lambda: figures.matrix_heatmap(sinks, layer_labels, heads_labels, bounded=True, title=sinks_title),
          Matrix(sinks, layer_labels, heads_labels, corner="layer \\ head"), image_help="PNG or SVG: the buttons above the chart.")
st.caption("Each head's weight on the first piece, averaged over the pieces after it. Near 1: the head parks its "
           "attention there when nothing else fits (an attention sink). To read past it, choose “causal, hide keys” "
           "above the chosen head and click the first key's label: each row is renormalised over the others.")

st.header("Logit lens")
if st.toggle("Read every layer's prediction", key="lens",
             help="Each layer's hidden state through the final norm and the output matrix, only for the last positions "
                  "and only when asked.") and engine_only(model, "the logit lens"):
    st.dataframe(models.logit_lens_table(model, result, LENS_POSITIONS), hide_index=True)
    st.caption(f"The last {min(n, LENS_POSITIONS)} positions: what each layer's hidden state would predict next, read through the "
               "final norm and the output matrix, with its probability p = softmax(z) at T = 1 over every piece (the "
               "model's own, whatever the sampler above is set to); the last row is the model's own prediction.")
save_url_state(SCHEMA)
st.session_state[WHOLE] = text
