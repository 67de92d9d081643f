"""What the benchmarks that drive the real app share: Chromium and its flags (as tests/e2e/driver.py finds it), the
app's server on a free port, the dog sentence's words, and how a page says its heatmap is drawn. bench_browser,
bench_pages, bench_interactive, bench_load, bench_memory and bench_models import it; it imports none of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# As tests/e2e/driver.py finds it: ATTNVIZ_CHROMIUM, else chromium on PATH.
CHROMIUM = os.environ.get("ATTNVIZ_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
WORDS = "when he saw his owner the dog was happy so he wagged his tail and ran to the door".split()
# The first real heatmap's signature (≥ 2 rows): its title, the first weights of row 0, its row count and the sum
# of all it shows; null until plotly has drawn one.
PLOTTED = ("() => { const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))"
         ".find(g => g._fullData && g._fullData.length && g._fullData[0].type === 'heatmap' && g._fullData[0].z.length >= 2);"
         " if (!gd) return null; const z = gd._fullData[0].z; let sum = 0;"
         " for (const row of z) for (const value of row) sum += Number(value);"
         " return JSON.stringify(gd.layout.title && gd.layout.title.text) + JSON.stringify(Array.from(z[0]).slice(0, 8))"
         " + z.length + ' ' + sum.toPrecision(12) }")
# The same for the interactive heatmap where there is one (the browser's), else the first plotly heatmap.
DRAWN = ("() => { const live = document.querySelector('.av-root');"
         " if (live && live.attnviz && live.attnviz.rows.length >= 2) return JSON.stringify(live.attnviz.view)"
         " + JSON.stringify(live.attnviz.shown()[0].slice(0, 8)) + live.attnviz.rows.length;"
         f" return ({PLOTTED})() }}")
# Times one interaction inside the page: from the DOM click event to the first animation frame in which
# the heatmap's data differ, so the driver's own waits (scrolling, actionability checks) are not counted.
WATCH = """(drawnSource) => {
  const drawn = eval(drawnSource);
  const before = drawn();
  window.__clickAt = null; window.__changedAt = null;
  for (const kind of ['click', 'keydown'])
    document.addEventListener(kind, () => { window.__clickAt = window.__clickAt ?? performance.now(); }, {capture: true, once: true});
  const poll = () => { const s = drawn(); if (s && s !== before) window.__changedAt = performance.now(); else requestAnimationFrame(poll); };
  requestAnimationFrame(poll);
}"""


def sentence(n: int, start: int = 0) -> str:
    """n tokens of the dog sentence, repeated; a different start gives a text the caches have not seen."""
    return " ".join(WORDS[(i + start) % len(WORDS)] for i in range(n))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, script: Path, *flags: str, root: Path = ROOT):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(self.port),
             "--server.headless", "true", "--server.address", "127.0.0.1", *flags],
            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"ATTNVIZ_WARM_MODELS": "0", **os.environ, "PYTHONPATH": str(root)})
        atexit.register(self.stop)  # also when a run fails: a server left behind holds about 1 GB and skews later runs
        while True:
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=1).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def drawn(page, previous=None, timeout=120_000):
    handle = page.wait_for_function(f"(prev) => {{ const s = ({DRAWN})(); return s && s !== prev ? s : null }}", arg=previous, timeout=timeout)
    return handle.json_value()
