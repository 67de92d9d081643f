"""The classroom features in Chromium: σ learned live on Attention pooling, the comparison link on
Self-attention, and the lesson, step by step."""

import time

from driver import exceptions, plots, settle

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
    assert page.get_by_test_id("stProgress").count() == 0  # gone once done
    assert page.get_by_role("button", name="Learn σ again").count() == 1
    assert page.get_by_test_id("stMetric").filter(has_text="Learned σ").count() == 1
    assert exceptions(page) == []
