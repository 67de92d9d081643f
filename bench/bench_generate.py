"""Benchmark: SmolLM2-135M writing (attnviz.models.generate) and the timeline that shows it.

Run: python bench/bench_generate.py [--runs N]
Printed: 32 new pieces after a 10-piece prompt, greedy, from the K/V cache (one query row per head a step), beside 32
full forwards over the growing text (what a tool without a cache does), alternated in one process; the bytes of the
timeline's data for 64 steps; a scrub step redrawn in Chromium (the timeline's own timing of its draw, median over
every step, in a saved notebook page). Not a test; docs/benchmarks.md records its output.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
PROMPT = "When he saw his owner, the dog was so"  # 10 pieces for SmolLM2


def scrub_ms(path: Path) -> list[float]:
    from driver import FLAGS, find_chromium
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(path.as_uri())
        page.wait_for_function("document.querySelector('.av-timeline') && document.querySelector('.av-timeline').attnvizTimeline")
        times = page.evaluate("""() => { const r = document.querySelector('.av-timeline input[type=range]'); const out = [];
            for (let s = 0; s <= Number(r.max); s++) { r.value = String(s); r.dispatchEvent(new Event('input'));
              out.push(document.querySelector('.av-timeline').attnvizTimeline.drawn_ms); } return out; }""")
        browser.close()
    return times


def main() -> None:
    import torch

    from attnviz import figures, models
    from attnviz.models import engine
    from attnviz.notebook import generation

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    model = models.load("smollm2", device="cpu")
    prompt = len(model.tokenize(PROMPT))
    written = model.generate(PROMPT, 32)  # warm up
    ids = written.run.pieces.ids

    def full_forwards():
        for k in range(32):
            engine.forward(model.arch, model.weights, ids[: prompt + k])

    cached, whole = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        model.generate(PROMPT, 32)
        cached.append(time.perf_counter() - started)
        started = time.perf_counter()
        full_forwards()
        whole.append(time.perf_counter() - started)
    print(f"prompt {prompt} pieces, 32 written greedily")
    print(f"  generate, from the K/V cache: {statistics.median(cached):.2f} s median of {args.runs} "
          f"({', '.join(f'{t:.2f}' for t in cached)})")
    print(f"  32 full forwards, the growing text: {statistics.median(whole):.2f} s ({', '.join(f'{t:.2f}' for t in whole)})")
    view = generation(model, PROMPT, steps=64, temperature=0.7, top_k=50, top_p=0.95, layer=4, head=2)
    print(f"  timeline data for 64 steps ({len(view.generation.run.pieces)} pieces, {model.heads} heads of one layer): "
          f"{figures.payload_bytes(view.timeline):,} bytes")
    with tempfile.TemporaryDirectory() as folder:
        times = scrub_ms(view.save_html(Path(folder) / "writing.html"))
    ordered = sorted(times)
    print(f"  a scrub step redrawn in Chromium: median {statistics.median(times):.1f} ms, 90th percentile "
          f"{ordered[int(0.9 * len(ordered))]:.1f} ms, largest {ordered[-1]:.1f} ms (step {times.index(ordered[-1]) + 1}) "
          f"over {len(times)} steps")


if __name__ == "__main__":
    main()
