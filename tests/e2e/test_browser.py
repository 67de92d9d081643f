"""End-to-end: the real app served by `streamlit run`, driven in headless Chromium through playwright.

.ci/run installs Debian's chromium; screenshots land in screenshots/ (git-ignored).
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "screenshots"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
PAGES = ["", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.25)
    else:
        process.kill()
        pytest.fail("streamlit did not start within 60 s")
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()


PLOT_DATA = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => gd._fullData.map(t => ({
    type: t.type, y: Array.from(t.y || []), z: t.z ? Array.from(t.z, row => Array.from(row)) : null})))"""


def plots(page, count=1, timeout=60_000):
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {count}", timeout=timeout)
    page.wait_for_timeout(500)
    return page.evaluate(PLOT_DATA)


def wait_for_heatmap(page, predicate, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        data = plots(page)
        if data and data[0] and predicate(data[0][0]):
            return data[0][0]
        page.wait_for_timeout(250)
    raise AssertionError("the heatmap never showed the expected data")


def test_default_heatmap_is_drawn(server, page):
    page.goto(server)
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    assert trace["type"] == "heatmap" and trace["y"][:3] == ["#0 when", "#1 he", "#2 saw"]
    assert all(abs(sum(row) - 1) < 1e-4 for row in trace["z"])
    page.screenshot(path=str(SHOTS / "self_attention.png"))


def test_typing_a_sentence_redraws(server, page):
    page.goto(server)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("the cat sat on the mat")
    box.press("Control+Enter")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 6)
    assert trace["y"][1] == "#1 cat"


def test_changing_a_control_changes_the_drawn_data(server, page):
    page.goto(server)
    before = wait_for_heatmap(page, lambda t: len(t["y"]) == 16)["z"]
    page.get_by_text("Hard attention (one-hot argmax)").click()
    after = wait_for_heatmap(page, lambda t: t["z"] != before)["z"]
    assert all(sorted(row)[-1] == 1 and sum(row) == 1 for row in after)


def test_hovering_a_cell_shows_its_numbers(server, page):
    page.goto(server)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    box = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    text = page.locator(".hoverlayer .hovertext").first.text_content()
    assert "query" in text and "key" in text and "weight:" in text and "score:" in text


@pytest.mark.parametrize("path", PAGES)
def test_every_page_loads_without_an_error_box(server, page, path):
    page.goto(f"{server}/{path}")
    plots(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(SHOTS / f"{path or 'home'}.png"))


def test_url_parameters_reproduce_the_view(server, page):
    page.goto(f"{server}/?text=the+cat+sat&mask=causal&scoring=cosine")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    assert trace["z"][0][1] == 0 and trace["z"][0][2] == 0  # causal: the first word sees only itself
    assert page.get_by_text("cosine").count() > 0
    assert "scoring=cosine" in page.url and "mask=causal" in page.url
