"""The Self-attention page under AppTest: the heatmap's scores and view, the link, long inputs, the step walk, the
nearest words, Compare A | B, positions, a score taken apart."""

import base64
import json
import numpy as np
import pytest
import torch

from page_support import (
    DEFAULT, ROOT, SELF, TIMEOUT, component_data, decode, glove_scores, heatmap, held, live, masked_cells, messages, page, run_page,
    score_apart, sent_figures, softmax, spec_titled, type_sentence, walk_titles,
)


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
    type_sentence(at, "the cat sat")
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
    sent = sent_figures(at)[0]
    assert sent["heads"] == 8 and sent["n"] == sent["m"] == 32  # 8 heads × 32 rows × 2,000 keys ≤ 2**19 scores
    assert len(base64.b64decode(sent["scores"])) == 8 * 32 * 2000 * 4
    assert at.select_slider(key="zw").options == ["8", "16", "32"]


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
    type_sentence(at, "a dog")  # position 3 is gone: back to 0
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


def test_compare_sends_each_sides_raw_scores_and_view_and_takes_back_both_views(glove):
    at = page({"cmp": "1", "b_scoring": "dot", "b_mask": "causal", "b_temp": "0.5"})
    assert not at.exception
    sent = sent_figures(at)[0]
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
    again = sent_figures(at)[0]
    assert again["sides"][1]["view"]["temp"] == 2.0 and again["sides"][1]["view"]["hard"] and again["sides"][0]["view"]["temp"] == 0.2
    assert again["sides"][1]["scores"] == sent["sides"][1]["scores"]  # a view never changes the scores
    at.text_input(key="b_text").input("a dog ran").run()
    other = sent_figures(at)[0]
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
    assert not sent_figures(refused) and "every weight 1/n" in messages(refused)


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


def test_the_downloads_of_a_browser_view_hold_the_weights_it_draws():
    """appkit/interactive.weights_on_screen against the formula written out: softmax(S/τ) over the allowed keys, the
    one-hot argmax (ties to the first key), a causal mask, hidden keys, a row with every key hidden."""
    from appkit.interactive import weights_on_screen

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
    from attnviz.sentence import Config, run
    view = run(x.astype(np.float32), Config(scoring="gaussian", projection="random", heads=3, temperature=0.5))
    np.testing.assert_allclose(rows[0], view.query[1][2], atol=1e-5)
    assert score == pytest.approx(float(view.scores[1][2, 5]), rel=1e-4) and rows[-1].sum() == pytest.approx(score, rel=1e-4)
    assert weight == pytest.approx(float(view.weights[1][2, 5]), rel=1e-4)


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


def test_trained_page_walk_and_comparison():
    at = run_page("trained.py", {"text": "the dog was happy", "steps": "1", "walk": "2", "layer": "2", "head": "3"})
    assert not at.exception
    titles = [str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")) for c in at.get("plotly_chart")]
    assert any(t.startswith("Q of layer 2, head 3") for t in titles)
    assert any(t.startswith("Trained: layer 2, head 3") for t in titles) and any(t.startswith("Toy: GloVe") for t in titles)


@pytest.mark.slow  # several seconds of page runs: the full suite's, not the fast tier's
def test_lesson_buttons_walk_the_steps():
    from appkit.lesson.common import STEP_COUNT

    at = run_page("lesson.py", {"step": str(STEP_COUNT - 1)})
    at.button(key="next").click().run()
    assert at.session_state.step == STEP_COUNT and at.button(key="next").disabled
    at.button(key="previous").click().run()
    at.button(key="previous").click().run()
    assert at.session_state.step == STEP_COUNT - 2 and not at.exception
