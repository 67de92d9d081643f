"""Benchmark of the interactive heatmap (issue 25's four figures), in real headless Chromium against the real app:

1 a change (hard, a τ step, the mask, the colour scale, the query) to the heatmap redrawn, at 16 tokens, timed inside
  the page: from the input event to the task after the frame that shows it (heatmap.mjs keeps these timings);
2 the same at 512 tokens, at 4,096 tokens in the long input's zoom window (64 rows, each over every key), and in
  Compare A | B at 16 and 256 tokens, its limit (a change on A's toolbar redraws A, B and B − A);
3 the websocket messages the page sends during 20 such changes, and after the pause that follows them;
4 the first heatmap on a warm server: the Self-attention page opened from the sidebar in a new session, to drawn;
  with --before DIR, the same for the checkout in DIR (say, a git worktree of an earlier commit), in the same run.

Run: python bench/bench_interactive.py [--rounds 5] [--before DIR] (needs Chromium, as the tests find it, and playwright).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.browser import CHROMIUM, FLAGS, Server, sentence  # noqa: E402
from bench.bench_pages import DRAWN as PAGE_DRAWN, visit  # noqa: E402

LIVE = "() => { const r = document.querySelector('.av-root'); return r && r.attnviz ? r.attnviz : null }"


def wait_drawn(page, n: int, timeout: float = 120_000):
    page.wait_for_function(f"() => {{ const a = ({LIVE})(); return a && a.rows.length === {n} }}", timeout=timeout)


def changes(page, rounds: int) -> None:
    """`rounds` times: hard on and off, τ down and up, two masks, two scales, two queries by key: 10 changes a round,
    on the first heatmap's toolbar (Compare's A)."""
    root = page.locator(".av-root").first
    tau = root.get_by_role("slider")
    hard = root.locator("input[type=checkbox]")
    mask = root.locator("label.av-control", has_text="Mask").locator("select")
    scale = root.locator("label.av-control", has_text="Colour scale").locator("select")
    figure = root.locator(".av-figure")
    back = "row" if scale.locator("option[value=row]").count() else "max"  # Compare has no per-row scale
    for _ in range(rounds):
        hard.click()
        hard.click()
        tau.press("ArrowLeft")
        tau.press("ArrowRight")
        mask.select_option("causal")
        mask.select_option("none")
        scale.select_option("sqrt")
        scale.select_option(back)
        figure.focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowUp")
        page.wait_for_timeout(600)  # a pause: the sync's rerun happens here, outside the timed changes


def timed_changes(browser, url: str, n: int, rounds: int, rows: int | None = None, query: str = "") -> list[float]:
    """The in-page timings of `rounds` rounds of changes at `n` tokens, once the heatmap shows `rows` rows (n).
    `query`: more of the link (`&cmp=1`: Compare A | B, whose sides share their timings)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/?text=" + "+".join(sentence(n).split()) + query)
    wait_drawn(page, rows or n)
    page.wait_for_timeout(1000)
    changes(page, rounds)
    timings = page.evaluate(f"() => ({LIVE})().timings")
    page.close()
    return timings


def messages(browser, url: str) -> tuple[int, int]:
    """(messages sent during 20 changes, messages sent in the 2 s after them). The changes end on a view other than
    the first (hard on, τ = 0.5, the third query), so there is a view to sync."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(time.time())))
    page.goto(f"{url}/?text=" + "+".join(sentence(16).split()))
    wait_drawn(page, 16)
    page.wait_for_timeout(1500)
    start = len(sent)
    tau = page.get_by_role("slider", name="Temperature τ (log scale)")
    hard = page.locator(".av-root input[type=checkbox]")
    for i in range(9):
        hard.click()
        tau.press("ArrowRight" if i % 2 else "ArrowLeft")
    page.locator(".av-root .av-figure").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    during = len(sent) - start
    page.wait_for_timeout(2000)
    after = len(sent) - start - during
    page.close()
    return during, after


def first_heatmap(browser, url: str, rounds: int) -> list[float]:
    """bench_pages.py's method: in a new session each round, open the Lesson, then time a click on the sidebar's
    Self-attention link to the page drawn (its run finished and its heatmap drawn)."""
    seconds = []
    for _ in range(rounds):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{url}/lesson")
        page.wait_for_function(PAGE_DRAWN, timeout=120_000)
        seconds.append(visit(page, "Self-attention"))
        context.close()
    return seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of 10 changes per size; new sessions for row 4")
    parser.add_argument("--before", type=Path, help="a checkout whose Self-attention page's first visit is timed too")
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        before = None
        if args.before:
            server = Server(args.before / "app.py", root=args.before)
            first_heatmap(browser, server.url, 1)  # the server's first session fills its caches
            before = first_heatmap(browser, server.url, args.rounds)
            server.stop()
        server = Server(ROOT / "app.py")
        first_heatmap(browser, server.url, 1)
        small = timed_changes(browser, server.url, 16, args.rounds)
        large = timed_changes(browser, server.url, 512, args.rounds)
        zoom = timed_changes(browser, server.url, 4096, args.rounds, rows=64)
        compared = [timed_changes(browser, server.url, n, args.rounds, query="&cmp=1&b_mask=none") for n in (16, 256)]
        during, after = messages(browser, server.url)
        loads = first_heatmap(browser, server.url, args.rounds)
        browser.close()
    server.stop()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, {platform.python_version()}, "
          f"Chromium headless, {len(small)} + {len(large)} + {len(zoom)} timed changes")
    print("| figure | target | measured |")
    print("|---|---|---|")
    print(f"| change → heatmap redrawn, 16 tokens (median, p95) | ≤ 33 ms, p95 ≤ 50 ms | "
          f"{statistics.median(small):.1f} ms, p95 {percentile(small, 0.95):.1f} ms (max {max(small):.1f}) |")
    print(f"| same, 512 tokens (median, p95) | ≤ 100 ms | {statistics.median(large):.1f} ms, p95 {percentile(large, 0.95):.1f} ms |")
    print(f"| same, 4,096 tokens: the zoom window, 64 rows × every key (median, p95) | ≤ 100 ms | "
          f"{statistics.median(zoom):.1f} ms, p95 {percentile(zoom, 0.95):.1f} ms |")
    for n, timings in zip((16, 256), compared):
        print(f"| Compare A \\| B at {n} tokens: a change on A redraws A, B and B − A (median, p95) | "
              f"{'≤ 33 ms, p95 ≤ 50 ms' if n == 16 else '≤ 100 ms'} | "
              f"{statistics.median(timings):.1f} ms, p95 {percentile(timings, 0.95):.1f} ms |")
    print(f"| messages to the server: during 20 changes, then after the pause | 0, ≤ 1 | {during}, {after} |")
    reference = f"; before: {statistics.median(before):.2f} s ({min(before):.2f}–{max(before):.2f})" if before else ""
    print(f"| first heatmap on a warm server: Self-attention opened from the sidebar, new session (median of {len(loads)}) "
          f"| no slower than before | {statistics.median(loads):.2f} s ({min(loads):.2f}–{max(loads):.2f}){reference} |")


if __name__ == "__main__":
    main()
