"""Trained model: an encoder's (or an encoder–decoder's) every head on any sentence. The built-in all-MiniLM-L6-v2, or a
model this server was started with, computed by attnviz's own engine (or, for other architectures, by transformers)."""

import numpy as np
import streamlit as st

from attnviz import figures, models
from attnviz.embeddings import embed, tokenize
from attnviz.export import Matrix
from attnviz.sentence import DECODER_MASKS, MASKS, Config, run as toy_run
from attnviz.urlstate import Param, bounded_text, choice
from appkit.common import bounded_text_box, clicked, glove, position_select, save_url_state, scale_select
from appkit.served import generation, word_weights
from appkit.model_page import head_sections, model_schema, open_model, pick_head, run_or_stop
from appkit.interactive import timeline
from appkit.model_views import atlas, chosen_head, head_types_section, lines, stopped_text, write_controls
from appkit.present import chart

TEXT_CHARS = 20_000
UNITS = {"pieces": "the model's pieces", "words": "words"}
KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention (causal)", "cross": "cross-attention"}
SCHEMA = model_schema(
    model="minilm", text="When he saw his owner, the dog was happy, so he wagged his tail", text_chars=TEXT_CHARS,
    query=0, mask="none", masks=MASKS + DECODER_MASKS,  # an encoder–decoder's decoder heads are causal
    target=Param("", bounded_text(2000)),  # an encoder–decoder's output to read; empty: its own
    kind=Param("encoder", choice(KINDS)),
    measure=Param("previous", choice(models.SUMMARIES)),
    unit=Param("pieces", choice(UNITS)),
)


def write_section(sentence: str, layer: int, head: int, kind: str) -> None:
    """An encoder–decoder writing after the source, greedily: each written piece's cross-attention over the source
    (or, with the decoder's self-attention chosen, its row over the pieces written so far) in the browser's timeline."""
    if not write_controls("Pieces to write after the source, greedily", seed=False):
        st.caption("The encoder reads the source once; the decoder then writes piece after piece, each reading the "
                   "pieces written so far and, through cross-attention, the source: the alignment view attention was "
                   "invented for (Bahdanau et al., 2015). The timeline plays every step in the page.")
        return
    try:
        written = generation(name, sentence, st.session_state.write, 0.0, 0, 1.0, 0)
    except (models.ModelError, models.TextError) as error:
        st.warning(str(error))
        return
    shown = "decoder" if kind == "decoder" else "cross"
    labels = written.run.attention["decoder"].queries.labels()
    layers = written.run.attention[shown].weights.shape[0]
    chosen = min(layer, layers)
    what = "cross-attention over the source" if shown == "cross" else "decoder self-attention"
    timeline(figures.timeline_data(written, labels, model.reader.labels, chosen - 1, head=head - 1, kind=shown,
                                   sampler="T = 0: greedy",
                                   title=f"{len(written.new_ids)} pieces written: {what}, decoder layer {chosen}"),
             key="trained_timeline")
    st.caption(f"Written: “{model.tokenizer.decode(written.new_ids, skip_special_tokens=True)}”.{stopped_text(written)} Each step "
               f"reads the start piece and the pieces written before it; computed by {model.computed_by}. The "
               "attention kind chosen above picks the rows: cross-attention (encoder or cross chosen) or the decoder's "
               "own.")


name, model = open_model("Trained model", SCHEMA, ("encoder", "encoder-decoder"), "minilm")
st.write(f"The attention of a real trained transformer, **{name}** ({model.describe()}), on your sentence. "
         + ("Every matrix here is computed by attnviz's own engine (the same softmax(QKᵀ/√d_k)V as the other pages) with "
            "the model's trained weights and biases W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o." if model.can_intervene else
            "transformers computes it, with eager attention, so every weight is the model's own. "
            + (model.note + "." if model.note else "")))
for note in model.notes:
    st.caption(note)
sentence = bounded_text_box(st.text_input, "Sentence", key="text", limit=TEXT_CHARS)
encdec = model.kind == "encoder-decoder"
target = None
if encdec:
    target = st.text_input("Target (what the decoder reads; empty: the model's own output)", key="target", max_chars=2000)
    kind = st.radio("Attention", list(KINDS), format_func=KINDS.get, key="kind", horizontal=True)
else:
    kind = None
with st.sidebar:
    unit = st.radio("Read as", list(UNITS), format_func=UNITS.get, key="unit", horizontal=True,
                    help="The model reads pieces (\"wagged\" → \"wa\", \"##gged\"). As words: a word's weight to "
                         "another word is the sum over that word's pieces, averaged over its own pieces; rows still sum "
                         "to 1.") if not encdec else "pieces"
    scale_select(st)
result = run_or_stop(name, sentence, SCHEMA, target or None)

attention = result.attention[kind] if encdec else result.main
pieces, words = result.pieces, result.words
n_layers, n_heads = attention.weights.shape[:2]
if unit == "words" and not encdec:
    labels, unknown = words.labels, words.unknown
    weights = word_weights(name, sentence, result)  # (L, H, m, m)
    st.caption("Read as words: weight(word a → word b) = mean over a's pieces of the sum of their weights to b's pieces.")
else:
    labels, unknown, weights = attention.queries.labels(), attention.queries.unknown, attention.weights  # (L, H, Tq, Tk)
key_labels = attention.keys.labels() if attention.keys is not attention.queries else None
if attention.causal and st.session_state.mask not in DECODER_MASKS:  # a causal head is drawn causal
    st.session_state.mask = "causal"
elif not attention.causal and st.session_state.mask not in MASKS:
    st.session_state.mask = "none"
st.caption(f"{len(pieces)} pieces, {len(words.labels)} words (special pieces included) · computed by {model.computed_by} "
           f"with torch on **{model.device}**" + (" · ⟨oov⟩ marks a piece the vocabulary lacks" if any(pieces.unknown) else "")
           + (f" · the decoder reads {len(attention.queries)} pieces: " + " ".join(attention.queries.labels()[:24])
              if encdec else ""))
layer, head = pick_head(f"All {n_layers * n_heads} heads" + (f": {KINDS[kind]}" if encdec else ""), n_layers, n_heads)
atlas(weights, layer, head, group=model.group if kind in (None, "encoder") else 1,
      allowed=model.allowed(weights.shape[-1], kind=kind), name=None if encdec else name)
if not encdec:
    head_types_section(name, layer, head, SCHEMA)

st.header(f"Layer {layer}, head {head}")
if unit == "pieces":
    head_weights = chosen_head(model, result, layer, head, labels, unknown, SCHEMA, kind=kind, key_labels=key_labels)
    if key_labels is None:
        lines(head_weights, labels, layer, head)
else:
    # Read as words, a weight is a sum over pieces of softmax rows: there are no scores to apply τ or a mask to.
    head_weights = weights[layer - 1, head - 1]  # (m, m)

    def pick_query() -> None:
        query = clicked("head_map")
        if query is not None:
            st.session_state.query = query

    chart(st, figures.attention_heatmap(head_weights, labels, row_oov=unknown, scale=st.session_state.scale, clickable=True,
                                        title=f"Layer {layer}, head {head}: {len(labels)} queries × {len(labels)} keys"),
          key="head_map", on_select=pick_query, selection_mode="points",
          matrix=Matrix(head_weights.copy(), labels, labels))  # a copy: not every head
    left, right = st.columns(2)
    lines(head_weights, labels, layer, head, where=left)
    query = position_select(right, "Query", labels, "query")
    row = head_weights[query]  # (m,)
    chart(right, figures.weight_bars(row, labels, oov=unknown, top=64 if len(labels) > 64 else None,
                                     title=f"What {labels[query]!r} looks at"),
          key="bars", matrix=Matrix(row[None].copy(), [labels[query]], labels))

if encdec:
    write_section(sentence, layer, head, kind)
else:
    head_sections(model, name, sentence, result, layer, head, pieces.labels(), SCHEMA)

    st.header("Head summaries")
    st.write("What each head looks at on average over the queries, on the model's own pieces (after Clark et al., 2019, "
             "\"What does BERT look at?\"). Previous-piece heads, heads that park on the first or last piece, and broad "
             "heads stand out.")
    names = models.summary_names(pieces.labels())
    measure = st.selectbox("Measure", list(models.SUMMARIES), format_func=lambda k: f"mean weight {names[k]}"
                           if k != "entropy" else "mean entropy of the rows (nats)", key="measure")
    summaries = models.head_summaries(result.weights, pieces.tokens)
    n_pieces = len(pieces)
    bound = float(np.log(n_pieces)) if measure == "entropy" else 1.0

    def open_summary() -> None:
        from appkit.common import clicked_point

        point = clicked_point("summary")
        if point and len(point) == 2:
            st.session_state.layer, st.session_state.head = int(point[0]) + 1, int(point[1]) + 1

    chart(st, figures.layer_head_heatmap(summaries[measure], title=f"Mean {names[measure]}, per head", what=names[measure],
                                         chosen=(layer - 1, head - 1), zmax=bound),
          key="summary", on_select=open_summary, selection_mode="points",
          matrix=Matrix(summaries[measure], [f"layer {l}" for l in range(1, n_layers + 1)],
                        [f"head {h}" for h in range(1, n_heads + 1)], corner="layer \\ head"))
    st.caption({
        "cls": "Mean over queries i of α_i,0.", "sep": "Mean over queries i of α_i,n−1.", "self": "Mean over i of α_ii.",
        "previous": "Mean over queries i ≥ 1 of α_i,i−1.", "next": "Mean over queries i < n−1 of α_i,i+1.",
        "punctuation": "Mean over queries of the summed weight to punctuation pieces.",
        "entropy": f"Mean over queries of −Σ_j α_ij ln α_ij; the colour scale ends at ln {n_pieces} = {bound:.3f}, the most "
                   "a row can spread.",
    }[measure] + " Click a cell to open that head.")

    st.header("Rollout across the layers")
    st.latex(r"\tilde A_l = 0.5\,\bar A_l + 0.5\,I,\quad R = \tilde A_{%d} \cdots \tilde A_1,\quad \bar A_l = \text{mean over heads}"
             % n_layers)
    flow = models.rollout(result)  # (n, n)
    if unit == "words":
        flow = models.merge_pieces(flow, words.groups)  # (m, m)
    chart(st, figures.attention_heatmap(flow, labels, row_oov=unknown, scale=st.session_state.scale,
                                        title=f"Rollout through {n_layers} layers"),
          key="rollout", matrix=Matrix(flow, labels, labels, corner="output \\ input"))
    st.caption(f"How much each input (column) reaches each output position (row) through all {n_layers} layers, following "
               "the residual connections. Computed on pieces" + (", then read as words." if unit == "words" else "."))

    st.header("Trained vs toy")
    st.write(f"Layer {layer}, head {head} beside attnviz's GloVe engine (identity projections, scaled dot product) on the "
             "same sentence, word by word, on one colour scale.")
    glove_tokens = tokenize(sentence)
    embedded = embed(glove_tokens, glove()) if glove_tokens else None
    if embedded is None or all(embedded.oov):
        st.info("None of these words are in GloVe, so there is no toy attention to compare with.")
    else:
        inner = [i for i, special in enumerate(words.special) if not special]  # words without the special pieces
        trained_words = models.merge_pieces(result.weights[layer - 1, head - 1], words.groups)[np.ix_(inner, inner)]
        toy = toy_run(embedded.vectors, Config()).weights[0]  # (T, T)
        shared = figures.colour_scale("max" if st.session_state.scale == "row" else st.session_state.scale, trained_words, toy)
        left, right = st.columns(2)
        trained_labels = [words.labels[i] for i in inner]
        chart(left, figures.attention_heatmap(trained_words, trained_labels, colours=shared, width="half",
                                              title=f"Trained: layer {layer}, head {head}"), key="vs_trained",
              matrix=Matrix(trained_words, trained_labels, trained_labels))
        if len(inner) < len(words.labels):
            left.caption("Rows sum to less than 1: the rest of each word's weight goes to the special pieces, left out here.")
        chart(right, figures.attention_heatmap(toy, glove_tokens, row_oov=embedded.oov, colours=shared, width="half",
                                               title="Toy: GloVe, Q = K = V = X"), key="vs_toy",
              matrix=Matrix(toy, glove_tokens, glove_tokens))
        if [w.lower() for w in trained_labels] != glove_tokens:
            right.caption("The two tokenizers split this text differently, so the rows do not pair one to one.")
save_url_state(SCHEMA)
