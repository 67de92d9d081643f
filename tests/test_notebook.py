"""attnviz.notebook without a browser: each widget's data, its view as traitlets, its weights against the formula
written out, the messages for bad input, the standalone page, and docs/notebook.ipynb run from a clean kernel."""

import base64
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from attnviz import models
from attnviz.notebook import ALL_HEADS_BYTES, compare, heatmap, model_view

ROOT = Path(__file__).resolve().parents[1]
TOKENS = "when he saw his owner the dog was happy".split()


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def scores():
    return np.random.default_rng(3).normal(size=(9, 9)).astype(np.float32)


def test_a_heatmap_widget_sends_the_raw_scores_once_and_draws_the_engines_weights(scores):
    w = heatmap(scores, TOKENS, query=8)
    sent = np.frombuffer(__import__("base64").b64decode(w.data["scores"]), "<f4").reshape(9, 9)
    assert np.array_equal(sent, scores) and w.data["rows"] == TOKENS and w.query == 8
    np.testing.assert_allclose(w.weights, softmax(scores), atol=1e-6)
    w.temp, w.mask = 0.5, "causal"  # as Python sets it, or as the page's sync does
    causal = np.where(np.tril(np.ones((9, 9), bool)), scores / 0.5, -np.inf)
    np.testing.assert_allclose(w.weights, softmax(causal), atol=1e-6)
    w.mask, w.hide = "keys", [0, 3]
    hidden = np.where(np.isin(np.arange(9), [0, 3]), -np.inf, scores / 0.5)
    np.testing.assert_allclose(w.weights, softmax(hidden), atol=1e-6)
    w.hard = True
    assert np.array_equal(w.weights, np.eye(9)[np.where(np.isin(np.arange(9), [0, 3]), -np.inf, scores).argmax(1)])


def test_the_view_is_checked_as_a_link_is(scores):
    w = heatmap(scores, TOKENS)
    w.temp = 0.37
    assert w.temp == 0.5  # the toolbar's nearest step (log scale)
    for name, bad in (("temp", -1.0), ("temp", float("nan")), ("mask", "evil"), ("scale", "loud"), ("palette", "jet")):
        with pytest.raises(Exception, match="must be"):
            setattr(w, name, bad)
    with pytest.raises(TypeError, match="unknown view setting"):
        heatmap(scores, TOKENS, colour="red")


@pytest.mark.parametrize("scores, tokens, message", [
    (np.full((2, 2), np.nan), ["a", "b"], "NaN or infinite"),
    (np.array([[1.0, np.inf], [0.0, 0.0]]), ["a", "b"], "NaN or infinite"),
    (np.zeros((2, 3)), ["a", "b"], "do not match the matrix"),
    (np.zeros((3, 3)), ["a", "b"], "do not match the matrix"),
    (np.zeros((0, 0)), [], "0 tokens"),
    (np.zeros((4096, 4096), np.float32), ["dog"] * 4096, "at most 512 queries and keys"),
    (np.zeros((2, 2, 2)), ["a", "b"], "one head's scores"),
    (np.array([[1e300, 0.0], [0.0, 0.0]]), ["a", "b"], "larger than float32"),
])
def test_bad_input_gets_the_apps_messages_before_anything_is_drawn(scores, tokens, message):
    with pytest.raises(ValueError, match=message):
        heatmap(scores, tokens)


def test_a_runs_head_through_the_widget_is_the_models_head():
    run = models.load("minilm").run("the dog was happy")
    w = heatmap(run, layer=2, head=4)
    np.testing.assert_allclose(w.weights, run.weights[2, 4], atol=1e-5)
    assert w.mask == "none" and w.data["rows"][0] == "[CLS]"
    assert w.data["title"] == "minilm: layer 2, head 4 (from 0)"  # the arguments' numbers, and the rule named
    with pytest.raises(ValueError, match="6 layers of 12 heads"):
        heatmap(run, layer=6, head=0)


def test_a_model_view_carries_every_head_and_follows_the_chosen_one():
    view = model_view("minilm", "the dog was happy", layer=1, head=2)
    run = view.run
    assert view.atlas["layers"] == 6 and view.atlas["heads"] == 12 and view.atlas["chosen"] == [1, 2]
    # the atlas's numbers, the heatmap's title and the head a click picks all count from 0, as the arguments do
    assert view.atlas["base"] == 0 and view.data["base"] == 0 and view.data["title"] == "Layer 1, head 2 (from 0)"
    bundle = np.frombuffer(__import__("base64").b64decode(view.all_scores), "<f4").reshape(run.scores.shape)
    np.testing.assert_array_equal(bundle, run.scores)  # every head's scores: the atlas works with no kernel behind it
    np.testing.assert_allclose(view.weights, run.weights[1, 2], atol=1e-5)
    view.layer, view.head = 5, 11
    np.testing.assert_allclose(view.weights, run.weights[5, 11], atol=1e-5)
    with pytest.raises(Exception, match="head must be from 0 to 11"):
        view.head = 12
    assert run.weights.nbytes <= ALL_HEADS_BYTES


def test_a_decoders_model_view_is_causal_and_grouped():
    view = model_view("smollm2", "When he saw his owner, the dog was", layer=4, head=1)
    assert view.mask == "causal" and view.atlas["group"] == 3 and view.data["masks"]["causal_keys"]
    np.testing.assert_allclose(view.weights, view.run.weights[4, 1], atol=1e-5)
    assert (np.triu(view.weights, 1) == 0).all()


def test_compare_draws_a_and_b_and_their_difference(scores):
    both = compare(heatmap(scores, TOKENS), heatmap(scores, TOKENS, mask="causal", temp=2.0))
    assert [side["side"] for side in both.data["sides"]] == ["A", "B"] and "difference" in both.data
    assert (both.b_mask, both.b_temp) == ("causal", 2.0)
    a, b = both.weights
    np.testing.assert_allclose(a, softmax(scores), atol=1e-6)
    np.testing.assert_allclose(b, softmax(np.where(np.tril(np.ones((9, 9), bool)), scores / 2.0, -np.inf)), atol=1e-6)
    other = compare(heatmap(scores, TOKENS), heatmap(scores[:4, :4], TOKENS[:4]))
    assert "difference" not in other.data  # tokens that differ have no B − A


def test_save_html_is_one_standalone_page(scores, tmp_path):
    w = heatmap(scores, ["<b>bold</b>", *TOKENS[1:]], title="</script><script>alert(1)</script>")
    page = w.save_html(tmp_path / "head.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and not re.search(r"^export default", page, re.M)  # one module, run in place
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from another host
    assert not re.search(r"""\bimport\s*(\(|[^;]*\bfrom\s*["'])""", page)  # no module imported from anywhere
    state = re.search(r'<script type="application/json" id="attnviz-state">(.*?)</script>', page, re.S).group(1)
    assert json.loads(state)["data"]["rows"][0] == "<b>bold</b>"  # plain text, which the page sets as text
    assert "<\\/script><script>" in state  # the title cannot end the tag early


def shown_text(notebook) -> list[list[str]]:
    """Per code cell, what a page without widgets shows of its outputs: printed text and each result's text/plain."""
    def text(output) -> str:
        value = output.get("text") if output.output_type == "stream" else output.get("data", {}).get("text/plain", "")
        return "".join(value) if isinstance(value, list) else value or ""

    return [[text(o) for o in cell.get("outputs", [])] for cell in notebook.cells if cell.cell_type == "code"]


def same_but_rounding(stored: str, fresh: str) -> bool:
    """The same text, each number in it within one unit of its last shown digit (another CPU may round 0.0425 apart)."""
    number = r"-?\d+\.\d+"
    if re.split(number, stored) != re.split(number, fresh):
        return False
    pairs = zip(re.findall(number, stored), re.findall(number, fresh))
    return all(abs(float(a) - float(b)) <= 10.0 ** -len(a.split(".")[1]) + 1e-12 for a, b in pairs)


@pytest.mark.slow
def test_the_notebook_in_docs_runs_from_a_clean_kernel_and_is_stored_with_what_it_shows(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    stored = shown_text(notebook)
    assert all(stored), "every code cell is stored with its outputs; rerun the command in docs/development.md"
    assert "widgets" not in notebook.metadata  # no widget state: JupyterLab does not draw it unrun, and it weighs 1.2 MB
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), before]))  # the kernel imports this checkout
    try:
        NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]  # no warnings, no progress bars
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) >= 5  # the dog sentence, MiniLM, the decoder's head, your own model, the comparison
    fresh = shown_text(notebook)
    assert len(fresh) == len(stored)
    for cell, (was, now) in enumerate(zip(stored, fresh)):
        assert len(was) == len(now) and all(map(same_but_rounding, was, now)), (cell, was, now)


def test_the_effects_view_holds_every_heads_effect_and_bars(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import tiny_models

    from attnviz import effects as measure, models
    from attnviz.notebook import effects

    model = models.load(tiny_models.build("gpt2", tmp_path), device="cpu")
    text = "The cat watched the dog from the sofa."
    view = effects(model, text, layer=1, head=2)
    found = measure.head_effects(model, text)
    assert np.array_equal(view.effects, found)
    assert view.effects_atlas["measure"]["values"] == [round(float(v), 4) for v in found.ravel()]
    assert view.effects_atlas["chosen"] == [1, 2] and view.effects_atlas["zmin_text"].startswith("−")
    after = np.frombuffer(base64.b64decode(view.after[1 * model.heads + 2]), "<f4")
    ablated = measure.ablate(model, text, [(1, 2)])
    p = np.exp(ablated.next_logits - ablated.next_logits.max())
    p /= p.sum()
    top = np.argsort(-model.run(text).next_logits)[:len(after)]
    np.testing.assert_allclose(after, p[top], atol=1e-5)
    page = view.save_html(tmp_path / "effects.html").read_text()
    assert "effects_atlas" in page and view.after[0] in page  # the bars of every head travel with the page
    other = models.load(tiny_models.build(tiny_models.OUTSIDE, tmp_path), device="cpu")
    with pytest.raises(measure.EffectsError, match="computed by transformers"):
        effects(other, text)


def test_the_generation_view_writes_as_generate_does_and_refuses_what_it_cannot_draw(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import tiny_models

    from attnviz.notebook import generation

    model = models.load(tiny_models.build("llama", tmp_path), device="cpu")
    view = generation(model, "The cat watched the dog", steps=5, layer=1, head=2)
    expected = model.generate("The cat watched the dog", 5)
    assert view.generation.new_ids == expected.new_ids and np.array_equal(view.weights, expected.run.weights)
    assert view.timeline["layer"] == 1 and view.timeline["head"] == 2 and len(view.timeline["steps"]) == 5
    page = view.save_html(tmp_path / "writing.html").read_text()
    assert view.timeline["weights"] in page  # every step travels with the page
    with pytest.raises(ValueError, match="layer and head count from 0"):
        generation(model, "The cat", steps=2, layer=model.layers)
    with pytest.raises(models.ModelError, match="steps must be"):
        generation(model, "The cat", steps=0)
    bert = models.load(tiny_models.build("bert", tmp_path), device="cpu")
    with pytest.raises(models.ModelError, match="needs a decoder"):
        generation(bert, "The cat")


def test_the_scan_view_carries_every_heads_overview_offline(tmp_path):
    """notebook.scan: the atlas of every head's overview, and the bundle the chosen head's overview is cut from, equal
    to the block means of the weights written out from whole tiles (Scan.tile itself is checked against transformers in
    test_scan)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import tiny_models
    from test_scan import build, long_text

    from attnviz.notebook import scan

    model = models.load(build("mistral", tmp_path), device="cpu")  # a context of 1,100 pieces
    text = long_text(model, 700)
    view = scan(model, text, block=64, layer=1, head=2, sort="sink")
    n, count = len(view.scan), -(-len(view.scan) // 64)
    assert n > model.max_pieces and view.data["kind"] == "scan"
    bundle = np.frombuffer(base64.b64decode(view.overviews), "<f4").reshape(model.layers, model.heads, count, count)
    for layer, head in ((0, 0), (1, 2)):
        weights = view.scan.tile(layer, head, slice(0, n), slice(0, n))  # (n, n)
        means = [[weights[a * 64:(a + 1) * 64, b * 64:(b + 1) * 64].sum(-1).mean() for b in range(count)] for a in range(count)]
        np.testing.assert_allclose(bundle[layer, head], means, atol=1e-5)
    assert view.scan_atlas["chosen"] == [1, 2] and view.scan_atlas["base"] == 0 and "sink" in view.scan_atlas["title"]
    assert view.overview["n"] == view.overview["m"] == count and view.overview["values"] == ""
    page = view.save_html(tmp_path / "scan.html").read_text()
    assert view.overviews in page and "http" not in page.replace("http://www.w3.org", "")  # offline, every head kept
    with pytest.raises(ValueError, match="layer and head count from 0"):
        scan(model, text, layer=model.layers)
    with pytest.raises(ValueError, match="sort must be one of"):
        scan(model, text, sort="retrieval")
    with pytest.raises(models.TextError, match="Type a text"):
        scan(model, "  ")
    t5 = models.load(tiny_models.build("t5", tmp_path), device="cpu")
    with pytest.raises(models.ModelError, match="computed by transformers"):
        scan(t5, text)
