"""What the layout tests measure on a loaded page: texts that overlap or are cut off, a chart's title under plotly's
toolbar, cut or unrendered formulas, cut page links, labels left out, an error box and, in presenter mode, figures taller than the screen. test_layout.py and test_classroom.py
(each lesson step in presenter mode) call `layout_problems` on the pages they load."""

from driver import SHOTS, steady

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
FIGURE_BOXES = """() => Array.from(document.querySelectorAll('.js-plotly-plot, .av-root .av-figure, .av-overview .av-atlas-figure'))
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



# A chart's title under plotly's toolbar: the toolbar shows on hover at the chart's top right, and its box is laid out
# whether shown or not, so no hover is needed to measure it.
UNDER_TOOLBAR = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
  const title = gd.querySelector('.gtitle'), bar = gd.querySelector('.modebar');
  if (!title || !bar || !title.textContent.trim()) return [];
  const t = title.getBoundingClientRect(), m = bar.getBoundingClientRect();
  const over = t.left < m.right - 1 && m.left < t.right - 1 && t.top < m.bottom - 1 && m.top < t.bottom - 1;  // touching is not under
  return over ? [`title under the toolbar: '${title.textContent.trim().slice(0, 60)}' (${Math.round(Math.min(t.right, m.right) - Math.max(t.left, m.left))} px)`] : [];
})"""


def layout_problems(page, height: int, present: bool, first_screen: bool = False) -> list[str]:
    """On a loaded page, once its texts stop moving (plotly's automargin settles after the first draw): what overlaps or is
    cut, and in presenter mode what does not fit a screen `height` px tall."""
    found = (problems(steady(page, TEXT_BOXES)) + page.evaluate(CUT_FORMULAS) + page.evaluate(BROKEN_FORMULAS)
             + page.evaluate(CUT_LINKS) + page.evaluate(HIDDEN_LABELS) + page.evaluate(UNDER_TOOLBAR)
             + [f"an error box: {text[:200]}" for text in page.locator('[data-testid="stException"]').all_inner_texts()])
    if present:
        found += unfit(page.evaluate(FIGURE_BOXES), height, first_screen)
    return found


def assert_fits(page, height: int, present: bool, shot: str, first_screen: bool = False) -> None:
    """`layout_problems` finds nothing; the page's screenshot goes to `shot` in tests/e2e/shots (docs/pages/ holds some)."""
    found = layout_problems(page, height, present, first_screen)
    page.screenshot(path=str(SHOTS / shot), full_page=True)
    assert not found, "\n".join(found[:25]) + (f"\n… and {len(found) - 25} more" if len(found) > 25 else "")

# Charts with a heatmap whose margins plotly's automargin had to widen: each such widening draws the chart again.
PUSHED = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd._fullData.some(t => t.type === 'heatmap')).flatMap(gd => {
    const asked = gd._fullLayout.margin, got = gd._fullLayout._size;
    const title = String(gd._fullLayout.title.text || '').replace(/<[^>]*>/g, '').slice(0, 40);
    return ['l', 'r', 'b'].filter(s => got[s] > asked[s] + 0.5).map(s => `'${title}' ${s}: ${asked[s]} → ${Math.round(got[s])} px`);
  })"""
