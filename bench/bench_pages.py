"""Benchmark: every page's first visit on a warm server, the step-by-step walk opened (issue 15, rows 4 and 5), and
the score-and-order views opened and clicked (Inside a score, Positions, learned positions, the query–key space).

A real `streamlit run app.py` and headless Chromium. The server is warmed by one session that draws the
Self-attention page (imports, GloVe). Then, in a new browser session each round, every page is opened from the
sidebar in turn, timed from the click to the page's figures drawn: the script has finished, no element is
stale, every plotly chart has its data and every interactive heatmap has drawn. Round 1 is each page's first visit on this server (the page's own
caches, such as Scoring's √d samples, are cold); later rounds are first visits in a new session with those
caches filled. Run: `python bench/bench_pages.py [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.browser import CHROMIUM, FLAGS, ROOT, Server  # noqa: E402

WALK_ROWS = {"open": "step-by-step walk opened (its first step drawn), 16 tokens", "step": "walk: another step's tab (α)",
             "all": "walk: the tab with every step (ten charts)"}
PAGES = ["Lesson", "Key–value database", "Attention pooling", "Scoring functions", "Encoder–decoder", "Batches",
         "Heads and layers", "Trained model", "Self-attention"]
# The page is drawn: its run finished, nothing is stale (left over from the page before), and every chart has data.
DRAWN = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  const live = Array.from(document.querySelectorAll('.av-root'));  // the interactive heatmaps (attnviz/browser/heatmap.mjs)
  return plots.length + live.length > 0 && plots.every(gd => gd._fullData && gd._fullData.length > 0) && live.every(r => r.attnviz);
}"""


def visit(page, name: str) -> float:
    """Seconds from a click on the page's sidebar link to its figures drawn."""
    link = page.get_by_test_id("stSidebarNav").get_by_role("link", name=name, exact=True)
    page.wait_for_timeout(500)
    started = time.perf_counter()
    link.click()
    page.wait_for_function("() => document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state') === 'running'"
                           " || document.querySelector('[data-stale=\"true\"]')", timeout=30_000, polling="raf")
    page.wait_for_function(DRAWN, timeout=120_000, polling="raf")
    return time.perf_counter() - started


def timed_click(page, target, shown: str) -> float:
    """Seconds from a click on `target` until the JavaScript condition `shown` holds and every chart is drawn."""
    page.wait_for_timeout(500)
    started = time.perf_counter()
    target.click()
    page.wait_for_function(shown, timeout=60_000, polling="raf")
    page.wait_for_function(DRAWN, timeout=60_000, polling="raf")
    return time.perf_counter() - started


def step_walk(page) -> dict[str, float]:
    """Seconds on the Self-attention page (16 tokens) from a click on the step-by-step expander to its first step
    drawn ("open"), from a click on the weights' tab to that step drawn ("step"), and from a click on the tab with
    every step to all of them drawn ("all")."""
    count = "document.querySelectorAll('.js-plotly-plot').length"
    before = page.evaluate(f"() => {count}")
    summary = page.get_by_text("Step by step: every matrix from X to αV", exact=False)
    summary.scroll_into_view_if_needed()
    seconds = {"open": timed_click(page, summary, f"() => {count} > {before}")}
    weights = ("() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
               ".some(gd => String(gd.layout.title.text).includes('Weights '))")
    seconds["step"] = timed_click(page, page.get_by_role("tab", name=re.compile(r"· α$")), weights)
    seconds["all"] = timed_click(page, page.get_by_role("tab", name="All steps"), f"() => {count} > {before} + 5")
    page.get_by_role("tab", name="1 · X").click()  # as a new session finds it, for the next round
    page.wait_for_function(DRAWN, timeout=60_000, polling="raf")
    summary.click()  # closed again
    page.wait_for_function(DRAWN, timeout=60_000, polling="raf")
    return seconds


VIEW_ROWS = {
    "parts_open": "Inside a score: the expander opened (Self-attention, 16 tokens)",
    "parts_sort": "Inside a score: a click inside (Sort by contribution)",
    "positions_open": "Positions: sinusoidal chosen, its table and similarity drawn",
    "positions_rotary": "Positions: a click inside (rotary chosen)",
    "learned_open": "Trained model: the learned positions opened",
    "qk_open": "Trained model: the query–key space opened (~80 queries and keys)",
    "qk_click": "Trained model: a click on a query in it (its strongest keys joined)",
}
CHART_WITH = "() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd => String(gd.layout.title && gd.layout.title.text).includes({!r}))"


def new_views(page) -> dict[str, float]:
    """Seconds from a click to the view drawn, on Self-attention then the Trained model (VIEW_ROWS)."""
    seconds = {}
    opener = page.get_by_text("Inside a score: the chosen cell", exact=False)
    opener.scroll_into_view_if_needed()
    seconds["parts_open"] = timed_click(page, opener, CHART_WITH.format("a = Σ terms"))
    sort = page.get_by_text("Sort by contribution")
    seconds["parts_sort"] = timed_click(page, sort, "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                                        ".some(gd => String(gd._fullLayout.xaxis4 && gd._fullLayout.xaxis4.title.text).includes('by |term|'))")
    side = page.get_by_test_id("stSidebar")
    seconds["positions_open"] = timed_click(page, side.get_by_text("sinusoidal, added to X"), CHART_WITH.format("P: added"))
    seconds["positions_rotary"] = timed_click(page, side.get_by_text("rotary (RoPE), on q and k"), CHART_WITH.format("cos(p·θ_i)"))
    visit(page, "Trained model")
    opener = page.get_by_text("Positions the model learned", exact=False)
    opener.scroll_into_view_if_needed()
    seconds["learned_open"] = timed_click(page, opener, CHART_WITH.format("P: one learned row"))
    opener = page.get_by_text("The query–key space of layer", exact=False)
    opener.scroll_into_view_if_needed()
    seconds["qk_open"] = timed_click(page, opener, CHART_WITH.format("queries and"))
    chart = page.locator(".st-key-qk_map .js-plotly-plot")
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    x, y = page.evaluate("""() => { const gd = document.querySelector('.st-key-qk_map .js-plotly-plot'), l = gd._fullLayout;
      const box = gd.getBoundingClientRect(), t = gd._fullData[0];
      return [box.left + l._size.l + l.xaxis.d2p(t.x[5]), box.top + l._size.t + l.yaxis.d2p(t.y[5])]; }""")
    started = time.perf_counter()
    page.mouse.click(x, y)
    page.wait_for_function(CHART_WITH.format("queries and") + " && Array.from(document.querySelectorAll('.js-plotly-plot'))"
                           ".some(gd => gd._fullData.some(t => t.name === 'its strongest keys'))", timeout=60_000, polling="raf")
    page.wait_for_function(DRAWN, timeout=60_000, polling="raf")
    seconds["qk_click"] = time.perf_counter() - started
    return seconds


def visits(browser, url: str, pages: list[str], rounds: int) -> tuple[dict[str, list[float]], list[dict[str, float]]]:
    """Each round in a new browser session: every page in `pages` visited in turn, then the step walk opened.
    (seconds per page per round, seconds of the walk per round). The server is warmed by one session first."""
    times: dict[str, list[float]] = {name: [] for name in pages}
    walks = []
    warm = browser.new_page()
    warm.goto(url)
    warm.wait_for_function(DRAWN, timeout=120_000)
    warm.close()
    for number in range(rounds):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(url)
        page.wait_for_function(DRAWN, timeout=120_000)
        for name in pages:
            times[name].append(visit(page, name))
            print(f"round {number + 1}: {name} {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
        if pages and pages[-1] != "Self-attention":
            visit(page, "Self-attention")
        walks.append(step_walk(page))
        print(f"round {number + 1}: step walk " + ", ".join(f"{k} {v:.2f} s" for k, v in walks[-1].items()), file=sys.stderr, flush=True)
        walks[-1].update(new_views(page))
        print(f"round {number + 1}: views " + ", ".join(f"{k} {walks[-1][k]:.2f} s" for k in VIEW_ROWS), file=sys.stderr, flush=True)
        context.close()
    return times, walks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", default=",".join(PAGES), help="the pages to visit, comma-separated (empty: the walk only)")
    args = parser.parse_args()
    rounds, pages = args.rounds, [name for name in args.pages.split(",") if name]
    server = Server(ROOT / "app.py")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        times, walks = visits(browser, server.url, pages, rounds)
        browser.close()
    server.stop()
    later = lambda values: f"{statistics.median(values[1:]):.2f} s" if len(values) > 1 else ""  # noqa: E731
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · {os.cpu_count()} cores · {rounds} rounds")
    print("| page | first visit on this server (round 1) | first visit in a later session (median) | target |")
    print("|---|---|---|---|")
    for name in pages:
        print(f"| {name} | {times[name][0]:.2f} s | {later(times[name])} | ≤ 1.5 s |")
    for what, label in WALK_ROWS.items():
        values = [walk[what] for walk in walks]
        print(f"| {label} | {values[0]:.2f} s | {later(values)} | {'≤ 0.5 s' if what == 'open' else ''} |")
    for what, label in VIEW_ROWS.items():
        values = [walk[what] for walk in walks]
        target = "≤ 0.3 s" if what in ("parts_sort", "positions_rotary", "qk_click") else "≤ 1.5 s"
        print(f"| {label} | {values[0]:.2f} s | {later(values)} | {target} |")


if __name__ == "__main__":
    main()
