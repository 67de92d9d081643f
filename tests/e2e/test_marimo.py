"""The notebook widget in marimo (`marimo run`, started here on a free local port), in headless Chromium, through
`mo.ui.anywidget`: the widget draws, a τ change in the page comes back to Python as the wrapper's value (a cell that
reads it runs again and prints it), and no request leaves this machine."""

import os
import sys

import pytest

from driver import ROOT, free_port, outside_requests, serving

APP = '''import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import numpy as np
    from attnviz.notebook import heatmap
    return heatmap, mo, np


@app.cell
def _(heatmap, mo, np):
    scores = np.array([[2.0, 1.0, 0.0], [0.5, 1.5, 0.2], [0.1, 0.3, 2.5]], np.float32)
    view = mo.ui.anywidget(heatmap(scores, ["the", "dog", "ran"]))
    view
    return (view,)


@app.cell
def _(mo, view):
    mo.md(f"VALUE temp={view.value['temp']} query={view.value['query']}")
    return


if __name__ == "__main__":
    app.run()
'''


@pytest.fixture(scope="module")
def marimo(tmp_path_factory, browser):  # `browser` first: it checks for Chromium (or skips) before the server starts
    if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") != "1":  # in CI marimo is installed: a missing one fails there
        pytest.importorskip("marimo")
    root = tmp_path_factory.mktemp("marimo")
    (root / "widget.py").write_text(APP)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(root), "MARIMO_SKIP_UPDATE_CHECK": "1"}
    yield from serving(
        [sys.executable, "-m", "marimo", "run", str(root / "widget.py"), "--headless", "--host", "127.0.0.1",
         "--port", str(port), "--no-token"],
        port, "marimo", cwd=root, env=env)


def test_a_value_set_in_the_page_comes_back_to_python(marimo, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    outside = outside_requests(page, marimo)
    try:
        page.goto(marimo)
        page.get_by_text("VALUE temp=1.0 query=0").wait_for(timeout=120_000)
        root = page.locator(".av-root").first  # inside marimo's shadow DOM: playwright's locators reach it
        root.wait_for(timeout=60_000)
        tau = page.get_by_role("slider", name="Temperature τ (log scale)")
        tau.focus()
        for key in ("ArrowRight", "ArrowRight"):
            tau.press(key)
        # the page redraws at once; after the pause the value goes to Python, and the cell reading it runs again
        page.get_by_text("VALUE temp=5.0 query=0").wait_for(timeout=60_000)
        drawn = root.evaluate("r => r.attnviz.view.temp")
        assert drawn == 5.0
        assert outside == [], outside
    finally:
        context.close()
