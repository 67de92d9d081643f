"""The classroom features in Chromium: σ learned live on Attention pooling, the comparison link on
Self-attention, and the lesson, step by step."""

import functools
import time

import numpy as np
import pytest

from attnviz.embeddings import load_glove
from driver import exceptions, plots, settle, shown_value, type_into, url_has
from layout import assert_fits
from appkit.lesson.common import STEP_COUNT

LIVE_TITLE = """() => Array.from(document.querySelectorAll('.js-plotly-plot'), gd => gd.layout.title && gd.layout.title.text)
    .map(t => /Learning σ: step (\\d+) of 150/.exec(t || '')).filter(m => m).map(m => Number(m[1]))"""


def test_sigma_is_learned_live_with_a_progress_bar(page, server):
    page.goto(f"{server}/pooling")
    plots(page)
    settle(page)
    page.get_by_role("button", name="Learn σ").click()
    titles, progress_seen, deadline = set(), False, time.time() + 30
    while time.time() < deadline:
        titles.update(page.evaluate(LIVE_TITLE))
        progress_seen = progress_seen or page.get_by_test_id("stProgress").count() > 0
        if 150 in titles:
            break
        page.wait_for_timeout(100)
    settle(page)
    steps = sorted(titles)
    assert progress_seen and len(steps) >= 5 and steps[0] < 150 and steps[-1] == 150, titles  # drawn as it trained
    page.get_by_test_id("stProgress").first.wait_for(state="detached", timeout=20_000)  # gone once done (the last
    # rerun that removes it may lag the last frame on a loaded machine)
    assert page.get_by_test_id("stProgress").count() == 0
    # The run that removed the bar goes on to draw the result: wait for it, as for the bar, before counting.
    learned = page.get_by_test_id("stMetric").filter(has_text="Learned σ")
    learned.first.wait_for(timeout=20_000)
    settle(page)
    assert page.get_by_role("button", name="Learn σ again").count() == 1
    assert learned.count() == 1
    assert exceptions(page) == []


def softmax(scores):
    e = np.exp(scores - scores.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


COMPARED = """() => { const roots = Array.from(document.querySelectorAll('.av-compare .av-root'));
    return roots.length >= 2 && roots.every(r => r.attnviz) ? roots.map(r => r.attnviz.weights()) : null; }"""


def compared(page, sides: int, timeout: float = 30) -> list:
    """The weights each side of Compare draws (A, B, and B − A where the tokens match), once `sides` are drawn."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        drawn = page.evaluate(COMPARED)
        if drawn and len(drawn) == sides:
            return drawn
        page.wait_for_timeout(200)
    raise AssertionError(f"Compare never drew {sides} heatmaps")


def test_a_comparison_link_draws_both_sides_and_their_difference(page, server):
    words = "the cat sat on the mat".split()
    page.goto(f"{server}/?cmp=1&text={'+'.join(words)}&scoring=dot&b_scoring=scaled_dot&b_mask=none")
    a, b, diff = (np.array(w) for w in compared(page, 3))
    settle(page)
    assert exceptions(page) == []
    x = np.stack([glove()[w] for w in words]).astype(np.float64)  # (6, 50)
    np.testing.assert_allclose(a, softmax(x @ x.T), rtol=1e-5, atol=1e-7)  # A: dot
    np.testing.assert_allclose(b, softmax(x @ x.T / np.sqrt(50)), rtol=1e-5, atol=1e-7)  # B: scaled dot
    np.testing.assert_allclose(diff, b - a, atol=1e-6)
    assert shown_value(page, "stSelectbox", "Scoring (B)") == "scaled_dot"

    # B gets its own sentence: both sides drawn, no difference, and the link keeps it
    type_into(page, "Sentence B (empty: A's sentence)", "a dog ran", submit="Enter")
    assert url_has(page, "b_text=a+dog+ran", "cmp=1")
    assert len(compared(page, 2)[1]) == 3  # B's three words, and no difference
    assert page.get_by_text("A and B have different tokens").count() == 1
    assert exceptions(page) == []


@functools.cache
def glove():
    return load_glove()


DRAWN = ".js-plotly-plot, .av-root .av-figure, .av-overview .av-atlas-figure"  # a step's figures: plotly's, or the browser's heatmaps
COMPARED_B = ".st-key-lesson_compare .av-pair > div:nth-child(2) .av-figure"  # side B of the browser's comparison
LESSON_FIGURES = {1: "lesson_exact", 2: "lesson_hard", 3: "lesson_soft", 4: "lesson_pooling", 5: "lesson_scores",
                  6: COMPARED_B, 7: "lesson_matrix", 8: COMPARED_B, 9: "lesson_proj_3", 10: COMPARED_B, 11: "lesson_cross",
                  12: "lesson_bmm", 13: "lesson_head", 14: "lesson_trained", 15: "lesson_decoder", 16: "lesson_copy",
                  17: "lesson_off", 18: "lesson_importance", 19: "lesson_write",
                  20: "lesson_needle", 21: "lesson_why", 22: "lesson_census"}


@pytest.mark.parametrize("step", range(1, STEP_COUNT + 1))
def test_each_lesson_step_opens_from_its_link_fits_a_projector_and_moves_on(browser, server, step):
    """In presenter mode at 1920×1080: the step's figure drawn whole without scrolling, every figure within the screen's
    height and no text overlapping or cut (layout.py, as test_layout checks every page); Next opens the next step."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(f"{server}/lesson?step={step}&present=1")
    page.wait_for_selector(DRAWN, timeout=180_000)  # a model step's job runs first on this cold server (its progress)
    settle(page)
    assert exceptions(page) == []
    assert page.locator("h2").first.inner_text().startswith(f"{step}. ")
    main = LESSON_FIGURES[step]
    figure = page.locator(main if main.startswith(".") else f".st-key-{main} .js-plotly-plot")
    box = figure.bounding_box()
    assert box and box["height"] > 150 and box["y"] + box["height"] <= 1080, box  # the last of the step's main figures
    assert page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(gd => gd.data.length > 0)")
    assert_fits(page, 1080, True, f"lesson_{step}_presenter.png")
    if step < STEP_COUNT:
        page.get_by_role("button", name="Next").click()
        settle(page)
        assert url_has(page, f"step={step + 1}")
        assert page.locator("h2").first.inner_text().startswith(f"{step + 1}. ")
        page.wait_for_selector(DRAWN, timeout=60_000)
        assert exceptions(page) == []
    else:
        assert page.get_by_role("button", name="Next").is_disabled()
    context.close()


def test_with_a_class_strip_every_steps_figure_stays_above_the_fold(browser, server):
    """The projector of a live class at 1920×1080: the class strip is pinned in the page's empty top band, so walking
    the lesson by Next, each step's main figure still ends within the screen, and the strip stays in view."""
    from driver import TEACHER_KEY

    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(f"{server}/lesson?present=1&step=1&teacher={TEACHER_KEY}")
    settle(page)
    page.get_by_role("button", name="Start a class").click()
    settle(page)
    strip = page.locator(".st-key-class_strip")
    for step in range(1, STEP_COUNT + 1):
        if step > 1:
            page.get_by_role("button", name="Next").click()
            settle(page)
        page.wait_for_selector(DRAWN, timeout=120_000)
        settle(page)
        main = LESSON_FIGURES[step]
        box = page.locator(main if main.startswith(".") else f".st-key-{main} .js-plotly-plot").bounding_box()
        assert box and box["y"] + box["height"] <= 1080, (step, box)
        held = strip.bounding_box()
        assert held and held["y"] >= 0 and held["y"] + held["height"] <= 100, (step, held)  # in the top band, in view
    assert exceptions(page) == []
    context.close()
