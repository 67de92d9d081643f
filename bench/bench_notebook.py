"""Benchmark: the notebook widgets (attnviz.notebook) in a real JupyterLab, in headless Chromium.

Run: python bench/bench_notebook.py
Prints medians: a cell that makes a 16-token heatmap run (Shift+Enter) → the widget drawn, timed in the page from the
key press (the kernel already warm: the imports and GloVe in an earlier cell); a τ, hard or query change in the widget
→ redrawn, timed inside the page from the input event to the frame that shows it (the heatmap's own timings, as
bench_interactive.py takes them in the app); and every request the page made to another host than the notebook
server. Not a test; docs/benchmarks.md records its output with the date and machine.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.browser import CHROMIUM, FLAGS, free_port  # noqa: E402

RUNS = 7
WARM = ("import numpy as np, torch\n"
        "from attnviz import attend, embed, load_glove, tokenize\n"
        "from attnviz.notebook import heatmap\n"
        "tokens = tokenize('When he saw his owner, the dog was happy, so he wagged his tail')\n"
        "x = torch.from_numpy(embed(tokens, load_glove()).vectors)\n"
        "scores = attend(x, x, x).scores.numpy()\n"
        "heatmap(scores, tokens)")
DRAW = "heatmap(scores, tokens, query={k})"
IDLE = "() => Array.from(document.querySelectorAll('.jp-Notebook-ExecutionIndicator')).some(e => e.dataset.status === 'idle')"


def notebook(folder: Path) -> Path:
    cells = [WARM] + [DRAW.format(k=k % 16) for k in range(RUNS)]
    path = folder / "bench.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                           "source": [c]} for c in cells],
                                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                                "nbformat": 4, "nbformat_minor": 5}))
    return path


def run_cell(page, index: int) -> float:
    """Run the index-th cell; ms from the key press until the widget its output holds has drawn."""
    page.wait_for_function(IDLE, timeout=180_000)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()  # JupyterLab renders only the cells near the screen
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    page.evaluate("() => { window.pressedAt = null; document.addEventListener('keydown', () => "
                  "{ window.pressedAt = window.pressedAt ?? performance.now(); }, {capture: true, once: true}); }")
    page.keyboard.press("Shift+Enter")
    drawn = page.wait_for_function(f"""() => {{ const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}];
        const root = c && c.querySelector('.jp-OutputArea .av-root');
        return root && root.attnviz && window.pressedAt !== null ? performance.now() - window.pressedAt : null; }}""",
                                   timeout=180_000, polling="raf")
    return drawn.json_value()


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        notebook(root)
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_CONFIG_DIR": str(root / ".c"),
               "JUPYTER_DATA_DIR": str(root / ".d"), "JUPYTER_RUNTIME_DIR": str(root / ".r")}
        server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                                   "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
                                   "--LabApp.extension_manager=readonly", "--allow-root"],
                                  cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        for _ in range(180):
            try:
                urllib.request.urlopen(url + "/api", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                outside = []
                page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((url, "data:", "blob:")) else None)
                page.goto(f"{url}/lab/tree/bench.ipynb")
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
                run_cell(page, 0)  # the imports, GloVe and the first widget: not timed
                draws = [run_cell(page, k) for k in range(1, RUNS + 1)]
                widget = page.locator(".jp-Notebook .jp-Cell").nth(RUNS).locator(".av-root")
                widget.scroll_into_view_if_needed()
                slider = widget.get_by_role("slider", name="Temperature τ (log scale)")
                box = slider.bounding_box()
                for k in range(10):  # τ along its track, hard on and off: each redrawn in the page
                    page.mouse.click(box["x"] + box["width"] * (0.3 + 0.05 * k), box["y"] + box["height"] / 2)
                    page.wait_for_timeout(120)
                    widget.get_by_text("Hard attention (one-hot argmax)").click()
                    page.wait_for_timeout(120)
                changes = widget.evaluate("root => root.attnviz.timings")
                browser.close()
        finally:
            server.terminate()
            server.wait(20)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC · {platform.machine()} · {os.cpu_count()} cores "
          "· JupyterLab in headless Chromium, both on this machine")
    print("| measure | target | measured |\n|---|---|---|")
    print(f"| cell run (Shift+Enter) → 16-token heatmap drawn, median of {len(draws)} | ≤ 500 ms | {statistics.median(draws):.0f} ms "
          f"({min(draws):.0f}–{max(draws):.0f}) |")
    p95 = sorted(changes)[int(0.95 * (len(changes) - 1))]
    print(f"| a τ or hard change → redrawn in the notebook, {len(changes)} changes | median ≤ 33 ms | "
          f"{statistics.median(changes):.1f} ms, p95 {p95:.1f} ms |")
    print(f"| requests to any host but the notebook server | 0 | {len(outside)} |")


if __name__ == "__main__":
    main()
