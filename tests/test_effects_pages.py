"""The effects panel on the Decoder and Trained model pages under AppTest: the numbers drawn are attnviz.effects's,
a removed head changes the bars as its ablated run says, and bad URL values get allowed ones."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz import effects, figures, models
from test_decoder import components  # the page's browser figures, their numbers decoded

ROOT = Path(__file__).resolve().parents[1]
TEXT = "When he saw his owner, the dog was"


def page(name: str, params: dict):
    from streamlit.testing.v1 import AppTest

    from page_support import lesson_computed

    if name == "lesson.py":
        lesson_computed(params)
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=300)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def titled(at, start: str) -> dict:
    return next(d for d in components(at) if str(d.get("title", "")).startswith(start))


@pytest.fixture(scope="module")
def smollm2():
    return models.load("smollm2", device="cpu")


@pytest.mark.slow  # several seconds of page runs: the full suite's, not the fast tier's
def test_the_decoder_panel_draws_each_heads_effect_routes_logits_and_importance(smollm2):
    at = page("decoder.py", {"text": TEXT, "effects": "1", "layer": "20", "head": "8"})
    assert not at.exception
    found = effects.head_effects(smollm2, TEXT)
    atlas = titled(at, "Every head removed in turn")
    assert (atlas["layers"], atlas["heads"], atlas["chosen"]) == (30, 9, [19, 7])
    assert atlas["measure"]["name"].startswith("effect on the next piece")
    np.testing.assert_allclose(np.array(atlas["measure"]["values"]).reshape(30, 9), found, atol=1e-4)
    top = np.abs(found).max()
    assert (atlas["zmax_text"], atlas["zmin_text"]) == (f"+{top:.3g}", f"−{top:.3g}")  # a diverging scale around 0
    routes = next(d for d in components(at) if "edges" in d)
    n = len(smollm2.tokenize(TEXT))
    assert routes["n"] == n and routes["layers"] == 30 and routes["start"] == n - 1
    shares = effects.contributions(smollm2, TEXT).pieces
    for layer, source, target, share, _ in routes["edges"][:50]:
        assert share == pytest.approx(shares[layer, target, source], abs=1e-4)
    # The slider's stops fit the data: from the floor up to the first past the largest share between two pieces.
    between = shares[:, ~np.eye(n, dtype=bool)].max()
    stops = routes["steps"]
    assert stops == sorted(stops) and stops[0] == 0.01 and stops[-2] <= between < stops[-1]
    assert all(b / a < 1.15 for a, b in zip(stops, stops[1:]))  # about 10 % a step
    table = next(d.value for d in at.dataframe if any("term in logit" in str(c) for c in d.value.columns))
    dla = effects.logit_attribution(smollm2, TEXT)
    first = table.iloc[0]
    assert first.iloc[2] == pytest.approx(dla.heads[first["layer"] - 1, first["head"] - 1], abs=1e-3)
    importance = titled(at, "Each piece's importance")
    assert importance["values"].shape == (len(effects.MEASURES), n)
    assert all("(ρ " in r for r in importance["rows"])  # each row names its measure and ρ, and is drawn whole
    assert importance["row_chars"] >= max(map(len, importance["rows"])) > importance["tick_chars"]
    assert np.abs(importance["values"]).max() == pytest.approx(1.0)
    assert any("changes the prediction most" in m.value for m in at.markdown)


def test_removing_the_chosen_head_shows_the_bars_before_and_after(smollm2):
    at = page("decoder.py", {"text": TEXT, "effects": "1", "ablate": "1", "layer": "20", "head": "8"})
    assert not at.exception
    before, after = titled(at, "Before: p(next piece"), titled(at, "After removing layer 20, head 8")
    clean = torch.softmax(torch.from_numpy(smollm2.run(TEXT).next_logits).double(), -1).numpy()
    ablated = effects.ablate(smollm2, TEXT, [(19, 7)])
    removed = torch.softmax(torch.from_numpy(ablated.next_logits).double(), -1).numpy()
    top = np.argsort(-clean)[:10]
    np.testing.assert_allclose(before["values"], clean[top], atol=1e-6)
    np.testing.assert_allclose(after["values"], removed[top], atol=1e-6)
    assert before["labels"] == after["labels"]
    assert any("Δ log p" in m.value for m in at.markdown)


def test_the_trained_model_panel_reads_the_chosen_pieces_final_vector():
    minilm = models.load("minilm", device="cpu")
    text = "When he saw his owner, the dog was happy"
    at = page("trained.py", {"text": text, "effects": "1", "piece": "3"})
    assert not at.exception
    atlas = titled(at, "Every head removed in turn")
    np.testing.assert_allclose(np.array(atlas["measure"]["values"]).reshape(6, 12),
                               effects.head_effects(minilm, text, piece=3), atol=1e-4)
    assert "1 − cos" in atlas["measure"]["name"]
    # One square a head on the palette from 0 to the largest 1 − cos: the drawn colours vary where the values do.
    values = np.array(atlas["measure"]["values"])  # (72,)
    drawn = np.frombuffer(base64.b64decode(atlas["blocks"]), np.uint8).astype(int)  # (72,) one block a head
    assert atlas["r"] == 1 and not atlas["score_bars"] and drawn.shape == values.shape
    assert atlas["zmax_text"] == f"{values.max():.3g} (largest)" and drawn.max() == 255
    np.testing.assert_allclose(drawn, np.rint(255 * values / values.max()), atol=1)
    assert len(np.unique(drawn)) > 10  # 72 heads whose effects differ are not 72 identical squares
    routes = next(d for d in components(at) if "edges" in d)
    assert routes["start"] == 3 and routes["title"].startswith("Routes to “")
    importance = titled(at, "Each piece's importance to the final vector of")
    assert importance["values"].shape[0] == len(effects.MEASURES)


@pytest.mark.parametrize("params", [
    {"how": "bogus", "rthr": "abc", "piece": "99999", "ablate": "maybe"},
    {"how": "mean", "rthr": "1e308", "piece": "-5"},
])
def test_hostile_url_values_get_allowed_ones(params):
    at = page("decoder.py", {"text": "the dog was", "effects": "1", **params})
    assert not at.exception
    assert at.session_state.how in effects.HOWS and at.session_state.rthr in figures.ROUTE_THRESHOLDS


def test_a_text_past_the_effects_limit_gets_the_numbers():
    at = page("decoder.py", {"text": "the dog " * 60, "effects": "1"})
    assert not at.exception
    assert any("Effects are measured on texts of up to 32 pieces" in m.value for m in at.info)


def test_lesson_17_turns_the_induction_head_off_beside_a_control(smollm2):
    from attnviz import heads
    from appkit.lesson.models import COPY_CUT, COPY_PIECES
    from appkit.lesson.experiments import CONTROL_SEED

    at = page("lesson.py", {"step": "17", "copyseed": "0"})
    assert not at.exception
    scores, _ = heads.probe_scores(smollm2, 4, heads.PROBE_PIECES, heads.SEED)
    layer, head = (int(v) for v in np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape))
    probe = heads.probes(smollm2, 1, COPY_PIECES, 1000)[0]
    pieces = heads.cut_short(smollm2, probe, cut=COPY_CUT)
    expected = heads.repeats_predicted(smollm2, smollm2.run_pieces(pieces), probe.lead, COPY_PIECES)[2]
    intact = smollm2.run_pieces(pieces)
    typed = effects.typed_heads(intact.weights[layer], intact.pieces.ids)
    control = effects.control_head(head, smollm2.heads, CONTROL_SEED, typed)
    assert control != head and control not in typed
    ids, n = intact.pieces.ids, len(intact.pieces.ids)
    for name, pattern in (("previous", heads.previous_pattern(n)), ("duplicate", heads.duplicate_pattern(ids)),
                          ("induction", heads.induction_pattern(ids)), ("sink", heads.column_pattern(n, 0, 1))):
        share = heads.pattern_score(intact.weights[layer, control][None].astype(np.float64), pattern)[0]
        assert share < effects.ablation.TYPED[name]  # the control follows no known type on this sequence
    p = [float(torch.softmax(torch.from_numpy(r.next_logits).double(), -1)[expected]) for r in (
        smollm2.run_pieces(pieces), effects.ablate(smollm2, pieces, [(layer, head)]),
        effects.ablate(smollm2, pieces, [(layer, control)]))]
    # The library's experiment (effects.turn_head_off), for a notebook, gives the same three numbers.
    off = effects.turn_head_off(smollm2, layer, head, seed=1000, length=COPY_PIECES, cut=COPY_CUT, control_seed=CONTROL_SEED)
    assert (off.control, off.repeat) == (control, expected) and np.allclose(off.p, p, atol=1e-6)
    said = next(m.value for m in at.markdown if m.value.startswith("With every head"))
    assert f"p = {p[0]:.2f}" in said and f"head {head + 1}: p = {p[1]:.2f}" in said and f"p = {p[2]:.2f}" in said
    assert p[1] < p[0]  # without the induction head the repeat is less likely
    ticks = drawn_row_labels(at, "p(the repeat")  # each bar's label names its run whole: the two removed heads differ
    assert len(set(ticks)) == 3 and not any(t.endswith("…") for t in ticks)
    assert ticks[1].endswith(f"head {head + 1}") and ticks[2].endswith("(control)")


def drawn_row_labels(at, title: str) -> list[str]:
    """The row labels a plotly chart whose title starts with `title` draws."""
    from page_support import spec_titled

    return list(spec_titled(at, title)["layout"]["yaxis"]["ticktext"])


def test_lesson_18_ranks_the_dog_sentences_pieces_beside_occlusion(smollm2):
    from appkit.lesson.experiments import DOG_PREFIX

    at = page("lesson.py", {"step": "18"})
    assert not at.exception
    found = effects.importance(smollm2, DOG_PREFIX)
    assert any(m.value == found.sentence() for m in at.markdown)
    ticks = drawn_row_labels(at, "Importance to")  # each measure's row names it and its ρ, whole
    assert len(ticks) == len(found.measures) and all("(ρ " in t for t in ticks)
    assert not any(t.endswith("…") for t in ticks)


@pytest.mark.slow
def test_lesson_19_writes_greedy_and_sampled_and_says_where_they_part(smollm2):
    from appkit.lesson.experiments import DOG_PREFIX, SAMPLER, WRITE_STEPS

    for seed in (0, 3):
        at = page("lesson.py", {"step": "19", "writeseed": str(seed)})
        assert not at.exception
        greedy = smollm2.generate(DOG_PREFIX, WRITE_STEPS)
        sampled = smollm2.generate(DOG_PREFIX, WRITE_STEPS, seed=seed, **SAMPLER)
        shown = next(m.value for m in at.markdown if m.value.startswith("Greedy:"))
        for written in (greedy, sampled):
            words = smollm2.tokenizer.decode(written.new_ids).strip().split()
            assert all(word.replace(".", "\\.") in shown for word in words)
        k = next(i for i, (a, b) in enumerate(zip(greedy.new_ids, sampled.new_ids)) if a != b)
        said = next(m.value for m in at.markdown if m.value.startswith("The two part"))
        chosen, best = smollm2.reader.labels([sampled.new_ids[k], greedy.new_ids[k]])
        assert f"at step {k + 1}:" in said and f"Greedy took “{best}”" in said and f"drew “{chosen}”" in said
        from attnviz.models import engine

        ids = sampled.run.pieces.ids[: sampled.prompt + k]  # the text both had read at the parting step
        logits = engine.forward(smollm2.arch, smollm2.weights, ids).next_logits.astype(np.float64)  # (vocab,)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        assert f"(p = {p[sampled.new_ids[k]]:.2f})" in said and f"Greedy took “{best}” (p = {p.max():.2f})" in said


@pytest.mark.slow
def test_lesson_21_takes_the_copying_heads_score_apart(smollm2):
    """Step 21: the induction head's score of the key it looks at most from the last piece, its parts as the library
    finds them, folded to the strongest; and a sentence saying whether the textbook story holds here."""
    from attnviz import heads
    from appkit.lesson.models import COPY_CUT, COPY_PIECES

    at = page("lesson.py", {"step": "21", "copyseed": "0"})
    assert not at.exception
    scores, _ = heads.probe_scores(smollm2, heads.PROBES, heads.PROBE_PIECES, heads.SEED)
    layer, head = (int(v) for v in np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape))
    probe = heads.probes(smollm2, 1, COPY_PIECES, 1000)[0]
    run = smollm2.run_pieces(heads.cut_short(smollm2, probe, cut=COPY_CUT))
    query = len(run.pieces) - 1
    key = int(np.argmax(run.weights[layer, head, query]))
    found = effects.score_parts_of(smollm2, run, layer, head, query, key)
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "taken apart" in str(json.loads(c.proto.spec)["layout"]["title"]["text"]).replace("<br>", " "))
    from page_support import decode

    np.testing.assert_allclose(decode(spec["data"][0]["z"]), found.strongest(6)[2], atol=1e-5)
    said = " ".join(m.value for m in at.markdown)
    assert f"score {found.score:.2f}" in said and "The textbook story" in said
