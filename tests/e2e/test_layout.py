"""No two texts in a chart overlap, none is cut off by the chart's box, no formula is cut by its column or left
unrendered, no link to a page is cut, and no label of a sentence of up to 20 tokens is left out: every page, at
1280×800 and 1920×1080, in its default state and with a 40-token sentence. In presenter mode (1920×1080) every page
and lesson step also fits: each figure within the screen's height, and Self-attention's heatmap on the first screen
(each lesson step, with its main figure: test_classroom). What is measured: layout.py.

A page checked at both sizes is loaded once, at 1280×800, and then resized to 1920×1080, as a user widens a window:
every figure redraws on a resize (plotly's charts, and the browser's through a ResizeObserver), so the second check sees
what a page opened at 1920×1080 draws, and a figure that failed to follow a resize would fail it. A page load costs
Chromium about 4 s of CPU on this 2-core machine (Streamlit's and plotly's scripts), a resize a fraction of one."""

import pytest

from driver import SHOTS, loaded, settle, steady
from layout import PUSHED, assert_fits, layout_problems, problems

SIZES = [(1280, 800), (1920, 1080)]
PAGES = ["", "lesson", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads", "trained", "decoder",
         "long_text"]
FORTY = ("when he saw his owner at the door, the dog was so happy that he ran in circles and wagged his tail "
         "while the cat watched from the top of the old red sofa by the big bright window")  # 40 tokens
SENTENCE_PARAM = {"": "text", "heads": "text", "trained": "text", "encoder_decoder": "src", "batches": "batch", "decoder": "text"}


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("forty", [False, True], ids=["default", "40 tokens"])
def test_no_text_overlaps_or_is_cut_off(browser, server, path, forty):
    if forty and path not in SENTENCE_PARAM:
        pytest.skip("this page has no sentence")
    query = f"?{SENTENCE_PARAM[path]}={FORTY.replace(' ', '+')}" if forty else ""
    at_both_sizes(browser, f"{server}/{path}{query}", f"{path or 'self_attention'}_{{size}}{'_40_tokens' if forty else ''}.png")


@pytest.mark.parametrize("path", [p for p in PAGES if p != "lesson"])  # the lesson's steps: test_classroom
def test_presenter_mode_text_does_not_overlap(browser, server, path):
    """Presenter mode's larger chart text (16 px and more) still fits."""
    page = opened(browser, f"{server}/{path}?present=1", (1920, 1080))
    assert_fits(page, 1080, True, f"{path or 'self_attention'}_presenter_1920x1080.png", first_screen=path == "")
    page.context.close()


def test_lesson_steps_text_does_not_overlap(browser, server):
    """Every step from 2 on at 1280×800 (step 1: the lesson's default page above), reached as a class does, by Next:
    one page load, then one rerun a step (each step opening from its own link: test_classroom, in presenter mode)."""
    page = opened(browser, f"{server}/lesson?step=2", (1280, 800))
    found = []
    for step in range(2, 22):
        if step > 2:
            page.get_by_role("button", name="Next").click()
            settle(page)
            page.wait_for_function(f"() => (document.querySelector('h2') || {{}}).textContent?.startsWith('{step}. ')")
            loaded(page, ".js-plotly-plot, .av-root .av-figure, .av-overview .av-atlas-figure")
        found += [f"step {step}: {problem}" for problem in layout_problems(page, 800, False)]
        page.screenshot(path=str(SHOTS / f"lesson_{step}.png"), full_page=True)
    page.context.close()
    assert not found, "\n".join(found[:25])


def test_compare_mode_text_does_not_overlap(browser, server):
    """Compare's two sides at half the width each, and B − A, with 40 tokens, a long word and other scripts."""
    url = f"{server}/?cmp=1&b_mask=causal&text=" + FORTY.replace(" ", "+") + "+supercalifragilistic+東京"
    at_both_sizes(browser, url, "compare_{size}.png")


@pytest.mark.parametrize("path", ["?parts=1&query=9&key=7", "?parts=1&scoring=additive&nsort=1&query=2",
                                  "trained?parts=1&query=8&key=7&present=1", "?pos=sinusoidal", "?pos=rotary&present=1",
                                  "trained?learned=1", "trained?qk=1&qkq=8&layer=3&head=5"])
def test_score_and_order_views_text_does_not_overlap(browser, server, path):
    """Inside a score (its bar rows, titles and all 50 of GloVe's dimension labels; 32 of a trained head), the position
    tables and similarities, the learned positions and the query–key space."""
    name = path.replace("?", "_").replace("&", "_").replace("=", "")
    at_both_sizes(browser, f"{server}/{path}", f"views{name}_{{size}}.png")


@pytest.mark.parametrize("path", ["?steps=1&walk=0", "?steps=1&walk=0&present=1", "trained?steps=1&walk=0", "heads", "batches", "encoder_decoder",
                                  "?text=" + "+".join([*FORTY.split(), "supercalifragilistic", "東京"] * 15)])  # the long-input overview
def test_heatmap_margins_already_fit_so_each_is_drawn_once(browser, server, path):
    """figures.fit_margins sizes each margin for its labels, titles and colour bar; where it falls short,
    plotly widens it by drawing the whole chart a second time (the walk opened in 1.82 s with every chart drawn
    twice, 1.39 s with automargin off)."""
    page = opened(browser, f"{server}/{path}", (1280, 800))
    pushed = steady(page, PUSHED)
    page.context.close()
    assert not pushed, "\n".join(pushed)


def opened(browser, url: str, size: tuple[int, int]):
    """A new page of its own context at `size`, `url` loaded with its first figure drawn and its script finished."""
    page = browser.new_context(viewport={"width": size[0], "height": size[1]}).new_page()
    page.goto(url)
    loaded(page, ".js-plotly-plot, .av-root .av-figure, .av-overview .av-atlas-figure")
    return page


def at_both_sizes(browser, url: str, shot: str) -> None:
    """Loaded at 1280×800 and checked, then widened to 1920×1080 and checked again; `shot` names each size's screenshot."""
    page = opened(browser, url, SIZES[0])
    try:
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            assert_fits(page, height, "present=1" in url, shot.format(size=f"{width}x{height}"))
    finally:
        page.context.close()


@pytest.mark.parametrize("path", ["kv_database", "lesson?step=7", "lesson?step=20", "lesson?step=21"])
def test_no_chart_title_runs_under_the_toolbar_at_1440x900(browser, server, path):
    """A laptop's 1440×900, where half-width charts are narrow enough that a title at plotly's own height ran under
    the toolbar that hover shows at the chart's top right (the key–value database's PCA, lesson steps 7, 20, 21)."""
    page = opened(browser, f"{server}/{path}", (1440, 900))
    assert_fits(page, 900, False, f"{path.replace('?step=', '_')}_1440x900.png")
    page.context.close()


@pytest.mark.parametrize("size", SIZES, ids=["1280x800", "1920x1080"])
def test_the_encoder_decoder_columns_start_level(browser, server, size):
    """Encoder, decoder and cross-attention side by side: their headings are one line each, so the three formulas and
    heatmaps below them start at the same height (a wrapped heading pushed its column down and narrowed nothing else)."""
    page = browser.new_context(viewport=dict(zip(("width", "height"), size))).new_page()
    page.goto(f"{server}/encoder_decoder")
    loaded(page, "[data-testid=stColumn] h3")
    boxes = page.evaluate("() => [...document.querySelectorAll('[data-testid=stColumn] h3')].slice(0, 3)"
                          ".map(h => { const b = h.getBoundingClientRect(); return [b.top, b.height]; })")
    assert len(boxes) == 3
    assert max(t for t, _ in boxes) - min(t for t, _ in boxes) < 1 and max(h for _, h in boxes) - min(h for _, h in boxes) < 1
    page.context.close()


SCATTER_LABELS = """() => Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text')).filter(t => t.textContent.trim())
  .map(t => { const b = t.getBoundingClientRect(); return {text: t.textContent.trim(), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; })"""


@pytest.mark.parametrize("query", ["", "?q=Smola", "?q=Werness&tau=0.3"])
def test_the_pca_labels_never_overlap_each_other(browser, server, query):
    """The key–value PCA names its keys beside their points (figures.place_labels): drawn by plotly, with markers up to
    48 px wide, no two labels overlap, at either size."""
    page = opened(browser, f"{server}/kv_database{query}", SIZES[0])
    try:
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(500)
            labels = page.evaluate(SCATTER_LABELS)
            assert len(labels) >= 3
            found = problems([{"chart": "pca", "frame": {"x0": -1e9, "y0": -1e9, "x1": 1e9, "y1": 1e9}, "texts": labels}])
            assert found == [], (width, found)
    finally:
        page.context.close()
