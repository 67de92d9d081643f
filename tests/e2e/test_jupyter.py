"""The notebook widgets in a real JupyterLab and Notebook 7 (started here on a free local port), in headless Chromium:
the widget draws, a τ change in the page reaches the kernel's traitlet, a change made in Python redraws the page, the
widget's weights are what the page draws and what the engine gives, and no request leaves this machine."""

import json
import os
import sys
from pathlib import Path

import pytest

from driver import ROOT, free_port, outside_requests, serving

NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": [
            "import json, numpy as np, torch\n",
            "from attnviz import attend, embed, load_glove, tokenize\n",
            "from attnviz.notebook import heatmap\n",
            "tokens = tokenize('When he saw his owner, the dog was happy, so he wagged his tail')\n",
            "x = torch.from_numpy(embed(tokens, load_glove()).vectors)\n",
            "scores = attend(x, x, x).scores.numpy()\n",
            "w = heatmap(scores, tokens, query=9)\n",
            "w"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["print('VIEW', json.dumps({'temp': w.temp, 'mask': w.mask, 'query': w.query}))"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["w.temp, w.mask = 2.0, 'causal'"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": [
            "formula = np.where(np.tril(np.ones(scores.shape, bool)), scores / w.temp, -np.inf)\n",
            "formula = np.exp(formula - formula.max(1, keepdims=True)); formula /= formula.sum(1, keepdims=True)\n",
            "print('WEIGHTS', json.dumps({'temp': w.temp, 'engine': w.weights.tolist(), 'gap': float(np.abs(w.weights - formula).max())}))"]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory, browser):  # `browser` first: it checks for Chromium (or skips) before the server starts
    root = tmp_path_factory.mktemp("notebooks")
    (root / "widget.ipynb").write_text(json.dumps(NOTEBOOK))
    (root / "docs.ipynb").write_bytes((ROOT / "docs" / "notebook.ipynb").read_bytes())
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "JUPYTER_CONFIG_DIR": str(root / ".config"),
           "JUPYTER_DATA_DIR": str(root / ".data"), "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    yield from serving(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1", "--ServerApp.token=",
         "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=", "--LabApp.extension_manager=readonly", "--ServerApp.allow_remote_access=False",
         "--allow-root"],  # CI runs as root
        port, "JupyterLab", cwd=root, env=env, path="/api")


IDLE = "() => Array.from(document.querySelectorAll('.jp-Notebook-ExecutionIndicator')).some(e => e.dataset.status === 'idle')"


def accept_dialogs(page):
    """JupyterLab may open a dialog of its own on a loaded machine (a kernel to select, a notice): take its default,
    and say which it was, so that it does not stand over the cells."""
    for dialog in page.locator(".jp-Dialog").all():
        if dialog.is_visible():
            print("JupyterLab dialog:", dialog.inner_text()[:200].replace("\n", " | "))
            dialog.locator(".jp-Dialog-button.jp-mod-accept").first.click()
            page.wait_for_timeout(500)


def run_cell(page, index: int):
    """Select the index-th cell and run it (Shift+Enter) once the kernel is idle, then wait until its prompt shows a
    run number and the kernel is idle again."""
    page.wait_for_function(IDLE, timeout=180_000)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    done = f"""() => {{ const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}];
        const prompt = c && c.querySelector('.jp-InputPrompt');
        return Boolean(prompt) && /\\[\\d+\\]/.test(prompt.textContent); }}"""
    for _ in range(3):  # a key press can land while the page is still settling: try again
        accept_dialogs(page)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Escape")  # command mode: Shift+Enter runs the cell
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(done, timeout=60_000)
            break
        except Exception:  # noqa: BLE001  playwright's TimeoutError
            continue
    page.wait_for_function(done, timeout=120_000)
    page.wait_for_function(IDLE, timeout=180_000)


def printed(page, index: int, tag: str) -> dict:
    text = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output").inner_text()
    line = next(line for line in text.splitlines() if line.startswith(tag + " "))
    return json.loads(line[len(tag) + 1:])


@pytest.mark.parametrize("path", ["lab/tree/widget.ipynb", "notebooks/widget.ipynb"], ids=["JupyterLab", "Notebook 7"])
def test_the_widget_draws_and_syncs_both_ways_offline(jupyter, browser, path):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    outside = outside_requests(page, jupyter)
    try:
        page.goto(f"{jupyter}/{path}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        run_cell(page, 0)
        page.wait_for_selector(".jp-OutputArea .av-root .av-figure", timeout=120_000)
        drawn = page.evaluate("() => document.querySelector('.jp-OutputArea .av-root').attnviz.view")
        assert drawn["query"] == 9 and drawn["temp"] == 1.0
        # τ one step up in the page: drawn at once, sent to the kernel after the pause.
        slider = page.get_by_role("slider", name="Temperature τ (log scale)")
        box = slider.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + box["height"] / 2)  # a click on the track, right of 1
        page.wait_for_timeout(1500)
        temp = page.evaluate("() => document.querySelector('.jp-OutputArea .av-root').attnviz.view.temp")
        assert temp > 1.0
        run_cell(page, 1)
        assert printed(page, 1, "VIEW") == {"temp": temp, "mask": "none", "query": 9}
        # A change made in Python redraws the page.
        run_cell(page, 2)
        page.wait_for_function("() => { const v = document.querySelector('.jp-OutputArea .av-root').attnviz.view;"
                               " return v.temp === 2 && v.mask === 'causal'; }", timeout=30_000)
        run_cell(page, 3)
        result = printed(page, 3, "WEIGHTS")
        shown = page.evaluate("() => document.querySelector('.jp-OutputArea .av-root').attnviz.weights()")
        assert result["temp"] == 2.0 and result["gap"] < 1e-6  # the widget's weights: the formula written out
        assert max(abs(a - b) for row_a, row_b in zip(shown, result["engine"]) for a, b in zip(row_a, row_b)) < 1e-6
        assert outside == [], outside
    finally:
        context.close()


def test_the_notebook_in_docs_opens_with_what_it_shows(jupyter, browser):
    """docs/notebook.ipynb is stored with its outputs: opened in JupyterLab, with no cell run, each widget's place says
    what it is (its text/plain) rather than an error, and the printed results are there."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{jupyter}/lab/tree/docs.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        accept_dialogs(page)
        page.wait_for_function("() => Array.from(document.querySelectorAll('.jp-OutputArea-output'))"
                               ".some(e => e.innerText.includes('a running notebook draws it'))", timeout=120_000)
        shown = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
        assert "Heatmap: 16 queries × 16 keys" in shown, shown  # the first widget (JupyterLab draws cells as they scroll in)
        assert "Error displaying widget" not in shown and "model not found" not in shown
    finally:
        context.close()
