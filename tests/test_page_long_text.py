"""The Long text page under AppTest: the example document scanned and drawn, each drawn number against transformers'
eager attention on the same pieces (SmolLM2), the link's view kept without the text, bad link values, a text past the
model's context."""

import base64

import numpy as np
import pytest
import torch

from page_support import component_data, messages, run_page

VIEW = {"layer": "20", "head": "9", "sort": "entropy", "zoom": "3,1", "query": "100"}


def components(at) -> dict[str, dict]:
    """The browser figures' data by kind: the atlas, the chosen head's overview and the shaded document."""
    found = {}
    for component in at.get("bidi_component"):
        data = component_data(component)
        kind = "atlas" if "blocks" in data else "overview" if "spans" in data else "document" if "pieces" in data else "other"
        found[kind] = data
    return found


def tile_weights(at) -> np.ndarray:
    """The exact weights the overview's tile holds (r, c)."""
    tile = components(at)["overview"]["tile"]
    shape = (tile["queries"][1] - tile["queries"][0], tile["keys"][1] - tile["keys"][0])
    return np.frombuffer(base64.b64decode(tile["weights"]), "<f4").reshape(shape)


@pytest.mark.slow
def test_every_number_drawn_equals_transformers_eager_attention(smollm2_reference):
    tokenizer, module, _ = smollm2_reference
    at = run_page("long_text.py", VIEW)
    assert not at.exception, at.exception
    scan = at.session_state["long_scan"][1]
    n = len(scan)
    assert 512 < n <= 600  # the example: past what a run reads
    with torch.no_grad():
        out = module(torch.tensor([scan.pieces.ids]), output_attentions=True)
    eager = out.attentions[19][0, 8].double().numpy()  # layer 20, head 9 (n, n)
    weights = tile_weights(at)  # the zoomed block: queries 384–511 on keys 128–255
    assert weights.shape == (128, 128) and np.abs(weights - eager[384:512, 128:256]).max() <= 1e-4
    assert components(at)["overview"]["tile"]["row_names"][0] == scan.pieces.labels()[384]
    region = run_page("long_text.py", {**VIEW, "zoom": "0,1,4,2"})  # a dragged region: row blocks 0–4, key blocks 1–2
    assert region.session_state["zoom"] == [0, 1, 4, 2] and region.query_params["zoom"] == "0,1,4,2"
    weights = tile_weights(region)  # its first 512 queries: 4 blocks of 128
    assert weights.shape == (512, 256) and np.abs(weights - eager[0:512, 128:384]).max() <= 1e-4
    assert any("more than 512 pieces a side" in c.value for c in region.caption)
    document = components(at)["document"]
    row = np.frombuffer(base64.b64decode(document["weights"]), "<f4")
    assert document["query"] == 100 and np.abs(row - eager[100]).max() <= 1e-4
    assert "".join(document["pieces"]) == scan.pieces.text  # the document's text, whole, piece by piece

    blocks = -(-n // 128)
    overview = np.frombuffer(base64.b64decode(components(at)["overview"]["values"]), "<f4").reshape(blocks, blocks)
    expected = np.array([[eager[a * 128:(a + 1) * 128, b * 128:(b + 1) * 128].sum(-1).mean() for b in range(blocks)]
                         for a in range(blocks)])
    assert np.abs(overview - expected).max() <= 1e-4


def test_a_link_keeps_the_view_and_never_the_text():
    at = run_page("long_text.py", VIEW)
    assert not at.exception, at.exception
    assert (at.session_state["layer"], at.session_state["head"], at.session_state["zoom"]) == (20, 9, [3, 1])
    assert {key: at.query_params[key] for key in VIEW} == VIEW and "text" not in at.query_params
    atlas = components(at)["atlas"]
    assert (atlas["layers"], atlas["heads"], atlas["chosen"]) == (30, 9, [19, 8])
    assert atlas["order"] is not None and "entropy" in atlas["title"]  # sorted by the measure the link names
    assert any("not the text" in c.value for c in at.caption)
    tile = components(at)["overview"]["tile"]  # the zoomed block's exact weights, sent with the overview
    assert (tile["queries"], tile["keys"]) == ([384, 512], [128, 256])


def test_presenter_mode_gives_every_figure_of_the_page_the_projectors_type():
    from appkit.present import CHART_FONT_PX

    from streamlit.testing.v1 import AppTest

    from page_support import ROOT, TIMEOUT, example_scanned

    example_scanned()
    at = AppTest.from_file(str(ROOT / "pages" / "long_text.py"), default_timeout=TIMEOUT)
    at.session_state["present"] = True  # presenter mode, as app.py's toggle sets it
    figures = components(at.run())
    assert figures["atlas"]["font_px"] == figures["overview"]["font_px"] == CHART_FONT_PX  # the atlas was left at 14


@pytest.mark.parametrize("params", [
    {"layer": "999", "head": "-3", "zoom": "99,99", "query": "999999", "sort": "<script>"},
    {"zoom": "1,4"},  # a block above the diagonal of a decoder: nothing to read there
    {"zoom": "1,2,3", "palette": "nope", "model": "no such model"},
    {"zoom": "3,0,1,0"},  # a region whose last row block comes before its first
    {"zoom": "0,2,1,4"},  # a region of keys after every one of its queries
])
def test_bad_link_values_fall_back_and_say_so(params):
    at = run_page("long_text.py", params)
    assert not at.exception, at.exception
    assert at.session_state["zoom"] == [] and components(at)["overview"]["tile"] is None  # the whole overview
    assert 1 <= at.session_state["layer"] <= 30 and 1 <= at.session_state["head"] <= 9
    if "model" in params:
        assert "offers no model called" in messages(at)
    if params.get("query") == "999999":  # a link of a longer text, reloaded: the page says what it could not show
        assert "The link's block 99,99 and query #999999 fall outside this text" in messages(at)
        assert "paste or upload that text and press Scan" in messages(at)


def test_an_encoder_whose_context_is_shorter_than_the_example_scans_an_example_that_fits():
    at = run_page("long_text.py", {"model": "minilm", "zoom": "1,2"})  # a key block after the query block: an encoder's
    assert not at.exception, at.exception
    scan = at.session_state["long_scan"][1]
    assert 400 < len(scan) <= 512  # MiniLM reads 512 pieces, special ones included
    overview = components(at)["overview"]
    assert overview["causal"] is False and overview["tile"]["keys"] == [256, 384]  # read in an encoder


def test_a_text_past_the_models_context_says_so_and_keeps_it():
    at = run_page("long_text.py")
    at.text_area(key="long_text").input("dog " * 9000).run()
    assert not at.exception and at.get("progress") == []
    scan_button = next(b for b in at.button if b.label == "Scan")
    scan_button.click().run()
    assert not at.exception
    # the default bound: the model's own context, 8,192 pieces (a scan of them grows the server by under 1 GiB)
    assert "reads at most 8,192 pieces here" in messages(at) and "Shorten it by about 809 pieces" in messages(at)
    assert "up to smollm2's own context of 8,192 pieces" in " ".join(m.value for m in at.markdown)
    assert at.text_area(key="long_text").value == "dog " * 9000
    # the text's error ends the document part only: the needle lab, which does not read the text, is still there
    assert any(h.value == "A needle in a haystack" for h in at.header)
    assert any(b.label == "Run the pass-key test" for b in at.button)


def test_the_shaded_document_is_the_text_whole_once_with_one_weight_a_piece(tmp_path):
    """Pieces that share a character (an emoji's bytes) show it once; markup stays text (set as textContent)."""
    from test_scan import build

    from attnviz import models
    from attnviz.figures import long as drawn

    model = models.load(build("gpt2", tmp_path), device="cpu")
    text = "the dog 🐕 ran, 東京 <b>x</b> and   spaces."
    scan = model.scan(text)
    document = drawn.document_data(scan, 1, 2, len(scan) - 1)
    assert "".join(document["pieces"]) == text and len(document["pieces"]) == len(scan)
    row = np.frombuffer(base64.b64decode(document["weights"]), "<f4")
    assert np.array_equal(row, scan.tile(1, 2, range(len(scan) - 1, len(scan)), range(0, len(scan)))[0])
    assert abs(row.sum() - 1) < 1e-5 and document["largest"] == pytest.approx(float(row.max()))


@pytest.mark.slow
def test_turning_the_retrieval_heads_off_names_both_sets_and_says_how_sure_the_counts_are():
    from attnviz import needle

    at = run_page("long_text.py")
    at.multiselect(key="long_lengths").set_value([500]).run()
    next(b for b in at.button if b.label == "Run the pass-key test").click().run()
    assert not at.exception
    at.slider(key="long_k").set_value(2).run()
    next(b for b in at.button if b.label.startswith("Turn off the 2 strongest")).click().run()
    assert not at.exception
    off = at.session_state["long_off_smollm2"]
    said = " ".join(c.value for c in at.caption)
    for l, h in off.strongest.heads_off + off.random.heads_off:
        assert f"layer {l + 1} head {h + 1}" in said
    low, high = needle.share_interval(int(off.random.found.sum()), off.random.found.size)
    assert f"without random heads {int(off.random.found.sum())} of {off.random.found.size}, a share anywhere from " \
           f"{low:.0%} to {high:.0%}" in said


@pytest.mark.parametrize("setting", ["all", "2GiB"])
def test_a_server_set_to_read_the_whole_context_scans_it(setting, monkeypatch):
    """ATTNVIZ_SCAN_MEMORY (or `attnviz --scan-memory`): 'all', or a size that holds SmolLM2's 8,192 pieces (a scan of
    them keeps about 0.9 GB), lifts the page's bound to the model's own context."""
    monkeypatch.setenv("ATTNVIZ_SCAN_MEMORY", setting)
    at = run_page("long_text.py")
    at.text_area(key="long_text").input("dog " * 9000).run()
    next(b for b in at.button if b.label == "Scan").click().run()
    assert not at.exception
    assert "up to smollm2's own context of 8,192 pieces" in " ".join(m.value for m in at.markdown)
    assert "reads at most 8,192 pieces here" in messages(at)


def test_a_malformed_scan_memory_setting_is_said_and_the_default_kept(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_SCAN_MEMORY", "<b>lots</b>")
    at = run_page("long_text.py")
    assert not at.exception
    assert any("ATTNVIZ_SCAN_MEMORY '<b>lots</b>' is not a size" in w.value for w in at.warning)
    assert "up to smollm2's own context of 8,192 pieces" in " ".join(m.value for m in at.markdown)


def test_by_default_the_page_reads_the_models_whole_context_where_the_machine_has_the_memory(monkeypatch):
    """No setting: SmolLM2's 8,192 pieces, whose scan grows the server by under 1 GiB; a machine that had little free
    when the server started bounds it by half of that, and the page says why and how to lift it."""
    from appkit import served
    from attnviz.models.scan import DEFAULT_BOUND, peak_bytes

    monkeypatch.delenv("ATTNVIZ_SCAN_MEMORY", raising=False)
    at = run_page("long_text.py")
    assert not at.exception
    assert "up to smollm2's own context of 8,192 pieces" in " ".join(m.value for m in at.markdown)
    monkeypatch.setattr(served, "free_at_start", lambda: 2**30)
    at = run_page("long_text.py")
    limit = DEFAULT_BOUND.pieces(served.model("smollm2").arch, 2**30)
    assert peak_bytes(served.model("smollm2").arch, limit) <= 2**29
    said = " ".join(m.value for m in at.markdown)
    assert f"up to {limit:,} pieces: smollm2 reads 8,192" in said and "half of the 1.0 GiB this machine had free" in said


def test_a_links_view_made_on_another_text_is_said_and_not_applied():
    """A link's block and query belong to the text they were made on (its `doc`): reloaded onto the example document,
    they are not applied, and the page says why; the example's own link keeps its view."""
    import hashlib

    from appkit.served import example_document

    at = run_page("long_text.py", {"zoom": "1,0", "query": "250", "doc": "0123456789ab"})
    assert not at.exception
    assert "made on another text" in messages(at)
    assert at.session_state["zoom"] == [] and at.session_state["query"] == len(at.session_state["long_scan"][1]) - 1
    own = hashlib.sha256(f"smollm2\x00{example_document('smollm2').pieces.text}".encode()).hexdigest()[:12]
    assert at.session_state["doc"] == own
    again = run_page("long_text.py", {"zoom": "1,0", "query": "250", "doc": own})
    assert "made on another text" not in messages(again)
    assert again.session_state["zoom"] == [1, 0] and again.session_state["query"] == 250


def test_asking_the_document_writes_the_answer_says_where_each_piece_came_from_and_turns_the_heads_off():
    """Ask your document on the example pass-key document: the answer is what needle.ask writes, each row names the
    piece of the text its piece was copied from and the heads that read it (the lab's retrieval heads starred), and
    the second button writes it again without the 8 strongest retrieval heads and without 8 random ones."""
    from appkit.served import example_document, example_needle, model
    from attnviz import needle

    at = run_page("long_text.py")
    assert not at.exception, at.exception
    at.button(key="long_ask_write").click().run()
    assert not at.exception, at.exception
    stack = example_document("smollm2")
    asked = needle.ask(model("smollm2"), stack.pieces.text)
    assert any(f"smollm2 writes: **{asked.written.text.strip()}**" in m.value.replace("\\", "") for m in at.markdown)
    rows = at.dataframe[-1].value
    assert list(rows["written"]) == model("smollm2").reader.labels(asked.written.ids)
    _, events, copied = example_needle("smollm2")
    strongest = needle.strongest_heads(events / max(copied, 1), 8)
    for copy, cell, heads in zip(asked.copies, rows["copied from"], rows["heads"]):
        if copy.position is None:
            assert cell == "not from the text"
            continue
        assert cell.startswith(f"#{copy.position} ")
        for layer, head in copy.heads:
            assert f"L{layer + 1}H{head + 1}" + (" ★" if (layer, head) in strongest else "") in heads
    assert any(stack.needle.start <= copy.position < stack.needle.stop for copy in asked.copies if copy.position)
    at.button(key="long_ask_off").click().run()
    assert not at.exception, at.exception
    said = " ".join(m.value for m in at.markdown)
    assert "Without the strongest retrieval heads (" in said and "Without random heads of the same layers (" in said
    assert all(f"L{layer + 1}H{head + 1}" in said for layer, head in strongest)
