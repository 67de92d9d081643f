"""Memory benchmark of the real server, driven by headless Chromium: what one heavy link costs, what the
downloads cost at 4,096 tokens, and whether memory comes back after sessions end.

- Heavy links: each opens a 4,096-token text through the URL with the scoring and heads that used to take
  gigabytes. Figure: the server's peak resident memory (VmHWM, reset before each link) above its resident
  memory just before the link, and the seconds until the overview (or a message) is drawn.
- Downloads at 4,096 tokens: seconds from the click to the finished file, its size, and the peak growth.
- Sessions: two rounds of ten browser sessions, each pasting a different 4,096-token text. All ten stay open,
  then close; after the session TTL one fresh session connects (Streamlit's session store drops expired
  sessions only when it is next used) and the server's resident memory is read.

Run: python bench/bench_memory.py [--ttl SECONDS] (default 120, Streamlit's own). Needs Chromium (ATTNVIZ_CHROMIUM, else chromium on PATH).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.browser import CHROMIUM, FLAGS, Server  # noqa: E402

N = 4096
HEAVY = {
    "scaled_dot, 1 head (the default)": {},
    "gaussian": {"scoring": "gaussian"},
    "gaussian, 8 heads of d_k = 128": {"scoring": "gaussian", "proj": "random", "heads": "8", "dk": "128"},
    "additive, h = 128": {"scoring": "additive", "h": "128"},
    "additive, h = 128, 8 heads of d_k = 128": {"scoring": "additive", "h": "128", "proj": "random", "heads": "8", "dk": "128"},
    "dot, 8 heads of d_k = 128, causal": {"scoring": "dot", "proj": "random", "heads": "8", "dk": "128", "mask": "causal"},
}
# Done when the overview is drawn, or a message box says why not.
DONE = """() => Array.from(document.querySelectorAll('[data-testid="stAlert"]')).some(a => a.innerText.trim())
    || Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd => gd.layout && gd.layout.title && String(gd.layout.title.text).includes('Overview'))"""
ANY_CHART = "() => document.querySelectorAll('.js-plotly-plot, .av-root .av-figure').length > 0"
# The warm-up's paste (under 512 tokens) is drawn by the browser's heatmap: done when it shows the paste's rows.
WARM_DONE = "() => Array.from(document.querySelectorAll('.av-root')).some(r => r.attnviz && r.attnviz.rows.length > 100)"


def status(pid: int, field: str) -> float:
    """A /proc/PID/status memory field, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to the current resident size


def common_words() -> list[str]:
    """The 3,000 most frequent plain words of GloVe's vocabulary (its index is in frequency order)."""
    import pyarrow.parquet as pq

    from attnviz.embeddings import glove_files

    words = pq.ParquetFile(glove_files()[1]).read(columns=["index"]).column("index").to_pylist()[:5000]
    return [w for w in words if w.isalpha()][:3000]


def texts(words: list[str], count: int, first_seed: int) -> list[str]:
    return [" ".join(np.random.default_rng(first_seed + k).choice(words, N)) for k in range(count)]


def open_and_wait(browser, url: str, paste: str | None = None, done: str = DONE, timeout=600_000):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    if paste is not None:
        page.wait_for_selector(".js-plotly-plot, .av-root .av-figure", timeout=timeout)  # the default sentence drawn
        box = page.get_by_role("textbox", name="Sentence")
        box.fill(paste)
        box.press("Control+Enter")
    page.wait_for_function(done, timeout=timeout)
    return context, page


def heavy_links(browser, server: Server, pid: int, text: str) -> list[tuple]:
    rows = []
    for label, params in HEAVY.items():
        before = status(pid, "VmRSS")
        reset_peak(pid)
        started = time.perf_counter()
        context, page = open_and_wait(browser, f"{server.url}/?{urlencode({'text': text, **params})}")
        seconds = time.perf_counter() - started
        message = page.locator('[data-testid="stAlert"]').all_inner_texts()
        peak = status(pid, "VmHWM") - before
        context.close()
        rows.append((label, peak, seconds, status(pid, "VmRSS"), "; ".join(m[:60] for m in message) or "overview drawn"))
        print(f"  {label}: peak +{peak:.0f} MiB, {seconds:.1f} s", flush=True)
    return rows


TRAINED_DONE = """() => Array.from(document.querySelectorAll('[data-testid="stAlert"]')).some(a => a.innerText.trim())
    || Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd => gd.layout && gd.layout.title && String(gd.layout.title.text).includes('Rollout'))"""


def trained_links(browser, server: Server, pid: int, words: list[str]) -> list[tuple]:
    """The Trained model page at its cap, 512 pieces: the first visit loads the model; later ones do not."""
    from attnviz import models

    model = models.load("minilm", device="cpu")

    def text(seed: int) -> str:  # common words, cut to 510 pieces + [CLS] and [SEP]
        ids = model.tokenizer.encode(" ".join(np.random.default_rng(seed).choice(words, 600))[:20_000].rsplit(" ", 300)[0]).ids
        return model.tokenizer.decode(ids[1:511])

    rows = []
    for label, seed, params in (("first visit (loads the model)", 1, {}), ("another text", 2, {}),
                                ("another text, read as words", 3, {"unit": "words"})):
        before = status(pid, "VmRSS")
        reset_peak(pid)
        started = time.perf_counter()
        context, page = open_and_wait(browser, f"{server.url}/trained?{urlencode({'text': text(seed), **params})}", done=TRAINED_DONE)
        seconds = time.perf_counter() - started
        message = page.locator('[data-testid="stAlert"]').all_inner_texts()
        peak = status(pid, "VmHWM") - before
        context.close()
        rows.append((f"Trained model, 512 pieces, {label}", peak, seconds, status(pid, "VmRSS"),
                     "; ".join(m[:60] for m in message) or "drawn"))
        print(f"  {rows[-1][0]}: peak +{peak:.0f} MiB, {seconds:.1f} s", flush=True)
    return rows


FILES = {"CSV": "Numbers (CSV)", ".npy": "Numbers (.npy, float32)"}  # in the overview's Download menu
REFERENCE = """
import streamlit as st
for label, size in {sizes!r}:
    st.download_button(label, lambda size=size: bytes(size), label.replace(" ", "_"), on_click="ignore")
"""


def timed_download(page, button: str) -> tuple[float, float, int]:
    """(seconds until the browser asks for the built file, seconds until it is saved, bytes) for one click."""
    asked = []

    def on_request(request):
        if "/media/" in request.url and "/static/" not in request.url:
            asked.append(time.perf_counter())

    target = page.get_by_role("button", name=button)
    if not target.count():  # attnviz's downloads sit in the chart's Download menu
        page.locator(".st-key-downloads_overview button").first.click()
    page.on("request", on_request)
    started = time.perf_counter()
    with page.expect_download(timeout=300_000) as download:
        target.click()
    size = Path(download.value.path()).stat().st_size
    saved = time.perf_counter() - started
    page.remove_listener("request", on_request)
    return (asked[0] - started if asked else float("nan")), saved, size


def downloads(browser, server: Server, pid: int, text: str) -> list[tuple]:
    """attnviz's downloads at 4,096 tokens, then a bare one-button app delivering the same numbers of bytes."""
    context, page = open_and_wait(browser, f"{server.url}/?{urlencode({'text': text})}")
    rows = []
    for label in FILES.values():
        before = status(pid, "VmRSS")
        reset_peak(pid)
        ready, saved, size = timed_download(page, label)
        rows.append((label, ready, saved, size / 1e6, status(pid, "VmHWM") - before))
        print(f"  {label}: ready {ready:.2f} s, saved {saved:.2f} s, {size / 1e6:.0f} MB, peak +{rows[-1][4]:.0f} MiB", flush=True)
    context.close()
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "reference.py"
        names = [f"as many bytes as the {kind}" for kind in FILES]
        script.write_text(REFERENCE.format(sizes=[(name, int(row[3] * 1e6)) for name, row in zip(names, rows)]))
        reference = Server(script)
        try:
            page = browser.new_page()
            page.goto(reference.url)
            for name, (_, _, _, mb, _) in zip(names, list(rows)):
                page.get_by_role("button", name=name).wait_for()
                ready, saved, _ = timed_download(page, name)
                rows.append((f"bare one-button app, {mb:.0f} MB of bytes", ready, saved, mb, float("nan")))
            page.close()
        finally:
            reference.stop()
    return rows


def session_round(browser, server: Server, pid: int, pastes: list[str], ttl: int) -> tuple[float, float, float]:
    """(resident with all sessions open, resident after the TTL, resident after one more session) in MiB."""
    contexts = [open_and_wait(browser, server.url, paste)[0] for paste in pastes]
    open_rss = status(pid, "VmRSS")
    for context in contexts:
        context.close()
    time.sleep(ttl + 5)
    after_ttl = status(pid, "VmRSS")
    context, _ = open_and_wait(browser, server.url + "/?text=the+dog+ran", done=ANY_CHART)  # the session store is used again
    context.close()
    time.sleep(5)
    return open_rss, after_ttl, status(pid, "VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttl", type=int, default=120, help="server.disconnectedSessionTTL in seconds")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--only-trained", action="store_true", help="measure only the Trained model page's links")
    args = parser.parse_args()
    words = common_words()
    server = Server(ROOT / "app.py", "--server.disconnectedSessionTTL", str(args.ttl))
    pid = server.process.pid
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            context, _ = open_and_wait(browser, server.url, texts(words, 1, 999)[0][:3000], done=WARM_DONE)  # warm: imports, GloVe, ~500 tokens
            context.close()
            time.sleep(3)
            warm = status(pid, "VmRSS")
            print(f"warm server: {warm:.0f} MiB", flush=True)
            if args.only_trained:
                for row in trained_links(browser, server, pid, words):
                    print(f"| {row[0]} | {row[1]:.0f} MiB | {row[2]:.1f} s | {row[3]:.0f} MiB | {row[4]} |")
                return
            heavy = heavy_links(browser, server, pid, texts(words, 1, 500)[0]) + trained_links(browser, server, pid, words)
            files = downloads(browser, server, pid, texts(words, 1, 600)[0])
            start = status(pid, "VmRSS")
            first = session_round(browser, server, pid, texts(words, args.sessions, 0), args.ttl)
            print(f"  round 1: {first}", flush=True)
            second = session_round(browser, server, pid, texts(words, args.sessions, 100), args.ttl)
            print(f"  round 2: {second}", flush=True)
            browser.close()
    finally:
        server.stop()

    print(f"\nbench_memory: {datetime.date.today()}, {platform.machine()}, {platform.python_version()}, "
          f"session TTL {args.ttl} s, warm server {warm:.0f} MiB\n")
    print("| heavy link (4,096 tokens) | peak growth | seconds to drawn | resident after | outcome |\n|---|---|---|---|---|")
    for label, peak, seconds, after, outcome in heavy:
        print(f"| {label} | {peak:.0f} MiB | {seconds:.1f} s | {after:.0f} MiB | {outcome} |")
    print("\n| download at 4,096 tokens | click → file built, browser asks for it | click → file saved | size | peak growth |"
          "\n|---|---|---|---|---|")
    for label, ready, saved, mb, peak in files:
        print(f"| {label} | {ready:.2f} s | {saved:.2f} s | {mb:.0f} MB | {'' if peak != peak else f'{peak:.0f} MiB'} |")
    print(f"\n| {args.sessions} sessions of 4,096 tokens | all open | after the TTL | after one more session | growth over the round |"
          "\n|---|---|---|---|---|")
    for name, (opened, ttl_rss, final), base in (("round 1", first, start), ("round 2", second, first[2])):
        print(f"| {name} | {opened:.0f} MiB | {ttl_rss:.0f} MiB | {final:.0f} MiB | {final - base:+.0f} MiB |")


if __name__ == "__main__":
    main()
