"""A fresh server: app.py's st.App lifespan loads GloVe before any browser asks, and the very first session,
even on a deep link, runs through app.py's navigation."""

import time
from pathlib import Path

from driver import start_server


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_the_server_loads_glove_before_any_browser_connects():
    process, _ = start_server()
    try:
        at_health = resident_mib(process.pid)
        deadline = time.time() + 60
        while resident_mib(process.pid) < at_health + 200 and time.time() < deadline:
            time.sleep(0.25)
        # GloVe alone is 400,000 × 50 float32 (76 MiB) plus its norms and 400,000 words; torch and gensim add more.
        assert resident_mib(process.pid) >= at_health + 200, f"{at_health:.0f} → {resident_mib(process.pid):.0f} MiB"
    finally:
        process.terminate()
        process.wait(10)


def test_the_first_session_of_a_fresh_server_follows_a_deep_link_through_app_py(browser, tmp_path):
    log = tmp_path / "server.log"
    process, url = start_server(log=log)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{url}/kv_database?q=Li")
        page.get_by_role("heading", name="Key–value database").wait_for(timeout=120_000)
        # app.py's menu, with its page titles (Streamlit's legacy pages/ mode would list the file names instead).
        nav = page.get_by_test_id("stSidebarNav")
        for title in ("Self-attention", "Lesson", "Key–value database", "Trained model"):
            assert nav.get_by_role("link", name=title, exact=True).count() == 1
        assert "attnviz" in page.title()
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=60_000)
        # The session arrived during the warm-up and waited for its imports: no half-made module, no traceback.
        text = log.read_text()
        assert "Traceback" not in text and "partially initialized" not in text and "failed" not in text, text[-2000:]
    finally:
        context.close()
        process.terminate()
        process.wait(10)


def cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_an_idle_server_spends_no_cpu(browser):
    """Once a page is drawn and nobody touches it, the server rests. (Streamlit's file watcher, walking a virtual
    environment inside the checkout, once kept a core busy for as long as the server ran.)"""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    process, url = start_server()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector(".av-root .av-figure", timeout=120_000)
        # The warm-up's last step (gensim's KeyedVectors, about 1.5 s of CPU) starts after the first page's run and
        # ends within seconds, later on a loaded machine: the rest begins once a second passes with next to no CPU.
        deadline, rested = time.time() + 30, False
        while not rested and time.time() < deadline:
            before = cpu_seconds(process.pid)
            page.wait_for_timeout(1000)
            rested = cpu_seconds(process.pid) - before < 0.1
        assert rested, "the server never came to rest after its warm-up"
        before = cpu_seconds(process.pid)
        page.wait_for_timeout(5000)
        assert cpu_seconds(process.pid) - before < 0.5
    finally:
        context.close()
        process.terminate()
        process.wait(10)
