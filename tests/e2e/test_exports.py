"""Downloads in Chromium: on every page with a figure, each chart offers PNG/SVG (its camera button) and the
matrix charts a Download menu; the CSV and .npy a person gets hold the numbers the chart draws."""

import csv
import io

import numpy as np
import pytest

from driver import exceptions, plots, settle, wait_for_heatmap

# (page, a matrix chart on it, what its trace draws: "w" = the heatmap's true weights, "z" = the heatmap's values,
# "x" = a bar chart's lengths). scale=absolute on every page, so a heatmap's colour values are its weights too.
PAGES = [
    ("lesson", "lesson_exact", "x"),
    ("kv_database", "weights", "x"),
    ("pooling", "weights", "w"),
    ("scoring", "score_dot", "w"),
    ("encoder_decoder", "cross", "w"),
    ("batches", "bmm_q", "z"),
    ("heads", "rollout", "w"),
    ("trained", "rollout", "w"),
]
DRAWN = """([key, what]) => { const t = document.querySelector(`.st-key-${key} .js-plotly-plot`)._fullData[0];
    if (what === 'x') return [Array.from(t.x)];
    if (what === 'z') return Array.from(t.z, row => Array.from(row));
    return Array.from(t.customdata, row => Array.from(row, cell => cell[0])); }"""
CAMERA = """() => Array.from(document.querySelectorAll('.js-plotly-plot'), gd => gd._context.toImageButtonOptions)"""


def download(page, key: str, kind: str) -> bytes:
    """Open the chart's Download menu and save one of its files."""
    menu = page.locator(f".st-key-downloads_{key} button").first
    if not page.locator(f".st-key-{kind}_{key} button:visible").count():
        menu.scroll_into_view_if_needed()
        menu.click()
    with page.expect_download(timeout=30_000) as event:
        page.locator(f".st-key-{kind}_{key} button:visible").click()
    # The pointer leaves the button: its help tooltip ("Read it with numpy.load.") would otherwise open over the next
    # button and take its click.
    page.keyboard.press("Escape")
    page.mouse.move(0, 0)
    with open(event.value.path(), "rb") as saved:
        return saved.read()


@pytest.mark.parametrize("path, key, what", PAGES)
def test_every_page_exports_the_numbers_it_draws(page, server, path, key, what):
    page.goto(f"{server}/{path}?scale=absolute")
    plots(page)
    settle(page)
    assert exceptions(page) == []
    cameras = page.evaluate(CAMERA)
    assert cameras and all(c["format"] == "png" and c["scale"] == 3 for c in cameras), cameras
    assert page.locator("[class*='st-key-downloads_']").count() >= 1

    drawn = np.array(page.evaluate(DRAWN, [key, what]), dtype=np.float64)  # (rows, cols)
    numbers = np.load(io.BytesIO(download(page, key, "npy")), allow_pickle=False)
    assert numbers.dtype == np.float32 and numbers.shape == drawn.shape
    np.testing.assert_allclose(numbers, drawn, rtol=1e-6, atol=1e-7)

    rows = list(csv.reader(io.StringIO(download(page, key, "csv").decode("utf-8"))))
    assert len(rows) == drawn.shape[0] + 1 and all(len(r) == drawn.shape[1] + 1 for r in rows)
    np.testing.assert_allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), drawn, rtol=1e-5, atol=1e-12)

    html = download(page, key, "html").decode("utf-8")
    assert "<html>" in html and "plotly" in html and len(html) > 1_000_000  # plotly.js inlined: opens offline
    assert exceptions(page) == []


def test_the_camera_saves_svg_when_chosen(page, server):
    page.goto(f"{server}/scoring")
    plots(page)
    settle(page)
    page.get_by_text("SVG (vector, for papers)").click()
    settle(page)
    cameras = page.evaluate(CAMERA)
    assert cameras and all(c["format"] == "svg" for c in cameras), cameras
    with page.expect_download(timeout=30_000) as event:
        page.locator(".js-plotly-plot").first.hover()
        page.locator(".js-plotly-plot").first.locator("[data-title^='Download plot']").click()
    with open(event.value.path(), "rb") as saved:
        assert saved.read().lstrip().startswith(b"<svg")


def test_the_step_walk_downloads_every_matrix_it_draws(page, server):
    import zipfile

    page.goto(f"{server}/?text=the+cat+sat+on+the+mat&steps=1&walk=0")  # the tab with every step
    plots(page, 8)
    settle(page)
    drawn = [np.array(page.evaluate(DRAWN, [f"step_{i}", "z"]), dtype=np.float64) for i in range(8)]
    with zipfile.ZipFile(io.BytesIO(download(page, "steps", "npy"))) as archive:
        names = archive.namelist()
        assert names[0].startswith("01_input_x") and len(names) >= 8
        for i, name in enumerate(names[:8]):
            np.testing.assert_allclose(np.load(io.BytesIO(archive.read(name))), drawn[i], rtol=1e-6, atol=1e-7)
    with zipfile.ZipFile(io.BytesIO(download(page, "steps", "csv"))) as archive:
        rows = list(csv.reader(io.StringIO(archive.read(archive.namelist()[0]).decode())))
        assert rows[0][:2] == ["token \\ dimension", "d0"] and len(rows) == 7
        np.testing.assert_allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), drawn[0], rtol=1e-5, atol=1e-12)
    assert exceptions(page) == []


def toolbar_file(page, label: str) -> bytes:
    """What one of the heatmap's own buttons (CSV, .npy) saves: built in the page, with no request to the server."""
    with page.expect_download(timeout=30_000) as event:
        page.locator(".av-root:not(.av-matrix) .av-button", has_text=label).first.click()
    with open(event.value.path(), "rb") as saved:
        return saved.read()


def test_the_interactive_heatmap_exports_the_numbers_it_draws(page, server, glove):
    """The heatmap's CSV and .npy buttons save the weights it draws, which equal softmax(XXᵀ/√d / τ) under the causal
    mask written out here on the same GloVe vectors."""
    from attnviz.embeddings import embed, tokenize

    page.goto(f"{server}/?text=the+cat+sat+on+the+mat&temp=0.5&mask=causal")
    drawn = np.array(wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 6)["w"])  # (6, 6)
    settle(page)
    x = embed(tokenize("the cat sat on the mat"), glove).vectors.astype(np.float64)  # (6, 50)
    scores = x @ x.T / np.sqrt(x.shape[1]) / 0.5  # (6, 6)
    scores[np.triu_indices(6, 1)] = -np.inf
    expected = np.exp(scores - scores.max(1, keepdims=True))  # (6, 6)
    expected /= expected.sum(1, keepdims=True)
    numbers = np.load(io.BytesIO(toolbar_file(page, ".npy")), allow_pickle=False)
    assert numbers.dtype == np.float32 and numbers.shape == drawn.shape
    np.testing.assert_allclose(numbers, drawn, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(numbers, expected, rtol=1e-4, atol=1e-6)
    rows = list(csv.reader(io.StringIO(toolbar_file(page, "CSV").decode("utf-8"))))
    assert rows[0] == ["query \\ key", "the", "cat", "sat", "on", "the", "mat"]
    np.testing.assert_allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), expected, rtol=1e-4, atol=1e-6)
