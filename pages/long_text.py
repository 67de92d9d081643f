"""Long text: a whole document through a model, every head's attention over up to the model's own context (model.scan,
block by block, exact, without the n × n matrix), and a needle in a haystack with the heads that fetch it (attnviz.needle)."""

import hashlib
import os
import sys

import numpy as np
import streamlit as st

from attnviz import models, needle, scan_file
from attnviz.export import Matrix
from attnviz.models import census, head_files
from attnviz.models.errors import ENGINE_FAMILIES
from attnviz.figures import PALETTES, long as drawn
from attnviz.urlstate import Param, bounded_text, choice, encode_int_list, int_list, int_range
from appkit.common import bounded_text_box, halt, load_url_state, md_escape, save_url_state, stop
from appkit.interactive import census_map, head_atlas, head_overview, screen_sizes, shaded_document
from appkit.served import (example_document, example_needle_work, example_retrieval_scores, example_scan,
                           example_scan_progress, free_at_start, load_or_stop, pick_model)
from appkit.model_views import row_sum
from appkit.present import chart

ASK_HEADS = 8  # the retrieval heads "Ask your document" marks and turns off, as the pass-key test turns off
TEXT_CHARS = 200_000  # a model's whole context (SmolLM2's 8,192 pieces) is about 40,000 characters of English
NEEDLE_LENGTHS = (500, 1000, 2000, 4000)  # longer ones: attnviz.needle.needle in the library
NEEDLE_DEPTHS = (0.0, 0.5, 1.0)
SCHEMA = {
    "model": Param("smollm2", bounded_text(100)),
    "layer": Param(1, int_range(1, 1024)),
    "head": Param(1, int_range(1, 1024)),
    "sort": Param("layer", choice(drawn.SORTS)),
    "zoom": Param([], int_list, encode_int_list),  # the tile's blocks (figures.long.tile_region); [] the whole overview
    "query": Param(-1, int_range(-1, 1_000_000)),  # the shaded document's query; -1 the last piece
    "doc": Param("", bounded_text(16)),  # the text the view (block, query) was made on: its digest's first 12 hex digits
    "palette": Param("viridis", choice(PALETTES)),
}

st.title("Long text")
load_url_state(SCHEMA)
name = pick_model(("decoder", "encoder"), "smollm2")
model = load_or_stop(name, lambda message: stop(message, SCHEMA, error=True))
if not model.can_scan:
    stop(f"{name} is computed by transformers, which keeps every layer's n × n weights at once; a whole document needs "
         f"a model attnviz's engine computes ({ENGINE_FAMILIES}).", SCHEMA, error=True)
try:
    bound = models.scan_memory(sys.argv, dict(os.environ))
except ValueError as error:  # a malformed setting: said, and the default kept
    st.warning(f"{error} The default is used meanwhile: the model's context where a scan of it grows the server by at "
               "most 1 GiB.")
    bound = models.DEFAULT_BOUND
free = free_at_start()
limit = model.scan_limit(bound, free)
reach = (f"{name}'s own context of {model.context:,} pieces" if limit >= model.context else
         f"{limit:,} pieces: {name} reads {model.context:,}, and {bound.limit_words(free)}. To read the whole context, "
         "start it with `attnviz --scan-memory all` (or a size it may keep, such as 2GiB; the setting "
         "ATTNVIZ_SCAN_MEMORY does the same); the library's model.scan reads it whole")
st.write(f"Every head's attention over a whole document, up to {reach}. "
         "The scan computes each layer one block of queries at a time and keeps what is drawn below; any block's exact "
         "weights are computed again when it is opened, so no n × n matrix is held.")
for note in model.notes:
    st.caption(note)


def text_of_upload() -> str | None:
    upload = st.file_uploader("Or a text file (.txt, UTF-8)", type=["txt"], key="long_file",
                              max_upload_size=models.MAX_UPLOAD_BYTES // 1_000_000)
    if upload is None:
        return None
    try:
        return models.read_text(upload.getvalue(), "This file")
    except ValueError as error:
        st.error(md_escape(f"{error} The text box is read instead."))
        return None


@st.fragment(run_every=1.0)
def scanning_example(name: str) -> None:
    """The example scan's progress (the server's own job: appkit.served.example_scan), checked every second; when it
    is done, the whole page is drawn again."""
    done, total, ready = example_scan_progress(name)
    if ready:
        st.rerun(scope="app")
    st.progress(done / total if total else 0.0, text=f"Scanning the example document: block {done:,} of {total or '…'}")


def lab_heads(name: str) -> tuple[tuple[int, int], ...]:
    """The retrieval heads of the example pass-key document, strongest first: the heads the page stars, and turns off."""
    return needle.strongest_heads(example_retrieval_scores(name), ASK_HEADS)


def ask_section(name: str, model, text: str, digest: str) -> None:
    """Ask your document: the model's answer written after the text, where each piece was copied from and by which
    heads (the lab's retrieval heads marked), and the answer again without those heads and without random ones."""
    st.header("Ask your document")
    st.write(f"End your text with a question, as “What is the pass key? The pass key is”. {name} writes its answer "
             f"greedily, at most {needle.ASK_STEPS} pieces, from the text read into its K/V cache as the pass-key test "
             "reads its documents. For each piece it writes: the piece of your text it was copied from (the one the "
             "most heads had as their strongest key, holding the same piece), and those heads; ★ marks a retrieval "
             "head of the example pass-key document.")
    key = f"long_ask_{name}"
    held = st.session_state.get(key)
    if held is not None and held[0] != digest:
        held = None
    left, right = st.columns(2)
    write = left.button("Write the answer", key="long_ask_write")
    off = right.button(f"Write it without the {ASK_HEADS} retrieval heads, and without {ASK_HEADS} random ones",
                       key="long_ask_off")
    if write or off:
        try:
            heads = lab_heads(name) if off else ()
        except models.ModelError as error:
            return st.info(str(error))
        reads = 1 + 2 * bool(heads)
        bar = st.progress(0.0, text="Reading the text…")
        try:
            asked = needle.ask(model, text, retrieval=heads, progress=lambda done, total: bar.progress(
                done / total, text=f"Reading the text: {done:,} of {total:,} layers ({reads} answer{'s' * (reads > 1)})"))
        except (models.TextError, models.ModelError) as error:
            bar.empty()
            return st.info(str(error))
        bar.empty()
        st.session_state[key] = held = (digest, asked)
    if held is None:
        return
    asked = held[1]
    try:
        marked = set(lab_heads(name))
    except models.ModelError:
        marked = set()
    st.markdown(f"{name} writes: **{md_escape(asked.written.text.strip()) or '(nothing: its end piece)'}**")
    st.dataframe(drawn.answer_rows(asked, model.reader.labels(asked.written.ids), marked), hide_index=True,
                 width="stretch")
    if asked.removed:
        named = lambda heads: ", ".join(f"L{l + 1}H{h + 1}" for l, h in heads)  # noqa: E731
        for label, which in (("the strongest retrieval heads", "strongest"), ("random heads of the same layers", "random")):
            answer = asked.without[which].text.strip()
            st.markdown(f"Without {label} ({named(asked.removed[which])}): **{md_escape(answer) or '(nothing)'}** "
                        f"({'the same answer' if asked.same(which) else 'another answer'}).")
        st.caption("Removed: each head's output set to 0 before W_o, while the text is read and the answer written. One "
                   "text is one trial: whether a change is more than chance needs many documents, as the pass-key "
                   "test below gives them, with intervals.")


def census_of(name: str, model, scan, digest: str):
    """The scan's census (attnviz.models.census), once for this session's text; with the needle lab's retrieval scores
    (Wu et al.) on the example pass-key document where the server has them."""
    wu = None
    if model.kind == "decoder":
        found = example_needle_work(name).ready(st.empty())  # the server's job; meanwhile, the census without it
        wu = None if found is None else example_retrieval_scores(name)
    held = st.session_state.get("long_census")
    if held is None or held[0] != (digest, wu is not None):
        bar = st.progress(0.0, text="Taking the census of every head…")
        found = census.census(scan, wu=wu, progress=lambda done, total: bar.progress(
            done / total, text=f"Taking the census of every head: layer {done:,} of {total:,}"))
        bar.empty()
        st.session_state.long_census = held = ((digest, wu is not None), found)
    return held[1]


def census_section(name: str, model, scan, digest: str, chosen: tuple[int, int], open_head) -> None:
    """What each head does: the census map (thresholds live in the browser), and the chosen head's evidence."""
    found = census_of(name, model, scan, digest)
    rules = found.rules
    st.header("What each head does")
    st.write(f"Each head's weight, from this scan's one pass: how much of each long row (a query past the first "
             f"{found.long_from:,} pieces) lands on the first {rules.sinks} pieces and the {rules.recent} up to the "
             "query (StreamingLLM's sinks, DuoAttention's streaming heads), how much beyond them (what a retrieval "
             "head needs), on the piece before and nearby; and how much of it MInference's A-shape, vertical-slash and "
             f"block-sparse patterns keep at {rules.budget} keys a query. Move a threshold: the classes, the counts and "
             "the KV cache change here at once. A head's cell opens it below.")
    census_map(drawn.census_data(found, chosen, font_px=screen_sizes()["font_px"]), key="long_census_map",
               on_open=open_head)
    st.caption("The rules, first that holds: " + "; ".join(f"**{census.CLASS_NAMES[c]}**: {rules.statements()[c]}"
                                                           for c in census.CLASSES) + "."
               + ("" if found.wu is not None else " Wu et al.'s retrieval score joins the rule once the server has "
                  "read the example pass-key document."))
    st.download_button("Download this scan and its census (.safetensors)",
                       lambda: scan_file.write(scan, model, found), f"attnviz_scan_{name}_{digest[:12]}.safetensors",
                       "application/octet-stream", on_click="ignore",
                       help="Every head's overview, first-piece share, entropy, strongest keys, verticals, slashes, "
                            "census and each query's log-sum-exp, with the model, its revision, the text's SHA-256 and "
                            "the pieces: any tile's exact weights are exp(score − lse). Read by the safetensors "
                            "package in any language (docs/scan-file.md).")
    layer, head = chosen
    st.subheader("The chosen head's evidence")
    kind = census.CLASS_NAMES[census.CLASSES[found.classify()[layer, head]]]
    st.write(f"Layer {layer + 1}, head {head + 1} (open another on the map or the atlas): "
             + drawn.census_evidence_words(found, layer, head, kind))
    left, middle, right = st.columns(3)
    for where, what, (title, values, labels, corner) in zip((left, middle, right), ("keys", "offsets", "recall"),
                                                            drawn.census_evidence(scan, found, layer, head)):
        chart(where, drawn.evidence_bars(values, labels, title), key=f"long_census_{what}",
              matrix=Matrix(values[None], [corner.split(" ")[0]], labels, corner=corner))
    paper_beside(found)


def paper_beside(found) -> None:
    """A community file of this model's heads (head_files.LAYOUTS), what it says drawn beside what this document
    shows, head by head."""
    st.subheader("A paper's file beside this document")
    st.write("DuoAttention's `full_attention_heads.tsv`, MInference's best-pattern JSON or Retrieval_Head's "
             "`head_score` JSON for this model: what the file says about each head, beside the same measure on this "
             "document.")
    upload = st.file_uploader("A head file (.tsv or .json)", type=["tsv", "json"], key="long_head_file",
                              max_upload_size=max(1, head_files.MAX_CHARS // 1_000_000))
    if upload is None:
        return
    try:
        shown = head_files.beside(found, upload.name, upload.getvalue())
    except ValueError as error:
        st.error(md_escape(str(error)))
        return
    st.write(f"{shown.layout}: {shown.sentence}")
    st.caption(shown.meaning)
    layers, heads = shown.said.shape
    rows, cols = [f"L{l + 1}" for l in range(layers)], [f"H{h + 1}" for h in range(heads)]
    for where, what, title, values in zip(st.columns(2), ("file", "document"), (shown.said_title, shown.shown_title),
                                          (shown.said, shown.shown)):
        chart(where, drawn.beside_map(values, rows, cols, title), key=f"long_beside_{what}",
              matrix=Matrix(values.astype(np.float32), rows, cols, corner="layer \\ head"))


def document(name: str, model, limit: int, grid) -> None:
    """The document part: the text, its scan, every head's overview, one head's blocks and the shaded text. An
    unreadable file or text ends this part with its message; the needle lab below goes on."""
    if "long_text" not in st.session_state:
        st.session_state.long_text = example_document(name).pieces.text
    typed = bounded_text_box(st.text_area, "Text", key="long_text", limit=TEXT_CHARS, height=160)
    uploaded = text_of_upload()
    text = uploaded if uploaded is not None else typed
    st.caption("The link keeps the model and the view (head, sort, block, query), not the text: after a reload, paste or "
               "upload the text again." + (" The uploaded file is read instead of the box." if uploaded is not None else ""))

    digest = hashlib.sha256(f"{name}\x00{text}".encode()).hexdigest()
    held = st.session_state.get("long_scan")
    if held is None or held[0] != digest:
        if text == example_document(name).pieces.text:
            try:
                found = example_scan(name)
            except models.ModelError as error:
                return halt(str(error), SCHEMA, error=True)
            if found is None:
                scanning_example(name)
                return halt("The example document is being scanned once for this server; its heads show here when it "
                            "is done. Paste or upload your own text meanwhile.", SCHEMA)
            st.session_state.long_scan = held = (digest, found)
        elif not st.button("Scan", type="primary"):
            return halt("Press Scan to read the text.", SCHEMA)
    if held is None or held[0] != digest:
        bar = st.progress(0.0, text="Scanning…")
        try:
            scan = model.scan(text, limit=limit, progress=lambda done, total: bar.progress(done / total, text=f"Scanning: block {done:,} of {total:,}"))
        except models.TextError as error:
            bar.empty()
            return halt(str(error), SCHEMA, error=bool(text.strip()))
        bar.empty()
        st.session_state.long_scan = held = (digest, scan)
        st.session_state.query, st.session_state.zoom = -1, []
    scan = held[1]
    n = len(scan)
    text_id = digest[:12]  # the link names the text its view was made on by this, never by the text
    if st.session_state.doc not in ("", text_id) and (st.session_state.zoom or st.session_state.query != -1):
        st.info("This link's view (its block and query) was made on another text than the one here, so it is not "
                "applied to this one: the whole overview and the last piece are shown. A link keeps the view, not the "
                "text: paste or upload that text, press Scan, and open the link again.")
        st.session_state.zoom, st.session_state.query = [], -1
    st.session_state.doc = text_id

    layer = min(st.session_state.layer, scan.layers)
    head = min(st.session_state.head, scan.heads)
    st.session_state.layer, st.session_state.head = layer, head

    def open_head(chosen: tuple[int, int]) -> None:
        st.session_state.layer, st.session_state.head = chosen[0] + 1, chosen[1] + 1
        st.session_state.zoom = []

    st.header(f"Every head over {n:,} pieces")
    sort = st.radio("Sort each layer's heads by", list(drawn.SORTS), key="sort", horizontal=True,
                    format_func=drawn.SORTS.get)
    if sort == "retrieval" and grid is None:
        st.info("The retrieval score comes from the needle in a haystack below: run it to sort by it.")
    head_atlas(drawn.scan_atlas(scan, (layer - 1, head - 1), sort, None if grid is None else grid.scores,
                                st.session_state.palette, font_px=screen_sizes()["font_px"]), key="long_atlas",
               on_open=open_head)
    st.caption("Each thumbnail is one head's overview: row a, column b is the mean over the queries of block a of their "
               f"weight on the keys of block b (blocks of {scan.block} pieces; each row {row_sum(model)}, drawn "
               "with 1 = its row's "
               "largest). Click a head to open it.")

    census_section(name, model, scan, digest, (layer - 1, head - 1), open_head)

    st.header(f"Layer {layer}, head {head}")
    zoom = st.session_state.zoom

    def take_region(blocks: list[int]) -> None:
        st.session_state.zoom = blocks  # checked by tile_region in the run that follows, as a link's value is

    region = drawn.tile_region(scan, zoom)
    dropped = []  # what the link held that this text has no room for
    if region is None:
        if zoom:
            dropped.append(f"block {','.join(str(b) for b in zoom)}")
        st.session_state.zoom = []
    if st.session_state.query >= n:
        dropped.append(f"query #{st.session_state.query}")
    if dropped:
        st.info(f"The link's {' and '.join(dropped)} fall{'s' if len(dropped) == 1 else ''} outside this text of "
                f"{n:,} pieces, so the whole overview and the last piece are shown. A link keeps the view, not the "
                "text: if it was made on another text, paste or upload that text and press Scan.")
    head_overview(drawn.overview_data(scan, layer - 1, head - 1, region, palette=st.session_state.palette,
                                      font_px=screen_sizes()["font_px"]), key="long_overview", on_region=take_region)
    if region is None:
        st.caption("Click a block to see its exact weights, piece by piece, or drag over a region of blocks. Hover names "
                   "each block's pieces by position, and its first and last piece in quotes, where · is a space and ↵ "
                   "a line break.")
    else:
        if drawn.drawn_region(scan, *region) != region:
            st.caption(f"The region is more than {drawn.TILE_PIECES} pieces a side: its first {drawn.TILE_PIECES} a side "
                       "are drawn. Drag a smaller box for the rest.")
        st.caption("Exact weights α = e^{q·k/√d_k − log Σ}, from the queries, keys and each query's log-sum-exp the scan "
                   "kept, drawn on a square-root scale. Grey: keys the mask hides.")

    query = st.session_state.query if 0 <= st.session_state.query < n else n - 1
    st.session_state.query = query

    def pick_query(position: int) -> None:
        if 0 <= position < n:
            st.session_state.query = position

    shaded_document(drawn.document_data(scan, layer - 1, head - 1, query), key="long_document", on_query=pick_query)
    st.caption("Click a piece to make it the query. Hover gives a piece's position and weight.")

    st.header("Where the last piece reads from")
    rows = drawn.reads_from(scan, top=1, past_first=True)[:12]
    st.dataframe([{"layer": r["layer"], "head": r["head"], "weight": round(r["weight"], 4), "key": r["key"],
                   "piece": r["piece"], "text before": r["before"], "text after": r["after"]} for r in rows],
                 hide_index=True, width="stretch")
    st.caption(f"The 12 heads whose strongest key for the last piece (#{n - 1}), the first piece left aside, weighs most, "
               "with the text around that key. The first piece is left aside because many heads park their weight there "
               f"(a sink): {float(scan.sink.mean()):.2f} of each query's weight on average, over every head.")
    if model.kind == "decoder":
        ask_section(name, model, text, digest)


grid = st.session_state.get(f"long_needle_{name}")
document(name, model, limit, grid)

st.header("A needle in a haystack")
if model.kind != "decoder":
    st.info("The pass-key test writes an answer, so it needs a decoder.")
    save_url_state(SCHEMA)
    st.stop()
st.write("Pass-key documents (Mohtashami and Jaggi, 2023): filler text that says nothing, with “The pass key is "
         "NNNNN. Remember it.” hidden at a depth, and the question at the end. The model writes greedily; a head "
         "*retrieves* a piece when, as the model copies a piece of the needle, that head's strongest key is the same "
         "piece inside the needle (Wu et al., 2024). Its score: retrievals over the pieces copied, averaged over the "
         "documents.")
fits = [length for length in NEEDLE_LENGTHS if length <= model.context - 16]
lengths = st.multiselect("Lengths (pieces)", fits, default=fits[:2], key="long_lengths")
if st.button("Run the pass-key test") and lengths:
    bar = st.progress(0.0, text="Reading the documents…")
    grid = needle.needle(model, sorted(lengths), NEEDLE_DEPTHS,
                       progress=lambda done, total: bar.progress(done / total, text=f"Reading: {done:,} of {total:,} layers"))
    bar.empty()
    st.session_state[f"long_needle_{name}"] = grid
    st.session_state.pop(f"long_off_{name}", None)
    st.rerun()


if grid is not None:
    chart(st, drawn.needle_grid(grid, f"Keys back: {int(grid.found.sum())} of {grid.found.size} (yellow: found)"),
          key="long_grid")
    strongest = grid.strongest(8)
    st.write("Strongest retrieval heads: " + ", ".join(f"layer {l + 1} head {h + 1} ({grid.scores[l, h]:.2f})"
                                                       for l, h in strongest) + ". Sort the atlas by retrieval score to see them.")
    k = st.slider("Heads to turn off", 1, 16, 8, key="long_k")
    if st.button(f"Turn off the {k} strongest, and {k} random heads of the same layers"):
        bar = st.progress(0.0, text="Reading the documents without the strongest heads, and without random ones…")

        def advance(done: int, total: int) -> None:  # one reading for both sets: the layers below theirs once
            bar.progress(done / total, text=f"Reading the documents without the strongest heads, and without random "
                                            f"ones: {done:,} of {total:,} layers")

        off = needle.without_retrieval_heads(model, k, before=grid, progress=advance)
        bar.empty()
        st.session_state[f"long_off_{name}"] = off
    off = st.session_state.get(f"long_off_{name}")
    if off is not None:
        left, right = st.columns(2)
        chart(left, drawn.needle_grid(off.strongest, f"Without the {len(off.strongest.heads_off)} strongest: "
                                               f"{int(off.strongest.found.sum())} of {off.strongest.found.size}"),
              key="long_off_strong")
        chart(right, drawn.needle_grid(off.random, f"Without {len(off.random.heads_off)} random: "
                                             f"{int(off.random.found.sum())} of {off.random.found.size}"),
              key="long_off_random")
        named = lambda heads: ", ".join(f"layer {l + 1} head {h + 1}" for l, h in heads)  # noqa: E731
        st.caption(f"Removed: each head's output set to 0 before W_o, in every document and every step written. The "
                   f"strongest: {named(off.strongest.heads_off)}. The random ones, one in the layer of each strong "
                   f"head: {named(off.random.heads_off)}.")
        st.caption("Each count is a few trials: " + "; ".join(
            f"{label} {int(g.found.sum())} of {g.found.size}, a share anywhere from {low:.0%} to {high:.0%} (95 % "
            "interval)" for label, g in (("intact", grid), ("without the strongest", off.strongest),
                                         ("without random heads", off.random))
            for low, high in [needle.share_interval(int(g.found.sum()), g.found.size)])
            + ". Intervals that overlap say the documents cannot tell the settings apart; more lengths tell more.")
save_url_state(SCHEMA)
