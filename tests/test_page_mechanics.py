"""The Scoring functions, Encoder–decoder, Batches and Heads and layers pages under AppTest."""

import base64
import json
import re

import numpy as np

from page_support import ROOT, TIMEOUT, chart_data, decode, held, messages, run_page, sent_figures, softmax


def test_scoring_page_mismatched_dimensions_show_a_message():
    at = run_page("scoring.py", {"dk": "5"})
    assert not at.exception
    assert "same size" in messages(at) and "general" in messages(at)
    assert len(at.get("plotly_chart")) == 2 + 2  # general and additive still draw, plus the two √d plots


def test_scoring_page_controls_change_the_data():
    at = run_page("scoring.py")
    before = decode(chart_data(at, 0)[0]["z"])
    at.slider(key="m").set_value(3).run()
    assert decode(chart_data(at, 0)[0]["z"]).shape == (3, 7) != before.shape


def test_encoder_decoder_page_controls_and_messages():
    at = run_page("encoder_decoder.py")
    assert not at.exception and len(at.get("plotly_chart")) == 3
    cross = decode(chart_data(at, 2)[0]["z"])
    assert cross.shape == (7, 7)
    assert np.all(np.triu(decode(chart_data(at, 1)[0]["z"]), 1) == 0)
    at.text_input(key="src").input("the dog ran").run()
    assert decode(chart_data(at, 2)[0]["z"]).shape == (7, 3)
    at.text_input(key="tgt").input("").run()
    assert "Type both" in messages(at)


def test_batches_page_padding_and_bmm():
    at = run_page("batches.py")
    assert not at.exception and "exactly zero" in " ".join(s.value for s in at.success)
    said = " ".join(c.value for c in at.caption)  # the count agrees with its noun; no doubled brackets
    assert re.search(r"The (1 padding key|[2-9]\d* padding keys), ⟨pad⟩, are masked", said) and "((" not in said
    before = decode(chart_data(at, -1)[0]["z"])
    held(at.select_slider, "item").set_value(1).run()
    assert decode(chart_data(at, -1)[0]["z"]).shape == before.shape and not np.array_equal(decode(chart_data(at, -1)[0]["z"]), before)
    at.text_area(key="batch").input("   ").run()
    assert "at least one sentence" in messages(at)
    at.text_area(key="batch").input("dog\nqzxjvwk").run()
    assert "known word" in messages(at)


def test_heads_page_sends_every_heads_scores_for_the_average_and_the_maximum():
    from attnviz.embeddings import embed, tokenize
    from attnviz.sentence import Config, run

    from appkit.common import glove

    at = run_page("heads.py", {"text": "the cat sat on the mat", "heads": "3", "seed": "7"})
    assert not at.exception
    sent = sent_figures(at)[0]
    assert sent["heads"] == 3 and sent["n"] == sent["m"] == 6 and sent["view"]["over"] == "mean"
    scores = np.frombuffer(base64.b64decode(sent["scores"]), "<f4").reshape(3, 6, 6)
    engine = run(embed(tokenize("the cat sat on the mat"), glove()).vectors, Config(projection="random", heads=3, d_k=16, seed=7))
    assert np.allclose(softmax(scores.astype(np.float64)).mean(0), engine.mean_weights, atol=1e-6)
    at.session_state["over"], at.session_state["mask"] = "max", "causal"  # a view the browser sent
    at.run()
    assert not at.exception and at.query_params["over"] in ("max", ["max"]) and at.query_params["mask"] in ("causal", ["causal"])
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(sent_figures(at)[0]["scores"]),
                                                "<f4").reshape(3, 6, 6), scores)  # the browser's view never changes the scores


def test_heads_page_controls_change_the_data():
    at = run_page("heads.py")
    assert not at.exception
    names = {t.get("name") for t in chart_data(at, 0)} - {"queries", "keys", "lines"}
    assert names == {"head 0"}  # the line view opens on one head: every word × every head is a hairball
    held(at.selectbox, "lhead").set_value(-1).run()
    assert {t.get("name") for t in chart_data(at, 0)} >= {"head 0", "head 1", "head 2", "head 3"}
    held(at.selectbox, "focus").set_value(3).run()
    line_traces = [t for t in chart_data(at, 0) if t.get("mode") == "lines" and t.get("showlegend") is False and t.get("name") == "lines"]
    assert line_traces and {y for t in line_traces for y in list(t["y"])[0::3]} == {3}
    rollout_before = decode(chart_data(at, -1)[0]["z"])
    at.slider(key="layers").set_value(5).run()
    assert not np.array_equal(decode(chart_data(at, -1)[0]["z"]), rollout_before)
    at.text_input(key="text").input("").run()
    assert "Type a sentence" in messages(at)


def test_encoder_decoder_names_each_attention_its_formula_and_mask_shape():
    at = run_page("encoder_decoder.py", {"src": "the black cat sat", "tgt": "a cat sat on a mat"})
    assert [h.value for h in at.subheader][:3] == ["Encoder", "Decoder, causal", "Cross-attention"]
    formulas = [f.value for f in at.latex]
    assert any(r"a(X_s, X_s)" in f for f in formulas) and any(r"j \le i" in f for f in formulas) and any("a(D, H)" in f for f in formulas)
    captions = " ".join(c.value for c in at.caption)
    for shape in ("(1, 1, 4, 4)", "(1, 1, 6, 6)", "(1, 1, 6, 4)"):
        assert f"mask (B, 1, T_q, T_k) = {shape}" in captions
    assert "1 mask shared by every head" in captions  # the shape explained in words
    titles = [str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")) for c in at.get("plotly_chart")]
    assert titles == ["source × source", "target × target", "target × source"]
    table = at.dataframe[0].value
    assert table["target word"].tolist()[:2] == ["#0 a", "#1 cat"]
    assert table["top source words"].str.match(r"^#\d+ \w+ \(\d\.\d\d\)").all()  # every word with its position
