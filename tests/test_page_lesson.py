"""The lesson under AppTest: retrieval steps as the notes say, links into the pages, the comparisons, the order step,
the buttons, the heads step."""

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from page_support import (
    DEFAULT, KV, ROOT, TIMEOUT, chart_data, compared, decode, glove_scores, kv_page, link_params, messages,
    run_page, soft_table,
)
from appkit.lesson.common import STEP_COUNT


def test_lesson_retrieval_steps_answer_as_the_notes_say():
    at = run_page("lesson.py", {"step": "1"})
    assert at.success[0].value == "Li → Mu"
    at = run_page("lesson.py", {"step": "2"})
    assert at.success[0].value == "Exact: no answer. Hard: Lipton → Zachary"
    at = run_page("lesson.py", {"step": "2", "q": "Zhang"})
    assert at.success[0].value == "Exact: Aston. Hard: Zhang → Aston"


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
    says so with the measured gap (0 up to float32 rounding); with sinusoidal positions the scores are those of X + P
    and the gap is not 0."""
    x = glove_scores(glove, "dog bites man")  # (3, 3) XXᵀ/√50
    at = run_page("lesson.py", {"step": "8"})
    a, b, sent = compared(at)
    np.testing.assert_allclose(a["scores"], x, atol=1e-5)
    np.testing.assert_allclose(b["scores"], x[::-1, ::-1], atol=1e-5)
    said = at.success[0].value
    assert "difference" not in sent and "π = [2, 1, 0]" in said
    # Equal up to float32 rounding: a product of reordered rows may sum in another order on some CPUs (6e-08 here).
    gap = re.search(r"Pᵀ\| = ([0-9.e+-]+): equal", said)
    assert gap and float(gap.group(1)) <= 1e-6, said
    at = run_page("lesson.py", {"step": "8", "opos": "1"})
    a, b, _ = compared(at)
    assert not at.success and "not equal" in messages(at) and np.abs(b["scores"] - a["scores"][::-1, ::-1]).max() > 1e-2


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


@pytest.mark.slow
def test_lesson_needle_step_scores_the_heads_as_transformers_attentions_do(smollm2_reference):
    """Step 20's bars: each head's retrievals over the needle pieces copied, counted by the definition written out
    (test_long) on transformers' eager attentions over the document and what SmolLM2 wrote."""
    import torch

    from test_long import retrievals_written_out

    _, module, _ = smollm2_reference
    at = run_page("lesson.py", {"step": "20"})
    assert not at.exception, at.exception
    from appkit.served import example_document, example_needle

    stack, (written, _, copied) = example_document("smollm2"), example_needle("smollm2")
    assert "48213" in written.text and copied >= 5  # the key came back, copied from the needle
    ids = stack.pieces.ids + written.ids
    with torch.no_grad():
        out = module(torch.tensor([ids]), output_attentions=True)
    n = len(stack.pieces)
    rows = [torch.stack(out.attentions)[:, 0, :, n - 1 + t, :n + t].numpy() for t in range(len(written.ids))]
    events, expected_copied = retrievals_written_out(stack.pieces.ids, stack.needle, written.ids, rows)
    assert expected_copied == copied
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    scores = events / copied
    shown = dict(zip(bars["y"], decode(bars["x"])))
    for label, value in shown.items():
        layer, head = (int(v) for v in re.search(r"layer (\d+), head (\d+)", label).groups())
        assert abs(value - scores[layer - 1, head - 1]) <= 1e-6, label
    assert max(shown.values()) == pytest.approx(scores.max())


def wilson_bounds(found: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The shares p whose test |found/total − p| = z·√(p(1−p)/total) is on the edge, found by bisection: the Wilson
    interval from its definition, not from its closed form."""
    share = found / total
    edge = lambda p: abs(share - p) - z * np.sqrt(p * (1 - p) / total)  # noqa: E731  negative inside the interval

    def cross(inside: float, outside: float) -> float:
        for _ in range(100):
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if edge(middle) < 0 else (inside, middle)
        return inside

    return (0.0 if found == 0 else cross(share, 0.0)), (1.0 if found == total else cross(share, 1.0))


def test_step_20_gives_each_count_of_its_trials_with_its_interval_and_says_what_overlaps():
    from appkit.lesson.experiments import NEEDLE_TRIALS, trials_sentence

    said = trials_sentence()
    total = NEEDLE_TRIALS["documents"]
    bounds = {name: wilson_bounds(NEEDLE_TRIALS[name], total) for name in ("intact", "strongest", "random")}
    for name, (low, high) in bounds.items():
        assert f"{NEEDLE_TRIALS[name]} of {total} (a share anywhere from {low:.0%} to {high:.0%}, 95 % interval)" in said
    overlap = lambda a, b: bounds[a][0] <= bounds[b][1] and bounds[b][0] <= bounds[a][1]  # noqa: E731
    assert not overlap("intact", "strongest") and "The first two intervals do not overlap" in said
    assert overlap("intact", "random") and "but their intervals overlap: so few documents cannot tell them apart" in said
    other = trials_sentence({"documents": 6, "intact": 4, "strongest": 1, "random": 3})  # share_interval's example
    assert "4 of 6 (a share anywhere from 30% to 90%" in other and "The first two intervals overlap" in other
    assert "random heads off did better" not in other


@pytest.mark.parametrize("step", range(1, STEP_COUNT + 1))
def test_every_lesson_step_offers_a_class_question_whose_answer_is_an_option(step):
    """A presenter can ask each of the steps something (appkit.classroom.offer, called with the step's numbers)."""
    params = {"step": str(step)} | ({"mask": "padding"} if step == 10 else {})
    at = run_page("lesson.py", params)
    assert not at.exception, at.exception
    offered = at.session_state["_class_offered"]
    assert offered and all(q.step == step for q in offered)
    for question in offered:
        assert question.kind == "number" or 0 <= question.answer < len(question.options)
        assert "answer" not in question.public()
        assert question.margin is None or question.margin >= question.precision  # told apart as the reveal prints it
        assert not any("occlusion" in option for option in question.options)  # no option is the yardstick
    said = " ".join(m.value for m in at.markdown)  # classroom text: no file of ours, no "our notes"
    assert "docs/" not in said and "our notes" not in said and ".md" not in said
    written = said + " ".join(c.value for c in at.caption)
    assert not re.search(r"\{[a-z_]+\}", written), "a template's field left unformatted"


def test_the_first_pages_banner_counts_the_lessons_steps():
    from appkit.lesson.common import STEP_COUNT

    at = run_page("self_attention.py")
    banner = next(m.value for m in at.markdown if "New to attention?" in m.value)
    assert f"Lesson: {STEP_COUNT} short steps" in banner


def test_starting_a_class_takes_the_teacher_key(tmp_path, monkeypatch):
    """On the projector with no teacher link, "Start a class" asks for the key: a wrong one is refused with a sentence
    and starts nothing; the right one starts the class, whose strip shows the join code and no secret."""
    from attnviz.classroom import store as stores

    monkeypatch.setenv("ATTNVIZ_TEACHER_KEY", "the-right-teacher-key")
    monkeypatch.setenv(stores.STORE_SETTING, str(tmp_path / "classes.sqlite"))
    monkeypatch.setattr(stores, "_shared", None)
    at = AppTest.from_file(str(ROOT / "pages" / "lesson.py"), default_timeout=TIMEOUT)
    at.session_state["present"] = True  # app.py's presenting(), from the link's present=1
    at.query_params["step"] = "2"
    at.run()
    at.text_input(key="class_key_typed").input("a guess")
    at.button(key="FormSubmitter:class_key-Start the class").click().run()
    assert any("not this server's teacher key" in e.value for e in at.error)
    assert "_class" not in at.session_state
    at.text_input(key="class_key_typed").input("the-right-teacher-key")
    at.button(key="FormSubmitter:class_key-Start the class").click().run()
    assert not at.exception
    held = at.session_state["_class"]
    assert held["surface"] == "projector" and stores.shared_store().get(held["code"]).state["step"] == 2
    shown = " ".join(c.value for c in at.caption)
    assert f"Join code **{held['code']}**" in shown and held["secret"] not in shown


def test_a_class_page_has_no_download_menus_and_the_same_step_alone_has_them(tmp_path, monkeypatch):
    """A student's Lesson in a live class draws the step's charts without their Download menus (30 students' runs at
    once pay for every button); the same step outside a class has them."""
    from attnviz.classroom import store as stores

    monkeypatch.setenv(stores.STORE_SETTING, str(tmp_path / "classes.sqlite"))
    monkeypatch.setattr(stores, "_shared", None)
    code, _ = stores.shared_store().create()
    alone = run_page("lesson.py", {"step": "4"})
    assert [d.label for d in alone.get("download_button")] == ["Numbers (CSV)", "Numbers (.npy, float32)", "Figure (HTML)"]
    at = AppTest.from_file(str(ROOT / "pages" / "lesson.py"), default_timeout=TIMEOUT)
    at.query_params.update({"step": "4", "class": code})
    at.run()
    assert not at.exception and at.session_state["_class"] == {"code": code}
    assert at.get("plotly_chart") and not at.get("download_button")


def test_a_class_steps_model_figures_are_built_once_and_drawn_alike_for_every_session(monkeypatch):
    """Step 16's figures come from present.chart's shared finished figures (same_for): a second session's run builds
    none, and both sessions draw the same specs, whose heatmap holds the copying head's weights of the step's run."""
    from attnviz import figures
    from appkit.lesson.models import copying_head

    first = run_page("lesson.py", {"step": "16", "copyseed": "3"})
    assert not first.exception, first.exception
    built = []
    original = figures.attention_heatmap
    monkeypatch.setattr(figures, "attention_heatmap", lambda *a, **k: built.append(1) or original(*a, **k))
    second = run_page("lesson.py", {"step": "16", "copyseed": "3"})
    assert not second.exception and not built
    specs = [[json.loads(c.proto.spec) for c in at.get("plotly_chart")] for at in (first, second)]
    assert specs[0] == specs[1] and len(specs[0]) == 2
    _, _, (layer, head), _, result = copying_head(3)
    drawn = decode(specs[1][0]["data"][0]["customdata"])[..., 0]  # (n, n) the true weights the hover reads
    assert np.abs(drawn - result.weights[layer, head]).max() <= 1e-6


@pytest.mark.parametrize("step, computes", [(16, "Finding the copying head"), (18, "Ranking the pieces seven ways"),
                                            (20, "Reading the example pass-key document")])
def test_a_cold_model_step_shows_what_it_computes_and_how_far_then_draws_it(step, computes):
    """Steps 16, 18 and 20 on a server that has not computed them: the step's place shows a progress bar naming what
    it computes (the server's job, shared by every session), not a spinner the page waits behind; once the job is
    done, the next run draws the figure. The job told its parts as it went: the model's loading, then the rest."""
    from appkit import served
    from page_support import lesson_works

    import threading

    (work,) = lesson_works(step)
    begin = threading.Event()  # the job waits for the page's first run: a computation already cached would end first
    served._jobs()[0][work.key] = job = served.Job()  # as a server that has not computed it, its job just started
    threading.Thread(target=served._work, args=(job, lambda progress: begin.wait() and work.compute(progress)),
                     daemon=True).start()
    at = AppTest.from_file(str(ROOT / "pages" / "lesson.py"), default_timeout=TIMEOUT)
    at.query_params["step"] = str(step)
    at.run()
    assert not at.exception, at.exception
    bars = at.get("progress")
    assert len(bars) == 1 and computes in bars[0].proto.text and not at.get("plotly_chart")
    begin.set()
    assert work.result() is not None and job.error is None
    assert job.total >= 2 and 1 <= job.done <= job.total and job.what  # past the loading, said in words
    at.run()
    assert not at.exception and not at.get("progress") and at.get("plotly_chart")
