"""Benchmark of issue 15's six figures, each beside its reference in the same run, in real headless Chromium:

1 cold start of `streamlit run app.py` to the first real heatmap, against a trivial app drawing one small heatmap;
2 a toggle at 16 tokens to the heatmap redrawn (timed inside the page), against a one-chart app with one toggle;
3 the same toggle at 4,096 tokens to the zoom window redrawn and to the overview redrawn (and the paste that opens it,
  with its bytes);
4 the step-by-step walk opened, and 5 every page's first visit on a warm server (bench/bench_pages.py's method);
6 the engine (weights and output) against torch SDPA on the same device.

Medians; the two apps of rows 1 and 2 are alternated. Run: python bench/bench_browser.py [--rows 1,2] [--runs 5]
(needs Chromium, found as the tests find it, and playwright).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.browser import CHROMIUM, DRAWN, FLAGS, PLOTTED, ROOT, WATCH, Server, drawn, sentence  # noqa: E402
import attnviz  # noqa: E402, F401  (before torch: it sets torch's allocator up as the app runs it)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# The references of issue 15: a trivial app drawing one small heatmap (row 1), and a one-chart app with one toggle (row 2).
TRIVIAL = """
import streamlit as st, plotly.graph_objects as go
st.plotly_chart(go.Figure(go.Heatmap(z=[[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])))
"""
TOGGLE = """
import numpy as np, streamlit as st, plotly.graph_objects as go
hard = st.toggle("Hard attention (one-hot argmax)")
weights = np.random.default_rng(0).dirichlet(np.ones(16), 16)  # (16, 16), rows sum to 1
if hard:
    weights = np.eye(16)[weights.argmax(1)]  # (16, 16) one-hot rows
st.plotly_chart(go.Figure(go.Heatmap(z=weights, zmin=0, zmax=1)))
"""

def cold_start(browser, script: Path) -> float:
    server = Server(script)
    page = browser.new_page()
    page.goto(server.url)
    drawn(page)
    seconds = time.perf_counter() - server.started
    page.close()
    server.stop()
    return seconds


def clicks(page, label: str, runs: int, key: str | None = None, watch: str = DRAWN, settle_ms: int = 700) -> list[float]:
    """Seconds from each click on the toggle `label` (or, with `key`, each press of that key on the slider named
    `label`) to the heatmap that `watch` reads redrawn with other data, timed in the page."""
    times = []
    for _ in range(runs):
        page.wait_for_timeout(settle_ms)  # let the previous rerun settle; not timed
        page.evaluate(WATCH, watch)
        if key:
            page.get_by_role("slider", name=label).press(key)
        else:
            page.get_by_text(label, exact=True).click()
        page.wait_for_function("() => window.__changedAt !== null", timeout=120_000)
        times.append(page.evaluate("() => window.__changedAt - window.__clickAt") / 1000)
    return times


def opened(browser, url: str, text: str | None = None):
    """A new tab on `url`, its heatmap drawn; with `text` typed into the Sentence box first."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    drawn(page)
    if text is not None:
        box = page.get_by_role("textbox", name="Sentence")
        before = page.evaluate(DRAWN)
        box.fill(text)
        box.press("Control+Enter")
        drawn(page, before, timeout=180_000)
    return page


OVERVIEW_OR_FULL = "() => { const gd = document.querySelector('.js-plotly-plot'); return gd && gd._fullData && gd._fullData.length && (String(gd.layout.title && gd.layout.title.text).includes('Overview') || gd._fullData[0].y.length >= 4096) }"


def long_paste(browser, url: str, n: int, start: int = 0) -> tuple[float, int]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    received = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: received.append(len(payload))))
    page.goto(url)
    drawn(page)  # the default sentence first, so only the paste's messages are counted
    box = page.get_by_role("textbox", name="Sentence")
    box.fill(sentence(n, start))
    received.clear()
    start = time.perf_counter()
    box.press("Control+Enter")
    page.wait_for_function(OVERVIEW_OR_FULL, timeout=180_000)
    seconds = time.perf_counter() - start
    page.wait_for_timeout(1000)  # let the rest of the page's messages arrive before counting
    page.close()
    return seconds, sum(received)


def medians(fns: dict, device: torch.device, runs: int = 9) -> dict[str, float]:
    """Median ms of each function, all warmed up first, then timed in turn, so none gains from the order: the
    kernel's huge-page supply warms up over the first few n×n allocations."""

    def timed(fn) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000

    for fn in fns.values():
        for _ in range(3):
            fn()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(timed(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def row6_inputs(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(torch.randn(1, 8, 4096, 64, device=device) for _ in range(3))  # (B, H, N, d) each


def engine_ratio(device: torch.device) -> dict[str, float]:
    """Median ms of attend (weights and output; and with the scores kept too) and of SDPA, same inputs."""
    from attnviz.functional import attend

    q, k, v = row6_inputs(device)
    return medians({
        "ours": lambda: attend(q, k, v, need_scores=False),
        "ours_with_scores": lambda: attend(q, k, v),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
    }, device)


def engine_parts(device: torch.device) -> dict[str, float]:
    """Median ms of the three passes attend makes at row 6's size, each alone (attend's own functions for the first
    two): where the gap to SDPA lies."""
    from attnviz.functional import _normalise, scaled_dot_scores

    q, k, v = row6_inputs(device)
    weights = scaled_dot_scores(q, k)  # (B, H, N, N)
    return medians({
        "QKᵀ/√d": lambda: scaled_dot_scores(q, k),
        "softmax in place": lambda: _normalise(weights, hard=False, in_place=True),
        "weights @ V": lambda: weights @ v,
    }, device)


WARM_UP_PARTS = """
import time
marks = [time.perf_counter()]
import streamlit
marks.append(time.perf_counter())
import appkit.common, attnviz.models
marks.append(time.perf_counter())
from attnviz.embeddings import GloveMatrix
matrix = GloveMatrix.load()
marks.append(time.perf_counter())
from appkit.warm import _first_use
_first_use(matrix)
marks.append(time.perf_counter())
from appkit.common import keyed_glove
keyed_glove()
marks.append(time.perf_counter())
print(*(round(b - a, 2) for a, b in zip(marks, marks[1:])))
"""


def warm_up_parts() -> dict[str, float]:
    """Seconds of each part of the server's start, in a fresh process with nothing else running: what the first
    real heatmap waits for beyond what a trivial app does, and what is built behind it."""
    out = subprocess.run([sys.executable, "-c", WARM_UP_PARTS], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
    names = ["import streamlit", "import torch and the engine", "GloVe matrix mapped", "first use",
             "behind the first heatmap: gensim imported and KeyedVectors built"]
    return dict(zip(names, map(float, out)))


def engine_row(device: torch.device) -> tuple[str, ...]:
    ms = engine_ratio(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {os.cpu_count()} cores"
    ratio = ms["ours"] / ms["sdpa"]
    return (f"6 engine, weights and output, B=1 H=8 N=4,096 d=64, {name} (with the scores kept too: "
            f"{ms['ours_with_scores'] / ms['sdpa']:.2f}×)", "≤ 1.3× SDPA", f"{ms['ours']:.2f} ms", f"SDPA {ms['sdpa']:.2f} ms",
            f"{ratio:.2f}", "yes" if ratio <= 1.3 else f"no, by {ratio / 1.3 - 1:.0%}")


def safe(fn, *args):
    try:
        return fn(*args)
    except Exception as error:  # a reference that breaks is a result, not a crash of the benchmark
        return f"failed: {type(error).__name__}: {str(error).splitlines()[0][:80]}"


def row(name: str, target: str, ours: float, reference, unit: str, limit: float, scale: float = 1.0, digits: int = 2) -> tuple[str, ...]:
    """A table row: ours, the reference (a measured figure, or the target itself when a number), ours ÷ reference,
    and whether that ratio is within `limit`."""
    shown = lambda value: f"{value * scale:.{digits}f} {unit}"  # noqa: E731
    if isinstance(reference, str):
        return (name, target, shown(ours), reference, "", "")
    ratio = ours / reference
    return (name, target, shown(ours), shown(reference), f"{ratio:.2f}", "yes" if ratio <= limit else f"no, by {ratio / limit - 1:.0%}")


HARD = "Hard attention (one-hot argmax)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,2,3,4,5,6", help="which rows to measure, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="cold starts per app; rounds of clicks and of page visits")
    args = parser.parse_args()
    wanted = {int(number) for number in args.rows.split(",") if number}
    folder = Path(tempfile.mkdtemp())
    (folder / "trivial.py").write_text(TRIVIAL)
    (folder / "toggle.py").write_text(TOGGLE)
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        if 1 in wanted:
            # Alternated, so both apps meet the same state of the machine's page cache, which drifts.
            colds = [(cold_start(browser, ROOT / "app.py"), cold_start(browser, folder / "trivial.py")) for _ in range(args.runs)]
            print("1 cold starts (attnviz, trivial app), s:", [(round(o, 2), round(t, 2)) for o, t in colds], file=sys.stderr)
            print("1 the server's start alone, s:", warm_up_parts(), file=sys.stderr)
            rows.append(row("1 cold start: `streamlit run` → first real heatmap drawn", "≤ 1.25× the trivial app",
                            statistics.median(o for o, _ in colds), statistics.median(t for _, t in colds), "s", 1.25))
        app = Server(ROOT / "app.py") if wanted & {2, 3, 4, 5} else None
        if 2 in wanted:
            toggle = Server(folder / "toggle.py")
            ours, theirs = opened(browser, app.url, sentence(16)), opened(browser, toggle.url)
            times = {"ours": [], "theirs": []}
            for _ in range(args.runs):  # alternated in blocks of three clicks
                times["ours"] += clicks(ours, HARD, 3)
                times["theirs"] += clicks(theirs, HARD, 3)
            print("2 clicks (attnviz, toggle app), ms:", {k: [round(t * 1000) for t in v] for k, v in times.items()}, file=sys.stderr)
            median = statistics.median(times["ours"])
            rows.append(row("2 interaction, 16 tokens: toggle → heatmap redrawn", "≤ 1.0× the toggle app, ≤ 150 ms",
                            median, statistics.median(times["theirs"]), "ms", 1.0, 1000, 0))
            rows.append(row("2 same, against 150 ms", "≤ 150 ms", median, 0.150, "ms", 1.0, 1000, 0))
            ours.close(), theirs.close()
            toggle.stop()
        if 3 in wanted:
            seconds, size = long_paste(browser, app.url, 4096, 1)
            # Colour = block max ÷ the largest weight: per row (the default), every block of this repeated text holds
            # its row's largest weight, so the overview is all 1 whatever τ is.
            page = opened(browser, app.url + "/?scale=max", sentence(4096, 2))
            # The zoom window's toolbar holds the controls: the browser redraws the window at once, and the server
            # the overview once the pause (heatmap_draw.mjs's SYNC_MS, 400 ms) has sent it the view.
            zoom = clicks(page, HARD, 2 * args.runs, settle_ms=1500)
            toggles = clicks(page, HARD, 2 * args.runs, watch=PLOTTED, settle_ms=1500)  # after two, the view cache has both
            steps = clicks(page, "Temperature τ (log scale)", args.runs, key="ArrowRight", watch=PLOTTED, settle_ms=1500)
            print("3 clicks at 4,096 tokens (toggle → zoom; toggle → overview; τ → overview), ms:", [round(t * 1000) for t in zoom],
                  [round(t * 1000) for t in toggles], [round(t * 1000) for t in steps], file=sys.stderr)
            page.close()
            rows.append(row("3 interaction, 4,096 tokens: hard toggle → zoom window redrawn (in the browser)", "≤ 500 ms",
                            statistics.median(zoom), 0.5, "ms", 1.0, 1000, 0))
            rows.append(row("3 same → overview redrawn (the server's, after the 400 ms pause)", "≤ 500 ms", statistics.median(toggles), 0.5, "ms", 1.0, 1000, 0))
            rows.append(row("3 same, τ one step up (a τ not seen before) → overview redrawn", "≤ 500 ms", statistics.median(steps), 0.5, "ms", 1.0, 1000, 0))
            rows.append(("3a 4,096 tokens pasted → overview drawn (one run)", "", f"{seconds:.2f} s", "", "", ""))
            rows.append(("3b bytes received for that paste", "", f"{size / 1e6:.2f} MB", "", "", ""))
        if wanted & {4, 5}:
            from bench.bench_pages import PAGES, WALK_ROWS, visits
            times, walks = visits(browser, app.url, PAGES if 5 in wanted else [], args.runs)
            if 4 in wanted:
                print("4 walk (open, a step's tab, all steps), s:", [[round(v, 2) for v in w.values()] for w in walks], file=sys.stderr)
                for what, label in WALK_ROWS.items():
                    median = statistics.median(walk[what] for walk in walks)
                    rows.append(row(f"4 {label} (median of new sessions)", "≤ 500 ms", median, 0.5, "ms", 1.0, 1000, 0)
                                if what == "open" else (f"4 {label}", "", f"{median * 1000:.0f} ms", "", "", ""))
            for name in PAGES if 5 in wanted else []:
                rows.append(row(f"5 first visit: {name} (median of new sessions; first on this server: {times[name][0]:.2f} s)",
                                "≤ 1.5 s", statistics.median(times[name]), 1.5, "s", 1.0))
        if app:
            app.stop()
        browser.close()
    if 6 in wanted:
        devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
        for device in devices:
            rows.append(engine_row(device))
            print(f"6 the engine's passes alone, {device.type}, ms:", {k: round(v, 1) for k, v in engine_parts(device).items()}, file=sys.stderr)
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · {os.cpu_count()} cores · torch {torch.__version__} · medians")
    print("| # figure | target | attnviz | reference | ratio | met |")
    print("|---|---|---|---|---|---|")
    for line in rows:
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
