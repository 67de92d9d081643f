"""Key–value database: exact lookup, hard retrieval and soft retrieval of the same query, side by side."""

import numpy as np
import streamlit as st

from attnviz.functional import FORMULAS
from attnviz.embeddings import nearest_words
from attnviz.figures import entropy_against_tau, pca_scatter, weight_bars
from attnviz.retrieval import (
    ENCODERS, NUMBER_RULE, PRESETS, SIMILARITIES, VALUE_KINDS, RecordError, clean_records, entropy_curve, half_filled, is_number, parse_csv, pca_2d,
    records_frame, retrieve, value_matrix,
)
from attnviz.sentence import temperature_grid
from attnviz.urlstate import Param, bounded_text, choice, nearest
from appkit.common import stop, glove, load_url_state, save_url_state
from attnviz.export import Matrix
from appkit.present import chart

UPLOAD = "Your own records (CSV)"
QUERY_CHARS = 200
SIGMAS = [0.05, 0.1, 0.25, 0.5, 1.0, 2.0]
SCHEMA = {
    "preset": Param(next(iter(PRESETS)), choice([*PRESETS, UPLOAD])),
    "q": Param("Li", bounded_text(QUERY_CHARS)),
    "encoder": Param("ngram", choice(ENCODERS)),
    "sim": Param("cosine", choice(SIMILARITIES)),
    "tau": Param(0.1, nearest(temperature_grid())),
    "sigma": Param(0.25, nearest(SIGMAS)),
    "kind": Param("text", choice(VALUE_KINDS)),
    "drop": Param("", bounded_text(QUERY_CHARS)),  # the key whose records are left out ("": none), as the lesson's steps 2–3 do
}


def apply_preset():
    """Choosing a preset sets its encoder, similarity, value kind and example query."""
    if st.session_state.preset in PRESETS:
        _, st.session_state.encoder, st.session_state.sim, st.session_state.kind, st.session_state.q = PRESETS[st.session_state.preset]


st.title("Key–value database")
st.write(
    "A database returns the value whose key equals the query. Attention relaxes this: **hard** retrieval "
    "returns the value of the most similar key, **soft** retrieval returns a mix of all values weighted by "
    "softmax(similarity / τ). Edit the table, type a query, and move τ."
)
load_url_state(SCHEMA)
kv = glove()

with st.sidebar:
    st.selectbox("Records", [*PRESETS, UPLOAD], key="preset", on_change=apply_preset)
    st.selectbox("Key encoder", ENCODERS, key="encoder",
                 help="glove: mean GloVe vector of the key's words. ngram: character 2- and 3-grams, good for names. numeric: the number itself.")
    similarity = st.selectbox("Similarity a(q, k)", SIMILARITIES, key="sim")
    st.latex(FORMULAS[similarity])
    st.select_slider("σ (Gaussian width)", SIGMAS, key="sigma", disabled=similarity != "gaussian")
    st.select_slider("Temperature τ (log scale)", temperature_grid(), key="tau",
                     help="Soft weights are softmax(a(q, k) / τ). τ → 0 gives hard retrieval, τ → ∞ the plain average.")
    st.selectbox("Value kind", VALUE_KINDS, key="kind",
                 help="numeric: weighted mean. categorical: class probabilities. word: mean GloVe vector and its nearest words. text: a distribution over records.")

if st.session_state.preset == UPLOAD:
    upload = st.file_uploader("CSV with two columns: key, value", type=["csv", "txt"], key="records_file")
    pasted = st.text_area("…or paste CSV lines here", key="records_paste", placeholder="Zhang,Aston\nLi,Mu")
    data = upload.getvalue() if upload is not None else pasted.encode("utf-8")
    if not data.strip():
        stop("Upload or paste records to query them.", SCHEMA)
    try:
        table = parse_csv(data)
    except RecordError as error:
        stop(str(error), SCHEMA, error=True)
    editor_key = "table_upload"
else:
    table = records_frame(PRESETS[st.session_state.preset][0])
    editor_key = "table_" + st.session_state.preset
# The editor's key is per preset, so the rows a person typed stay when they switch away and back.
edited = st.data_editor(table, key=editor_key, num_rows="dynamic", width="stretch",
                        column_config={"key": st.column_config.TextColumn("key"), "value": st.column_config.TextColumn("value")})
st.caption("Duplicate keys are allowed: each record gets its own weight.")


def leave_out(records):
    """The records without those whose key the "Leave a record out" box names: the exact lookup then has no
    answer, while hard and soft retrieval still find the nearest keys (the lesson's steps 2 and 3 leave out Li)."""
    keys = [str(k) for k in dict.fromkeys(records.key.tolist())]
    if st.session_state.get("drop", "") not in keys:
        st.session_state.drop = ""
    dropped = st.selectbox("Leave a record out", ["", *keys], key="drop", format_func=lambda k: k or "(none)",
                           help="Remove the records with this key, to see what hard and soft retrieval answer when the "
                                "exact lookup has nothing.")
    kept = records[records.key.astype(str) != dropped] if dropped else records
    if kept.empty:
        stop("Every record is left out: choose (none) under \"Leave a record out\", or add records.", SCHEMA)
    return kept


encoder, kind = st.session_state.encoder, st.session_state.kind
partial = half_filled(edited)
if partial and len(partial) < len(edited):  # a row being typed: the others still answer the query
    st.warning(f"Row{'s' if len(partial) > 1 else ''} {', '.join(str(i + 1) for i in partial)} "
               f"{'have' if len(partial) > 1 else 'has'} a key or a value but not both: left out until filled in.")
    edited = edited.drop(index=edited.index[partial])
try:
    records = clean_records(edited, numeric_keys=encoder == "numeric", numeric_values=kind == "numeric")
except RecordError as error:
    stop(str(error), SCHEMA, error=True)
records = leave_out(records)
query = st.text_input("Query", key="q", max_chars=QUERY_CHARS)
if not query.strip():
    stop("Type a query to look it up.", SCHEMA)
keys, values = records.key.tolist(), records.value.tolist()
if encoder == "numeric" and not is_number(query):
    stop(f"The numeric key encoder needs {NUMBER_RULE} as the query, such as 3.4.", SCHEMA, error=True)

V, columns = value_matrix(values, kind, kv)
result = retrieve([query], keys, V, encoder=encoder, similarity=similarity, temperature=st.session_state.tau,
                  sigma=st.session_state.sigma, kv=kv)
if not result.query_known[0]:
    st.warning("GloVe knows none of the query's words, so its vector is zero and every key scores the same.")
hard_index = int(result.hard_weights[0].argmax())
soft = result.soft_weights[0]


def readable(number: float) -> str:
    """64,000 rather than 6.4e+04: whole thousands with separators, small numbers to 4 significant digits."""
    return f"{number:,.0f}" if abs(number) >= 1000 else f"{number:.4g}"


def show_output(output: np.ndarray) -> None:
    """The retrieved value for each value kind, as plain text (user text is never rendered as HTML)."""
    if kind == "numeric":
        st.metric("value", readable(output[0]))
    elif kind == "word":
        st.dataframe({"nearest word": [w for w, _ in nearest_words(kv, output, 5)]}, hide_index=True)
    else:
        order = np.argsort(-output)[:5]
        st.dataframe({"value": [columns[i] for i in order], "probability": [round(float(output[i]), 3) for i in order]}, hide_index=True)


exact_col, hard_col, soft_col = st.columns(3)
with exact_col:
    st.subheader("Exact lookup")
    st.latex(r"\text{value}(k_i) \text{ where } k_i = q")
    if result.exact:
        st.success("Found")
        st.dataframe(records.iloc[result.exact], hide_index=False)
    else:
        st.warning("No record: no key equals the query.")
    st.caption("A database: the key must match exactly, or there is no answer.")
with hard_col:
    st.subheader("Hard retrieval")
    st.latex(r"v_{i^*},\ i^* = \arg\max_i a(q, k_i)")
    st.write("Most similar record:")
    st.dataframe(records.iloc[[hard_index]], hide_index=False)
    show_output(result.hard_output[0])
    st.caption("Approximate matching: the best key always answers. Ties go to the first record.")
with soft_col:
    st.subheader("Soft retrieval")
    st.latex(r"\sum_i \alpha_i v_i")
    st.latex(r"\alpha = \mathrm{softmax}(a(q, k) / \tau)")
    st.write(f"Top record: #{int(soft.argmax())} (weight {soft.max():.3f})")
    show_output(result.soft_output[0])
    st.caption("Every record answers a little, in proportion to its weight.")

key_labels = [f"{k} → {v}" for k, v in zip(keys, values)]
bars, space = st.columns(2)
chart(bars, weight_bars(soft, key_labels, highlight=hard_index, title="Soft weight of each record"), key="weights",
      matrix=Matrix(soft[None].copy(), [query], key_labels, corner="query \\ record"))
bars.caption("Orange: the record hard retrieval picks.")
points = pca_2d(np.vstack([result.key_vectors, result.query_vectors]))  # (N+1, 2)
chart(space, pca_scatter(points, keys, query, soft), key="pca",
      matrix=Matrix(points, [*keys, f"query: {query}"], ["PC 1", "PC 2"], corner="point \\ direction"))
space.caption("PCA: the two directions along which the key vectors vary most. Crowded keys name themselves on hover.")
taus = np.logspace(-2, 2, 81)
chart(st, entropy_against_tau(taus, entropy_curve(result.scores[0], taus), st.session_state.tau, len(keys)),
          key="entropy")
st.caption("0 = hard retrieval (all weight on one record); ln N = the plain average of all N records.")
st.latex(r"H(\alpha) = -\sum_i \alpha_i \ln \alpha_i \in [0, \ln N],\ N = %d" % len(keys))
save_url_state(SCHEMA)
