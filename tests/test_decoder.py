"""The built-in decoder (SmolLM2-135M from its GGUF file, through attnviz.models) against transformers'
LlamaForCausalLM loaded from the same file, and its causal, grouped-query attention, the next-token distribution, the
logit lens and the page against the formulas."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz import models
from attnviz.models import gguf
from attnviz.models.engine import Norm
from tolerance import assert_close_rounding

# Kept apart from the page's and the lesson's examples.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "In 1492, Columbus sailed across the ocean with 3 ships.",
    "def add(a, b):\n    return a + b",
    "東京は日本の首都です 🙂 and Zürich is in Switzerland.",
    "She opened the window because the room was too warm, and the birds outside began to sing.",
]


@pytest.fixture(scope="module")
def model():
    return models.load("smollm2", device="cpu")  # from the machine's cache once any run has filled it


@pytest.mark.slow  # de-quantizes the GGUF file afresh: 15 s
def test_the_first_load_writes_the_cache_and_a_second_reads_back_the_same_model(model, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path))
    first = models.load("smollm2", device="cpu")  # from the GGUF file, written to the cache
    assert any(tmp_path.iterdir())
    again = models.load("smollm2", device="cpu")  # read back from the cache
    sentence = SENTENCES[0]
    assert np.array_equal(first.run(sentence).weights, again.run(sentence).weights)
    assert np.array_equal(again.run(sentence).next_logits, model.run(sentence).next_logits)


@pytest.fixture(scope="module")
def reference(smollm2_reference):
    tokenizer, module, _ = smollm2_reference
    return tokenizer, module


@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.slow
def test_matches_transformers_llama_from_the_same_file(model, reference, sentence):
    tokenizer, llama = reference
    ids = tokenizer(sentence).input_ids
    result = model.run(sentence)
    assert result.pieces.ids == ids
    with torch.no_grad():
        out = llama(torch.tensor([ids]), output_attentions=True)
    assert len(result.weights) == len(out.attentions) == 30
    for ours, theirs in zip(result.weights, out.attentions):
        assert ours.shape == (9, len(ids), len(ids))
        np.testing.assert_allclose(ours, theirs[0].numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(result.next_logits, out.logits[0, -1].numpy(), atol=1e-3, rtol=0)


def test_the_dog_sentence_predicts_happy_among_five(model):
    result = model.run("When he saw his owner, the dog was")
    top = np.argsort(-result.next_logits)[:5]
    assert " happy" in [model.tokenizer.decode([int(i)]) for i in top]


def test_attention_is_causal_and_each_key_value_head_is_shared_by_three_query_heads(model):
    result = model.run(SENTENCES[4])
    w = result.weights  # (30, 9, n, n)
    n = w.shape[-1]
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    assert (w[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0).all()  # the future: exactly 0
    for layer, trace in enumerate(result.traces):
        assert trace.key.shape == trace.value.shape == (3, n, 64) and trace.query.shape == (9, n, 64)
    assert not np.allclose(w[5, 0], w[5, 1])  # a group shares K and V, not its queries


@pytest.mark.slow
def test_each_heads_scores_differ_across_a_row_as_transformers_log_weights_do(model, reference):
    """The scores our engine keeps, checked against transformers' eager weights rather than against our own q·kᵀ:
    within a row, s_ij − s_ij* = log α_ij − log α_ij* for j* the row's strongest key (a softmax's constant cancels).
    Cells with α ≥ 1e-4 only: float32's error of about 1e-7 in α is at most 1e-3 in log α there."""
    tokenizer, llama = reference
    ids = tokenizer(SENTENCES[4]).input_ids
    result = model.run(SENTENCES[4])
    with torch.no_grad():
        theirs = torch.stack(llama(torch.tensor([ids]), output_attentions=True).attentions)[:, 0].double().numpy()
    for layer in (0, 14, 29):
        for head in range(9):
            scores, weights = result.head_scores(layer, head).astype(np.float64), theirs[layer, head]  # (n, n) each
            strongest = weights.argmax(-1)  # (n,)
            rows = np.arange(len(ids))
            ours = scores - scores[rows, strongest][:, None]
            logs = np.log(np.maximum(weights, 1e-300)) - np.log(weights[rows, strongest])[:, None]
            kept = weights >= 1e-4
            assert np.abs(ours - logs)[kept].max() < 2e-3, (layer, head)


def test_rms_norm_and_the_feed_forward_are_the_formulas(model):
    x = torch.randn(4, 576)
    norm: Norm = model.weights.layers[0].mlp_norm
    assert norm.kind == "rms" and norm.bias is None
    expected = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + norm.eps) * norm.weight
    torch.testing.assert_close(norm(x), expected)


def test_next_distribution_follows_temperature_top_k_and_top_p():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    p = np.exp(logits.numpy() / 0.5)
    p /= p.sum()
    np.testing.assert_allclose(models.next_distribution(logits, 0.5), p, rtol=1e-5)
    two = models.next_distribution(logits, 1.0, top_k=2).numpy()
    soft = np.exp(logits.numpy()[:2]) / np.exp(logits.numpy()[:2]).sum()
    np.testing.assert_allclose(two, [*soft, 0, 0, 0], rtol=1e-5)
    full = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum()  # 0.563, 0.207, 0.126, 0.076, 0.028
    nucleus = models.next_distribution(logits, 1.0, top_p=0.75).numpy()  # the top two reach 0.770 ≥ 0.75
    np.testing.assert_allclose(nucleus, [*(full[:2] / full[:2].sum()), 0, 0, 0], rtol=1e-5)
    wider = models.next_distribution(logits, 1.0, top_p=0.8).numpy()  # 0.770 < 0.8: the third joins
    np.testing.assert_allclose(wider, [*(full[:3] / full[:3].sum()), 0, 0], rtol=1e-5)
    assert models.next_distribution(logits, 1.0, top_p=0.01).numpy().tolist() == [1, 0, 0, 0, 0]
    assert models.next_distribution(logits, 0.0).numpy().tolist() == [1, 0, 0, 0, 0]  # greedy


def test_the_logit_lens_of_the_last_layer_is_the_models_prediction(model):
    result = model.run(SENTENCES[0])
    ids, probs = model.logit_lens(result.hidden, top=3)
    n = len(result.pieces)
    assert ids.shape == probs.shape == (31, n, 3) and (np.diff(probs, axis=-1) <= 0).all()
    assert ids[-1, -1, 0] == int(np.argmax(result.next_logits))
    final = torch.softmax(torch.from_numpy(result.next_logits), -1).max().item()
    assert probs[-1, -1, 0] == pytest.approx(final, rel=1e-4)


def test_the_logit_lens_table_holds_each_layers_prediction_and_its_probability(model):
    result = model.run(SENTENCES[0])
    ids, probs = model.logit_lens(result.hidden)  # (31, n, 1) each
    n, labels = len(result.pieces), result.pieces.labels()
    table = models.logit_lens_table(model, result, 3)
    assert list(table) == ["layer", *(f"#{i} {labels[i]}" for i in range(n - 3, n))]
    assert table["layer"] == ["embeddings", *map(str, range(1, 31))]
    for column, i in zip(list(table)[1:], range(n - 3, n)):
        assert table[column] == [f"{model.reader.labels([int(ids[l, i, 0])])[0]} {probs[l, i, 0]:.2f}" for l in range(31)]


def test_next_piece_is_the_argmax_or_a_draw_seeded_by_the_seed_and_the_position():
    logits = torch.tensor([2.0, 1.5, 1.0, 0.2, -1.0])  # (5,)
    assert models.next_piece(logits, 0.7, 0, 0.95) == 0  # no seed: the most likely
    probs = models.next_distribution(logits, 0.7, 0, 0.95)
    drawn = [models.next_piece(logits, 0.7, 0, 0.95, seed=3, position=p) for p in range(40)]
    expected = [int(torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(3 + p))) for p in range(40)]
    assert drawn == expected and len(set(drawn)) > 1  # seeded per position, and really drawn
    assert {models.next_piece(logits, 1.0, 2, 1.0, seed=s) for s in range(50)} == {0, 1}  # top-k 2 keeps two


def test_bad_text_gets_a_reason(model):
    for text in ["", "   \n\t"]:
        with pytest.raises(models.TextError, match="Type a text"):
            model.tokenize(text)
    with pytest.raises(models.TextError, match="at most 512 pieces"):
        model.tokenize("dog " * 600)
    tokens = model.tokenize("dog " * 300)  # up to 512 pieces: read
    assert len(tokens.ids) <= 512
    odd = model.run("🙂 北京 <b>x</b> &amp; \u0301")
    assert np.isfinite(odd.weights).all() and len(odd.pieces.labels()) == len(odd.pieces.ids)


# ---------------------------------------------------------------- the page


def decoder_page(params=None):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "decoder.py"), default_timeout=180)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.run()
    charts = {c.proto.id: c for c in at.get("plotly_chart")}
    specs = [json.loads(c.proto.spec) for c in charts.values()]
    return at, specs


def titled(specs, start: str) -> dict:
    return next(s for s in specs if str(s["layout"].get("title", {}).get("text", "")).startswith(start))


def z_of(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or numpy's typed-array encoding {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value)


def components(at) -> list[dict]:
    """The page's browser figures in order, each's numbers decoded: a heatmap's raw scores (n, m), a matrix's or bar
    chart's values, the atlas's thumbnails left as they are."""
    from page_support import component_data

    out = []
    for element in at.get("bidi_component"):
        data = component_data(element)
        if data.get("kind") == "matrix":
            data["values"] = np.frombuffer(base64.b64decode(data["values"]), "<f4").reshape(data["n"], data["m"])
        elif data.get("kind") == "bars":
            data["values"] = np.frombuffer(base64.b64decode(data["values"]), "<f4")
        elif data.get("scores"):
            data["scores"] = np.frombuffer(base64.b64decode(data["scores"]), "<f4").reshape(data["n"], data["m"])
        out.append(data)
    return out


def live(at, index: int = 0) -> dict:
    """The index-th of the page's interactive figures that is not a figure of final numbers (the atlas, the heatmap)."""
    return [d for d in components(at) if d.get("kind") not in ("matrix", "bars")][index]


def figure_titled(at, start: str) -> dict:
    return next(d for d in components(at) if d.get("kind") in ("matrix", "bars") and d["title"].startswith(start))


def test_the_page_draws_the_chosen_head_sinks_and_the_next_word(model):
    text = "When he saw his owner, the dog was"
    at, specs = decoder_page({"layer": "3", "head": "5", "t": "0", "lens": "1", "lines": "1"})  # T = 0: greedy
    assert not at.exception
    engine = model.run(text)
    atlas, head = live(at, 0), live(at, 1)
    assert (atlas["layers"], atlas["heads"], atlas["group"], atlas["chosen"]) == (30, 9, 3, [2, 4])
    assert head["title"].startswith("Layer 3, head 5") and head["masks"] == {"causal": "causal", "causal_keys": "causal, hide keys"}
    assert head["view"]["mask"] == "causal" and head["view"]["query"] == 8  # the last piece, the one that predicts
    q, k = engine.traces[2].query[4].numpy(), engine.traces[2].key[1].numpy()  # head 5 reads key/value head 2
    np.testing.assert_allclose(head["scores"], q @ k.T / 8.0, atol=1e-4)
    causal = np.tril(np.ones((9, 9), bool))
    logits = np.where(causal, head["scores"], -np.inf)
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax / softmax.sum(-1, keepdims=True), engine.weights[2, 4], atol=1e-5)
    drawn = next(s for s in specs if any(t.get("mode") == "lines" for t in s["data"]))  # the line view: one head's lines
    assert {t.get("legendgroup") or t.get("name") for t in drawn["data"] if t.get("name")} >= {"layer 3, head 5"}
    sinks = figure_titled(at, "Mean weight on the first piece")  # drawn by the browser: no plotly chart per rerun
    np.testing.assert_allclose(sinks["values"], engine.weights[:, :, 1:, 0].mean(-1), atol=1e-6)
    assert sinks["axes"] == ["layer", "head"] and sinks["view"]["query"] == 2  # the chosen layer outlined
    bars = figure_titled(at, "Next piece after")
    assert bars["values"].tolist() == [1.0]  # greedy: one piece, all the mass
    assert bars["axis"].startswith("P(drawn)")  # the sampler's distribution, named as such wherever it is shown
    assert not [s for s in specs if str(s["layout"].get("title", {}).get("text", "")).startswith(("Next piece", "Mean weight"))]
    best_id = int(np.argmax(engine.next_logits))
    best = model.tokenizer.decode([best_id])
    lens = at.dataframe[0].value  # the logit lens: its last row (the final layer) at the last position is the prediction
    assert len(lens) == 31 and lens.iloc[-1, -1].startswith(model.reader.labels([best_id])[0] + " ")
    at.button[1].click().run()  # "Next word (greedy)"
    assert not at.exception and at.text_area(key="text").value == text + best
    longer = model.run(text + best).weights[2]  # (H, n + 1, n + 1) layer 3
    added = next(d for d in components(at) if "(#9) looks back: layer 3" in d.get("title", ""))  # from the K/V cache
    np.testing.assert_allclose(added["values"], longer[:, -1], atol=1e-6)
    assert live(at, 1)["view"]["query"] == 9  # the new piece is the one inspected


def test_hiding_the_first_piece_renormalises_each_row_over_the_others(model):
    """"causal, hide keys" with the first key hidden: the engine's weights (what the downloads hold) are each row
    renormalised over the other keys up to the query; the first row has no other key and gets zeros."""
    from appkit.interactive import on_screen

    scores = model.run("When he saw his owner, the dog was").head_scores(4, 1)  # (n, n)
    view = {"mask": "causal_keys", "hide": [0], "temp": 1.0, "hard": False}
    shown, allowed = on_screen(scores, view)
    n = len(scores)
    weights = model.run("When he saw his owner, the dog was").weights[4, 1]
    expected = weights[:, 1:] / np.maximum(weights[:, 1:].sum(-1, keepdims=True), 1e-30)  # rows renormalised
    np.testing.assert_allclose(shown[1:, 1:], expected[1:], atol=1e-5)
    assert (shown[:, 0] == 0).all() and (shown[0] == 0).all() and not allowed[:, 0].any()
    assert (np.triu(shown, 1) == 0).all() and allowed.shape == (n, n)


def test_the_page_says_why_it_draws_nothing(model):
    at, _ = decoder_page({"text": ""})
    assert not at.exception and "Type a text" in " ".join(m.value for m in at.info)
    at, _ = decoder_page({"text": "dog " * 600})
    assert not at.exception and "at most 512 pieces" in " ".join(m.value for m in at.error)
    at, _ = decoder_page({"text": "<script>alert(1)</script> 🙂", "layer": "99", "head": "-4", "t": "nan", "topp": "x"})
    assert not at.exception and not at.error


def test_the_lessons_decoder_step_shows_the_models_next_words(model):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "lesson.py"), default_timeout=180)
    at.query_params["step"] = "15"
    at.run()
    assert not at.exception
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    engine = torch.softmax(torch.from_numpy(model.run("When he saw his owner, the dog was").next_logits), -1)
    top = torch.topk(engine, 8)
    # The page's model ran on other threads than this one's: float32 sums in another order differ in the 5th digit.
    np.testing.assert_allclose(z_of(bars["x"]), top.values.numpy(), rtol=1e-4)
    assert "·happy" in list(bars["y"])[0] or any("·happy" in y for y in bars["y"])
    heads = json.loads(at.get("plotly_chart")[1].proto.spec)
    weights = z_of(heads["data"][0]["customdata"])[..., 0]  # (n, n)
    assert np.allclose(np.triu(weights, 1), 0) and np.allclose(weights.sum(-1), 1, atol=1e-5)


def test_one_more_piece_from_the_kv_cache_equals_the_whole_forward(model):
    text = "When he saw his owner, the dog was"
    short = model.run(text)
    token = int(np.argmax(short.next_logits))
    longer = model.extend(short, token)
    whole = model.run(text + model.tokenizer.decode([token]))
    assert longer.pieces.ids == whole.pieces.ids and longer.pieces.tokens == whole.pieces.tokens
    assert longer.pieces.labels() == whole.pieces.labels() and longer.pieces.text == whole.pieces.text
    # One row through the cache against ten through the whole forward: the same sums in other orders (other kernels,
    # other thread counts). Each value ends 30 layers of sums of at most 1,536 terms (the MLP's width), so it may be
    # off by rounding alone in proportion to its row's size (tests/tolerance.py); a wrong position, mask or cached key
    # moves it by far more.
    layers, width = model.layers, model.weights.layers[0].w_down.shape[0]  # 30, 1,536
    np.testing.assert_allclose(longer.weights, whole.weights, atol=1e-5)
    assert_close_rounding(longer.hidden, whole.hidden, width, layers)  # the last layer reaches ~600
    assert_close_rounding(longer.next_logits, whole.next_logits, width, layers + 1)
    assert_close_rounding(longer.scores, whole.scores, width, layers)
    for a, b in zip(longer.traces, whole.traces):
        for name in ("x", "query", "key", "value", "head_output"):
            assert_close_rounding(getattr(a, name).numpy(), getattr(b, name).numpy(), width, layers)


def test_one_more_piece_runs_on_one_cpu_thread_and_puts_the_count_back(model, monkeypatch):
    """The one-row step leaves the other cores alone (engine.extend under attention.cpu_threads)."""
    from attnviz.models import engine

    seen, linear = set(), engine.one_layer._linear
    monkeypatch.setattr(engine.one_layer, "_linear", lambda *args: seen.add(torch.get_num_threads()) or linear(*args))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        short = model.run("the dog was")
        seen.clear()
        model.extend(short, int(np.argmax(short.next_logits)))
        assert seen == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_next_word_after_text_the_model_cannot_read_leaves_it_and_says_why(model):
    at, _ = decoder_page()
    at.text_area(key="text").input("dog " * 600)  # typed, then the button clicked in the same interaction
    at.button[1].click().run()
    assert not at.exception and "at most 512 pieces" in " ".join(m.value for m in at.error)
    assert at.text_area(key="text").value == "dog " * 600


@pytest.mark.slow
def test_the_same_model_as_a_safetensors_folder_gives_the_same_attention(model, smollm2_reference):
    """SmolLM2 through the Llama family's safetensors mapping (transformers' names, (out, in) weights, RoPE on halves)
    equals SmolLM2 through the GGUF mapping (our (in, out) floats, llama.cpp's permuted W_q and W_k on adjacent pairs):
    two mappings of one checkpoint, checked against each other. The folder is transformers' reading of the GGUF file,
    saved as safetensors (conftest.smollm2_reference)."""
    folder = models.load(smollm2_reference[2], device="cpu")
    assert (folder.family, folder.arch.rope_pairs, model.arch.rope_pairs) == ("llama", "halves", "adjacent")
    for sentence in SENTENCES[:2]:
        a, b = folder.run(sentence), model.run(sentence)
        assert a.pieces.ids == b.pieces.ids
        np.testing.assert_allclose(a.weights, b.weights, atol=1e-4, rtol=0)
        np.testing.assert_allclose(a.next_logits, b.next_logits, atol=1e-3, rtol=0)


def test_a_model_of_another_kind_gets_a_sentence_that_reads_right():
    at, _ = decoder_page({"model": "minilm", "text": "the dog was"})
    assert not at.exception
    said = [w.value for w in at.warning]
    assert said and said[0].startswith("minilm is an encoder model, not one this page draws; showing smollm2.")


@pytest.mark.slow  # several seconds of page runs: the full suite's, not the fast tier's
def test_the_timeline_replays_the_links_generation_and_bad_values_get_defaults(model):
    from attnviz.models.generate import MAX_STEPS

    text = "When he saw his owner, the dog was"
    at, _ = decoder_page({"write": "6", "t": "0.0", "layer": "2"})
    assert not at.exception
    timelines = [d for d in components(at) if "steps" in d and "first_row" in d]
    assert len(timelines) == 1
    expected = model.generate(text, 6)
    assert timelines[0]["tokens"] == expected.run.pieces.labels() and timelines[0]["layer"] == 1
    assert any("Written: “" + model.tokenizer.decode(expected.new_ids) in c.value for c in at.caption)
    for bad, read in (("999", MAX_STEPS), ("-3", 0), ("x", 0), ("6.5", 6), ("1e9", MAX_STEPS), ("<script>", 0)):
        at, _ = decoder_page({"write": bad, "t": "0.0"})
        assert not at.exception and at.session_state.write == read  # the nearest allowed value, or none written


def test_the_pieces_of_one_character_read_as_it_in_a_text_and_as_their_bytes_alone(model):
    """Byte-level BPE cuts an emoji and Chinese characters into pieces that are no character alone. In a text each
    such piece reads as the character and its part ("🐕 1/2"), so the axes show whole characters as Long text's
    document does and the parts still differ; a piece alone (a next piece's candidate) reads as its bytes, whose
    concatenation in order is the character's UTF-8."""
    text = "a 🐕 and 我们 中"
    pieces = model.tokenize(text)
    labels = pieces.labels()
    assert "\ufffd" not in "".join(labels) and not any("\\x" in label for label in labels)
    for character in ("🐕", "我", "们"):
        parts = [label for label in labels if label.lstrip("·").startswith(character)]
        if len(parts) > 1:  # split by this tokenizer: every part named, in order
            assert [p.rsplit(" ", 1)[1] for p in parts] == [f"{k}/{len(parts)}" for k in range(1, len(parts) + 1)]
    split = [i for i, label in enumerate(labels) if label.endswith("/2") or label.endswith("/3") or label.endswith("/4")]
    assert split, labels  # the emoji, at least, is cut by SmolLM2's tokenizer
    alone = model.reader.labels([pieces.ids[i] for i in split])
    assert all("\\x" in label for label in alone)
    dog = [model.reader.labels([pieces.ids[i]])[0].lstrip("·") for i, label in enumerate(labels) if "🐕" in label]
    assert bytes.fromhex("".join(dog).replace("\\x", "")) == "🐕".encode()
    assert labels[-1].lstrip("·").startswith("中")  # a whole character reads as itself
    first, count = split[0], int(labels[split[0]].rsplit("/", 1)[1])  # the first split character's pieces
    written = model.tokenize("a")
    for i in range(first, first + count):
        written = model.reader.append(written, pieces.ids[i])  # written one at a time, as a decoder writes
    assert written.shown[-count:] == labels[first:first + count]


@pytest.mark.slow
def test_the_first_load_says_what_it_writes_before_it_writes_it(model, tmp_path, monkeypatch, capfd):
    """SmolLM2's first load on a machine de-quantizes 538 MB into the cache: the page's spinner and stderr say so, with
    the size and the folder, before the work starts; once cached, nothing is said."""
    assert models.first_load_note("smollm2") is None  # the fixture's load filled the machine's cache
    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path))
    note = models.first_load_note("smollm2")
    size = gguf.float_bytes(models.smollm2_path())
    assert note and f"{size / 1e6:.1f} MB" in note and str(tmp_path) in note and "ATTNVIZ_CACHE" in note
    monkeypatch.setattr(gguf, "read", lambda source: (_ for _ in ()).throw(RuntimeError("stopped before reading")))
    with pytest.raises(RuntimeError, match="stopped before reading"):
        models.load("smollm2", device="cpu")
    assert f"attnviz: {note}" in capfd.readouterr().err
    assert models.first_load_note("minilm") is None  # a folder of safetensors writes nothing


def test_the_imports_earlier_docs_promised_still_give_the_same_functions():
    from attnviz import decoder, trained

    for old, name, home in ((decoder, "next_distribution", "generate"), (decoder, "top_pieces", "generate"),
                            (trained, "head_summaries", "summaries"), (trained, "rollout", "summaries"),
                            (trained, "head_steps", "walk")):
        with pytest.warns(DeprecationWarning, match=f"use attnviz.models.{home}.{name}"):
            assert getattr(old, name) is getattr(models, name)


def test_the_names_earlier_readmes_documented_still_work_and_warn_with_their_replacement(model):
    """attnviz.trained.attention and attnviz.decoder's load_model, run, extend and logit_lens (README until 0.2) give
    what their replacements give, with a DeprecationWarning that names the new call."""
    from attnviz import decoder, trained

    text = "When he saw his owner, the dog was"
    with pytest.warns(DeprecationWarning, match=r'models\.load\("minilm"\)\.run\(text\)'):
        old = trained.attention(text)
    np.testing.assert_array_equal(old.weights, models.load("minilm", device="cpu").run(text).weights)
    with pytest.warns(DeprecationWarning, match=r'attnviz\.models\.load\("smollm2"\)'):
        assert decoder.load_model().name == "smollm2"
    with pytest.warns(DeprecationWarning, match=r"model\.run\(text\)"):
        run = decoder.run(model, text)
    np.testing.assert_array_equal(run.weights, model.run(text).weights)
    token = int(np.argmax(run.next_logits))
    with pytest.warns(DeprecationWarning, match=r"model\.extend\(result, token\)"):
        grown = decoder.extend(model, run, token)
    np.testing.assert_array_equal(grown.weights, model.extend(run, token).weights)
    with pytest.warns(DeprecationWarning, match=r"model\.logit_lens\(hidden\)"):
        ids, probs = decoder.logit_lens(model, run.hidden[-2:])
    expected_ids, expected_probs = model.logit_lens(run.hidden[-2:])
    assert np.array_equal(ids, expected_ids) and np.array_equal(probs, expected_probs)


def test_a_learned_sinks_share_is_drawn_as_a_column_of_its_own(tmp_path, monkeypatch):
    """gpt-oss on the Decoder page: the chosen head's heatmap gets one more key, ∅ sink, whose score is the head's sink
    logit as transformers holds it; the softmax over a causal row and that column gives the engine's weights, the
    column the rest of each row; the page says so in a sentence."""
    import transformers as T

    from page_support import own_model

    with own_model("gpt_oss", tmp_path, monkeypatch) as folder:
        at, _ = decoder_page({"model": "gpt_oss", "text": "the cat sat on the mat", "layer": "2", "head": "3"})
    assert not at.exception
    model = models.load(folder, device="cpu")
    engine = model.run("the cat sat on the mat")
    n = len(engine.pieces)
    head = live(at, 1)
    assert head["cols"][-1] == "∅ sink" and head["m"] == n + 1 and head["sink"] is True
    sink = T.AutoModelForCausalLM.from_pretrained(str(folder)).model.layers[1].self_attn.sinks[2].item()
    np.testing.assert_allclose(head["scores"][:, n], sink, atol=1e-6)
    logits = np.where(np.tril(np.ones((n, n), bool)), head["scores"][:, :n], -np.inf)
    logits = np.concatenate([logits, head["scores"][:, n:]], 1)  # (n, n + 1): the sink read by every row
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights[:, :n], engine.weights[1, 2], atol=1e-5)
    assert (weights[:, n] > 0).all() and weights[:, n].max() > 0.5  # the sink takes a share of every row, most of one
    said = " ".join(c.value for c in at.caption)
    assert "learned sink" in said and "∅ sink" in said
    assert "Each row sums to 1 minus its head's learned sink's share over" in said  # the last piece's rows, too
