"""Helpers for the end-to-end tests: the real app served by `streamlit run`, driven in headless Chromium.

Chromium is ATTNVIZ_CHROMIUM, else the first of chromium, chromium-browser, google-chrome on PATH. Without
one these tests skip, unless ATTNVIZ_REQUIRE_BROWSER=1 (which .ci/run sets): then they fail. Screenshots
land in screenshots/ (git-ignored).
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "screenshots"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium to drive: ATTNVIZ_CHROMIUM, else the first of BROWSER_NAMES on PATH; None if none."""
    chosen = os.environ.get("ATTNVIZ_CHROMIUM")
    if chosen:
        return chosen if shutil.which(chosen) else None
    return next((path for path in map(shutil.which, BROWSER_NAMES) if path), None)


def chromium_or_skip() -> str:
    """find_chromium(), or a skip with the reason (a failure when ATTNVIZ_REQUIRE_BROWSER=1)."""
    path = find_chromium()
    if path:
        return path
    chosen = os.environ.get("ATTNVIZ_CHROMIUM")
    reason = (f"ATTNVIZ_CHROMIUM={chosen} is not an executable" if chosen else
              f"no Chromium: none of {', '.join(BROWSER_NAMES)} is on PATH and ATTNVIZ_CHROMIUM is not set")
    if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + " (ATTNVIZ_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TEACHER_KEY = "a-teacher-key-for-the-browser-tests"  # what starts a class on the servers these tests start


def start_server(env: dict | None = None, log: Path | None = None, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free local port, with TEACHER_KEY as its teacher key; (process, base URL) once its
    health check answers. `log`: a file that gets the server's output; `port`: the port (a restart on the same one),
    else a free one."""
    port = port or free_port()
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115  the server writes to it as long as it runs
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        # No model warm-up (appkit/warm.py): each test's server computes what its test asks, and no more.
        env={**os.environ, "PYTHONUNBUFFERED": "1", "ATTNVIZ_TEACHER_KEY": TEACHER_KEY, "ATTNVIZ_WARM_MODELS": "0",
             **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    if healthy(url, 60):
        return process, url
    process.kill()
    pytest.fail("streamlit did not start within 60 s")


def healthy(url: str, seconds: float) -> bool:
    """Whether Streamlit's health endpoint at `url` answers "ok" within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return True
        except OSError:
            time.sleep(0.25)
    return False


def serving(command: list[str], port: int, name: str, *, cwd: Path, env: dict, path: str = "", seconds: float = 90):
    """A server started with `command` on `port`, for a fixture to `yield from`: its base URL once `path` there
    answers, the process stopped after; the test fails if it does not answer within `seconds`."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + path, timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        process.kill()
        pytest.fail(f"{name} did not start within {seconds:.0f} s")
    yield url
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:  # a server still shutting down on a loaded machine (JupyterLab's kernels) is killed
        process.kill()
        process.wait(20)


# Each chart's traces: type, y, z (what the colour scale shows) and, for heatmaps, w: the true weights they carry
# in customdata[..][..][0] for hover.
PLOT_DATA = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => gd._fullData.map(t => ({
    type: t.type, y: Array.from(t.y || []), z: t.z ? Array.from(t.z, row => Array.from(row)) : null,
    w: t.type === 'heatmap' && t.customdata ? Array.from(t.customdata, row => Array.from(row, cell => cell[0])) : null})))"""


def outside_requests(page, base: str) -> list[str]:
    """A list that gathers, from now on, every request `page` makes to a host other than `base`'s (data: and blob: URLs
    stay in the page)."""
    host = base.split("//")[1].split("/")[0]
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if r.url.split("//")[-1].split("/")[0] != host
            and not r.url.startswith(("data:", "blob:")) else None)
    return outside


def plots(page, count=1, timeout=60_000):
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {count}", timeout=timeout)
    page.wait_for_timeout(500)
    return page.evaluate(PLOT_DATA)


# The interactive heatmaps (attnviz/browser/heatmap.mjs; not the figures of final numbers drawn with its code, .av-matrix), each as
# one trace of the same shape: y names the rows "#i token", z is
# what the colours show, w the weights the browser computed; view is its state (τ, hard, mask, …).
LIVE_DATA = """() => Array.from(document.querySelectorAll('.av-root:not(.av-matrix)')).filter(r => r.attnviz).map(r => { const a = r.attnviz;
    return [{type: 'heatmap', live: true, y: a.rows.map((t, i) => '#' + i + ' ' + t), z: a.shown(), w: a.weights(),
             view: a.view, overflow: a.overflow}]; })"""


def heatmaps(page) -> list:
    """The interactive heatmaps first, then every plotly chart's traces (as `plots` gives them)."""
    return page.evaluate(LIVE_DATA) + page.evaluate(PLOT_DATA)


def live_cell(page, row: int, col: int, index: int = 0) -> tuple[float, float]:
    """Where the centre of cell (row, col) of the index-th interactive heatmap is on the page, scrolled into view."""
    page.wait_for_function(f"document.querySelectorAll('.av-root:not(.av-matrix) .av-figure').length > {index}")
    page.locator(".av-root:not(.av-matrix) .av-figure").nth(index).scroll_into_view_if_needed()
    return tuple(page.evaluate(f"() => document.querySelectorAll('.av-root:not(.av-matrix)')[{index}].attnviz.cellCentre({row}, {col})"))


def live_select(page, label: str, value: str, index: int = 0):
    """Pick `value` in the interactive heatmap's select labelled `label` (Mask, Colour scale, Palette)."""
    page.locator(".av-root:not(.av-matrix)").nth(index).locator("label.av-control", has_text=label).locator("select").select_option(value)


ATLASES = """() => Array.from(document.querySelectorAll('.av-atlas')).filter(r => r.attnviz).map(r => ({
    layers: r.attnviz.layers, heads: r.attnviz.heads, chosen: r.attnviz.chosen, drawn: r.attnviz.drawn}))"""


def atlases(page) -> list[dict]:
    """Each head atlas (attnviz/browser/atlas.mjs) drawn on the page: its layers, heads and chosen (layer, head), from 0."""
    return page.evaluate(ATLASES)


def click_head(page, layer: int, head: int, index: int = 0):
    """Click the thumbnail of `layer`, `head` (from 0) in the index-th atlas, scrolled into view, and wait for the rerun."""
    page.wait_for_function(f"Array.from(document.querySelectorAll('.av-atlas')).filter(r => r.attnviz).length > {index}",
                           timeout=120_000)
    page.evaluate(f"() => document.querySelectorAll('.av-atlas')[{index}].attnviz.showTile({layer}, {head})")
    where = page.evaluate(f"() => document.querySelectorAll('.av-atlas')[{index}].attnviz.tileCentre({layer}, {head})")
    page.mouse.move(*where)
    page.mouse.click(*where)
    settle(page)


def wait_for_heatmap(page, predicate, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        data = heatmaps(page)
        if data and data[0] and predicate(data[0][0]):
            return data[0][0]
        page.wait_for_timeout(250)
    raise AssertionError("the heatmap never showed the expected data")


def url_has(page, *parts: str, timeout: float = 10) -> bool:
    """Whether the page's URL comes to contain every one of `parts` within `timeout` seconds: a run updates the
    URL at its end, after its charts are drawn."""
    deadline = time.time() + timeout
    while not all(p in page.url for p in parts) and time.time() < deadline:
        page.wait_for_timeout(100)
    return all(p in page.url for p in parts)


def url_lacks(page, part: str, timeout: float = 10) -> bool:
    """Whether `part` leaves the page's URL within `timeout` seconds (the URL is written at a run's end)."""
    deadline = time.time() + timeout
    while part in page.url and time.time() < deadline:
        page.wait_for_timeout(100)
    return part not in page.url


def exceptions(page) -> list[str]:
    """The text of every exception box on the page."""
    return page.locator('[data-testid="stException"]').all_inner_texts()


RUNNING = '[data-testid="stApp"][data-test-script-state="running"]'
NOT_RUNNING = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def settle(page, timeout=60_000):
    """Wait for the rerun a click or an edit started to finish: for it to start (up to 400 ms; a rerun that started
    and ended within them is over too), then for the script to stop running."""
    try:
        page.wait_for_selector(RUNNING, timeout=400)
    except PlaywrightTimeout:
        pass  # no rerun started within 400 ms: none was asked for, or it has already ended
    page.wait_for_selector(NOT_RUNNING, timeout=timeout)
    page.wait_for_timeout(200)


def caught_up(page, timeout=60_000):
    """After a fragment's run that left the rest of its page behind (a note, .av-settle, says so): wait for the whole
    page's run that follows once the person pauses to have ended."""
    settle(page, timeout)
    page.wait_for_selector(".av-settle", state="detached", timeout=timeout)
    page.wait_for_selector(NOT_RUNNING, timeout=timeout)
    page.wait_for_timeout(200)


def loaded(page, selector: str, timeout=60_000):
    """After a page's load: its first `selector` drawn and its script finished (no rerun to wait for)."""
    page.wait_for_selector(selector, timeout=timeout)
    page.wait_for_selector(NOT_RUNNING, timeout=timeout)


def until(page, script: str, predicate, timeout: float = 20, interval: int = 100, what: str = "never reached"):
    """What `script` evaluates to on the page once `predicate` holds of it, polled every `interval` ms."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        last = page.evaluate(script)
        if predicate(last):
            return last
        page.wait_for_timeout(interval)
    raise AssertionError(f"{what}: last {last!r}")


def steady(page, script: str, interval: int = 200, timeout: float = 10):
    """What `script` measures on the page once it has stopped changing: the same twice, `interval` ms apart, with the
    page's fonts loaded (plotly's automargin redraws a chart once after its first draw)."""
    deadline = time.time() + timeout
    last = page.evaluate(script)
    while time.time() < deadline:
        page.wait_for_timeout(interval)
        now = page.evaluate(script)
        if now == last and page.evaluate("document.fonts.status") == "loaded":
            return now
        last = now
    raise AssertionError(f"the page kept changing for {timeout:g} s")


def widget(page, testid: str, label: str):
    """The one widget of this kind (stSelectbox, stRadio, ...) whose label is `label`."""
    return page.get_by_test_id(testid).filter(has=page.get_by_text(label, exact=True))


def shown_value(page, testid: str, label: str) -> str:
    """What a select box (its combobox input) or a slider (its thumb) shows."""
    box = widget(page, testid, label)
    if testid == "stSelectbox":
        return box.get_by_role("combobox").input_value()
    return box.get_by_role("slider").get_attribute("aria-valuetext")


def choose(page, label: str, option: str):
    """Pick `option` in the select box labelled `label`."""
    box = widget(page, "stSelectbox", label)
    box.evaluate("element => element.scrollIntoView({block: 'center'})")  # at the viewport's edge it will not open
    box.get_by_role("button", name="Open").click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def type_into(page, label: str, text: str, submit: str = "Control+Enter"):
    box = page.get_by_role("textbox", name=label, exact=True)
    box.fill(text)
    box.press(submit)
    settle(page)


def on_page(page, chart: int, points: list[tuple[float, float]]) -> list[list[float]]:
    """Where data coordinates (x, y) of the chart-th plotly chart lie on the page (a category axis counts its
    categories 0, 1, 2, …), through plotly's own axis mapping, the chart scrolled into view first."""
    return page.evaluate("""([chart, points]) => { const gd = document.querySelectorAll('.js-plotly-plot')[chart];
        gd.scrollIntoView({block: 'center'});
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
        return points.map(([x, y]) => [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)]); }""",
                         [chart, [list(p) for p in points]])


def click_point(page, chart: int, x: float, y: float):
    """Click the point at data coordinates (x, y) of the chart-th plotly chart (on_page)."""
    (where,) = on_page(page, chart, [(x, y)])
    page.mouse.move(*where)
    page.wait_for_timeout(300)
    page.mouse.click(*where)
    settle(page)
