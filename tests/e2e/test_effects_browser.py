"""What a head changes, in the real app and a saved notebook view: the atlas coloured by each head's effect, a click
that removes a head and redraws the bars after it, the routes' threshold moved in the page, an edge that opens its
head, and a new sentence through all of it."""

import sys
from pathlib import Path

import numpy as np
import pytest

from driver import click_head, exceptions, settle, type_into, url_has

TEXT = "When he saw his owner, the dog was"
BARS = """(title) => { const b = Array.from(document.querySelectorAll('.av-barchart')).map(r => r.attnvizBars)
    .find(b => b && b.title.startsWith(title)); return b ? {labels: b.labels, values: b.values} : null; }"""
ROUTES = "() => document.querySelector('.av-routes') && document.querySelector('.av-routes').attnvizRoutes"


def threshold(page, value: float) -> float:
    """Move the routes' slider to its stop nearest `value`; returns that stop's threshold."""
    return page.evaluate("""(v) => { const s = document.querySelector('.av-routes input[type=range]');
        const view = document.querySelector('.av-routes-host').view, i = view.stopOf(v);
        s.value = String(i); s.dispatchEvent(new Event('input')); s.dispatchEvent(new Event('change'));
        return view.stops()[i]; }""", value)


def test_colour_by_effect_remove_a_head_move_the_threshold_open_an_edge_and_type_again(server, page):
    from attnviz import effects, models

    model = models.load("smollm2", "cpu")
    page.goto(f"{server}/decoder?text={TEXT.replace(' ', '+')}&effects=1")
    page.wait_for_function("document.querySelectorAll('.av-atlas').length >= 2", timeout=180_000)
    page.wait_for_function(ROUTES, timeout=180_000)
    settle(page)
    assert exceptions(page) == []
    click_head(page, 19, 7, index=1)  # the effect atlas: a click removes the head
    assert url_has(page, "layer=20", "head=8", "ablate=1")
    page.wait_for_function(f"({BARS})('After removing layer 20, head 8') !== null", timeout=120_000)
    after = page.evaluate(BARS, "After removing layer 20, head 8")
    before = page.evaluate(BARS, "Before: p(next piece")
    found = effects.every_head(model, TEXT)
    assert np.allclose(before["values"], found.clean, atol=1e-5)
    assert np.allclose(after["values"], found.ablated[19, 7], atol=1e-5)
    assert before["labels"] == after["labels"]

    edge = page.evaluate("""() => { const v = document.querySelector('.av-routes-host').view;
        const s = v.segments.find(s => s.e[4] >= 0); const box = v.canvas.getBoundingClientRect();
        v.canvas.scrollIntoView({block: 'center'});
        const b = v.canvas.getBoundingClientRect();
        return {layer: s.e[0], head: s.e[4], x: b.left + (s.x0 + s.x1) / 2, y: b.top + (s.y0 + s.y1) / 2}; }""")
    page.mouse.move(edge["x"], edge["y"])
    page.mouse.click(edge["x"], edge["y"])
    settle(page)
    assert url_has(page, f"layer={edge['layer'] + 1}", f"head={edge['head'] + 1}")


    loose = page.evaluate(ROUTES)
    stops = page.evaluate("() => document.querySelector('.av-routes-host').view.stops()")
    assert len(stops) > 10 and stops[-1] < 0.5  # the slider's travel fits this text's shares, on a log scale
    chosen = threshold(page, stops[len(stops) * 2 // 3])  # drawn in the page at once; the link follows once released
    strict = page.evaluate(ROUTES)
    assert strict["threshold"] == pytest.approx(chosen) and strict["edges"] < loose["edges"]
    settle(page)
    assert url_has(page, f"rthr={chosen:g}")
    assert page.evaluate(ROUTES)["edges"] == strict["edges"]  # the rerun keeps the threshold

    type_into(page, "Text", "The cat sat on the")
    page.wait_for_function(f"(({ROUTES})() || {{}}).threshold > 0", timeout=180_000)
    settle(page)
    assert exceptions(page) == []
    tokens = page.evaluate("() => document.querySelector('.av-routes-host').view.data.tokens")
    assert tokens == model.tokenize("The cat sat on the").labels()
    assert page.evaluate(ROUTES)["threshold"] == pytest.approx(chosen)  # the threshold survives the new sentence


def test_a_saved_effects_view_removes_a_head_offline(browser, tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1]))
    import tiny_models

    from attnviz import models
    from attnviz.notebook import effects

    model = models.load(tiny_models.build("gpt2", tmp_path), device="cpu")
    view = effects(model, "The cat watched the dog from the sofa.")
    path = view.save_html(tmp_path / "effects.html")
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelector('.av-atlas') && document.querySelector('.av-atlas').attnviz")
    click_head_offline = """([l, h]) => { const a = document.querySelector('.av-atlas');
        a.attnviz.showTile(l, h); return a.attnviz.tileCentre(l, h); }"""
    where = page.evaluate(click_head_offline, [1, 2])
    page.mouse.click(*where)
    page.wait_for_function(f"({BARS})('After removing layer 1, head 2 (from 0)') !== null")
    after = page.evaluate(BARS, "After removing layer 1, head 2 (from 0)")
    assert np.allclose(after["values"], view.found.ablated[1, 2], atol=1e-6)
    assert all(url.startswith("file://") for url in requests)  # nothing asked of any host
    page.close()
