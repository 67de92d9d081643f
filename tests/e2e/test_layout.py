"""No two texts in a chart overlap, none is cut off by the chart's box, no formula is cut by its column or left
unrendered, no link to a page is cut, and no label of a sentence of up to 20 tokens is left out: every page, at
1280×800 and 1920×1080, in its default state and with a 40-token sentence. In presenter mode (1920×1080) every page
and lesson step also fits: each figure within the screen's height, and Self-attention's heatmap on the first screen
(each lesson step's main figure: test_classroom)."""

import pytest

from driver import SHOTS, loaded, steady

SIZES = [(1280, 800), (1920, 1080)]
PAGES = ["", "lesson", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads", "trained", "decoder"]
FORTY = ("when he saw his owner at the door, the dog was so happy that he ran in circles and wagged his tail "
         "while the cat watched from the top of the old red sofa by the big bright window")  # 40 tokens
SENTENCE_PARAM = {"": "text", "heads": "text", "trained": "text", "encoder_decoder": "src", "batches": "batch", "decoder": "text"}

# Every visible text element of every plotly chart and interactive heatmap, with its box, and the chart's own box. Scatter data labels
# (the key–value PCA's words) are left out: crowded points also name themselves on hover.
TEXT_BOXES = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map((gd, chart) => {
  const frame = gd.getBoundingClientRect();
  const texts = Array.from(gd.querySelectorAll('svg text')).filter(t => {
    if (!t.textContent.trim() || t.closest('.hoverlayer') || t.closest('.textpoint')) return false;
    const style = getComputedStyle(t);
    return style.display !== 'none' && style.visibility !== 'hidden' && +style.opacity !== 0 && +(t.getAttribute('opacity') ?? 1) !== 0;
  }).map(t => { const b = t.getBoundingClientRect();
    return {text: t.textContent.trim().slice(0, 40), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; })
    .filter(b => b.x1 - b.x0 > 0.5 && b.y1 - b.y0 > 0.5);
  return {chart, frame: {x0: frame.left, y0: frame.top, x1: frame.right, y1: frame.bottom}, texts};
}).concat(Array.from(document.querySelectorAll('.av-root .av-figure')).map((figure, i) => {
  const frame = figure.getBoundingClientRect();
  const texts = Array.from(figure.querySelectorAll('.av-overlay text')).map(t => { const b = t.getBoundingClientRect();
    return {text: t.textContent.trim().slice(0, 40), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; })
    .filter(b => b.x1 - b.x0 > 0.5 && b.y1 - b.y0 > 0.5);
  return {chart: `interactive ${i}`, frame: {x0: frame.left, y0: frame.top, x1: frame.right, y1: frame.bottom}, texts};
}))"""
SLACK = 1.0  # px: glyph boxes of neighbouring labels may touch
# Formulas wider than their column: KaTeX's box scrolls sideways, with no visible sign that the end is cut. A few px
# of overhang (a square root's or a sum's glyph) are not a cut. Formulas in the collapsed sidebar are not on screen.
CUT_FORMULAS = """() => Array.from(document.querySelectorAll('.katex-display')).filter(k => {
  const box = k.getBoundingClientRect();
  if (!box.width || box.right <= 0 || k.closest('[data-testid="stSidebar"][aria-expanded="false"]')) return false;
  return k.scrollWidth > k.clientWidth + 4;
}).map(k => `formula cut by ${k.scrollWidth - k.clientWidth} px: ${(k.querySelector('annotation') || {}).textContent}`)"""
# A link to a page (the lesson's "… in <page>") cut at its column's edge: Streamlit clips its text without a sign.
CUT_LINKS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stPageLink"]')).flatMap(link => {
  const cut = Array.from(link.querySelectorAll('*')).filter(e => e.getBoundingClientRect().width && e.scrollWidth > e.clientWidth + 1);
  return cut.length ? [`link cut by ${Math.max(...cut.map(e => e.scrollWidth - e.clientWidth))} px: ${(link.querySelector('p') || link).textContent.trim().slice(0, 80)}`] : [];
})"""
# A formula KaTeX could not parse: it shows its source in red (an escape lost on the way, such as \b for \big).
BROKEN_FORMULAS = """() => Array.from(document.querySelectorAll('.katex-error'))
  .map(k => `formula not rendered: ${k.textContent.slice(0, 80)}`)"""

# Labels left out: up to figures.ALL_LABELS tokens every label is drawn (plotly's category axes, the interactive
# heatmap's rows and keys), and the chosen query's row is always named, however long the sentence.
HIDDEN_LABELS = """() => {
  const found = [];
  document.querySelectorAll('.js-plotly-plot').forEach((gd, chart) => {
    const layout = gd._fullLayout;
    const title = String(layout.title.text || '').replace(/<[^>]*>/g, '').slice(0, 40);
    Object.keys(layout).filter(k => /^[xy]axis\\d*$/.test(k)).forEach(k => {
      const axis = layout[k];
      if (axis.type !== 'category' || !axis.visible || !axis.showticklabels) return;
      const count = (axis._categories || []).length;
      const drawn = Array.from(gd.querySelectorAll(`g.${axis._id}tick text`)).filter(t => t.textContent.trim()).length;
      if (count <= 20 && drawn < count) found.push(`chart ${chart} '${title}' ${k}: ${drawn} of ${count} labels drawn`);
    });
  });
  document.querySelectorAll('.av-root').forEach((root, i) => {
    const shown = root.attnviz;
    if (!shown || shown.overflow || !root.querySelector('.av-overlay text')) return;
    for (const [what, labels, drawn] of [['rows', shown.rows, shown.rowLabels], ['keys', shown.cols, shown.colLabels]])
      if (labels.length <= 20 && drawn.length < labels.length) found.push(`interactive ${i}: ${drawn.length} of ${labels.length} ${what} labelled`);
    const chooses = !root.classList.contains('av-matrix') || shown.view.query >= 0;  // a matrix of final numbers may choose no row
    if (chooses && !root.querySelector('.av-overlay .av-row.av-chosen')) found.push(`interactive ${i}: the chosen query's row has no label`);
  });
  return found;
}"""
# Presenter mode is laid out for a 1920×1080 projector: every figure fits the screen's height, and Self-attention's
# heatmap is whole on the first screen, without scrolling (each lesson step's main figure: test_classroom.py).
FIGURE_BOXES = """() => Array.from(document.querySelectorAll('.js-plotly-plot, .av-root .av-figure'))
  .map(f => { const b = f.getBoundingClientRect(); return {top: b.top + window.scrollY, bottom: b.bottom + window.scrollY}; })"""


def unfit(figures: list[dict], height: int, first_screen: bool) -> list[str]:
    found = [f"a figure {f['bottom'] - f['top']:.0f} px tall does not fit the {height} px screen"
             for f in figures if f["bottom"] - f["top"] > height]
    if first_screen and figures[0]["bottom"] > height + SLACK:
        found.append(f"the first figure ends at {figures[0]['bottom']:.0f} px, below the first {height} px screen")
    return found


def problems(charts) -> list[str]:
    found = []
    for chart in charts:
        f, texts = chart["frame"], chart["texts"]
        for t in texts:
            if t["x0"] < f["x0"] - SLACK or t["x1"] > f["x1"] + SLACK or t["y0"] < f["y0"] - SLACK or t["y1"] > f["y1"] + SLACK:
                found.append(f"chart {chart['chart']}: '{t['text']}' is cut off by the chart's box")
        for i, a in enumerate(texts):
            for b in texts[i + 1:]:
                if min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > SLACK and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > SLACK:
                    found.append(f"chart {chart['chart']}: '{a['text']}' overlaps '{b['text']}'")
    return found


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("forty", [False, True], ids=["default", "40 tokens"])
def test_no_text_overlaps_or_is_cut_off(browser, server, path, size, forty):
    if forty and path not in SENTENCE_PARAM:
        pytest.skip("this page has no sentence")
    query = f"?{SENTENCE_PARAM[path]}={FORTY.replace(' ', '+')}" if forty else ""
    shot = f"{path or 'self_attention'}_{size[0]}x{size[1]}{'_40_tokens' if forty else ''}.png"
    check(browser, f"{server}/{path}{query}", size, shot)  # docs/pages/ holds the 1920×1080 ones


@pytest.mark.parametrize("path", PAGES)
def test_presenter_mode_text_does_not_overlap(browser, server, path):
    """Presenter mode's larger chart text (16 px and more) still fits."""
    check(browser, f"{server}/{path}?present=1", (1920, 1080), f"{path or 'self_attention'}_presenter_1920x1080.png",
          first_screen=path == "")


@pytest.mark.parametrize("present", [False, True], ids=["1280x800", "presenter 1920x1080"])
@pytest.mark.parametrize("step", range(2, 20))
def test_lesson_steps_text_does_not_overlap(browser, server, step, present):
    size, query = ((1920, 1080), "&present=1") if present else ((1280, 800), "")
    check(browser, f"{server}/lesson?step={step}{query}", size, f"lesson_{step}{'_presenter' if present else ''}.png")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_mode_text_does_not_overlap(browser, server, size):
    """Compare's two sides at half the width each, and B − A, with 40 tokens, a long word and other scripts."""
    url = f"{server}/?cmp=1&b_mask=causal&text=" + FORTY.replace(" ", "+") + "+supercalifragilistic+東京"
    check(browser, url, size, f"compare_{size[0]}x{size[1]}.png")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("path", ["?parts=1&query=9&key=7", "?parts=1&scoring=additive&nsort=1&query=2",
                                  "trained?parts=1&query=8&key=7&present=1", "?pos=sinusoidal", "?pos=rotary&present=1",
                                  "trained?learned=1", "trained?qk=1&qkq=8&layer=3&head=5"])
def test_score_and_order_views_text_does_not_overlap(browser, server, path, size):
    """Inside a score (its bar rows, titles and all 50 of GloVe's dimension labels; 32 of a trained head), the position
    tables and similarities, the learned positions and the query–key space."""
    name = path.replace("?", "_").replace("&", "_").replace("=", "")
    check(browser, f"{server}/{path}", size, f"views{name}_{size[0]}x{size[1]}.png")


# Charts with a heatmap whose margins plotly's automargin had to widen: each such widening draws the chart again.
PUSHED = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd._fullData.some(t => t.type === 'heatmap')).flatMap(gd => {
    const asked = gd._fullLayout.margin, got = gd._fullLayout._size;
    const title = String(gd._fullLayout.title.text || '').replace(/<[^>]*>/g, '').slice(0, 40);
    return ['l', 'r', 'b'].filter(s => got[s] > asked[s] + 0.5).map(s => `'${title}' ${s}: ${asked[s]} → ${Math.round(got[s])} px`);
  })"""


@pytest.mark.parametrize("path", ["?steps=1&walk=0", "?steps=1&walk=0&present=1", "trained?steps=1&walk=0", "heads", "batches", "encoder_decoder",
                                  "?text=" + "+".join([*FORTY.split(), "supercalifragilistic", "東京"] * 15)])  # the long-input overview
def test_heatmap_margins_already_fit_so_each_is_drawn_once(browser, server, path):
    """figures.fit_margins sizes each margin for its labels, titles and colour bar; where it falls short,
    plotly widens it by drawing the whole chart a second time (the walk opened in 1.82 s with every chart drawn
    twice, 1.39 s with automargin off)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{server}/{path}")
    loaded(page, ".js-plotly-plot")
    pushed = steady(page, PUSHED)
    context.close()
    assert not pushed, "\n".join(pushed)


def check(browser, url: str, size: tuple[int, int], shot: str, first_screen: bool = False) -> None:
    """No text overlaps or is cut off, no formula is cut or left unrendered, no label of up to 20 tokens is left out; in presenter
    mode every figure fits the screen's height and, with `first_screen`, the first figure lies on the first screen."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(url)
    loaded(page, ".js-plotly-plot, .av-root .av-figure")
    boxes = steady(page, TEXT_BOXES)  # plotly's automargin settles after the first draw
    found = (problems(boxes) + page.evaluate(CUT_FORMULAS) + page.evaluate(BROKEN_FORMULAS)
             + page.evaluate(CUT_LINKS) + page.evaluate(HIDDEN_LABELS))
    if "present=1" in url:
        found += unfit(page.evaluate(FIGURE_BOXES), size[1], first_screen)
    page.screenshot(path=str(SHOTS / shot), full_page=True)
    context.close()
    assert not found, "\n".join(found[:25]) + (f"\n… and {len(found) - 25} more" if len(found) > 25 else "")
