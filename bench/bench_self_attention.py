"""Benchmark: GloVe load time and memory, and the server-side time to build the self-attention page.

Run: python bench/bench_self_attention.py
Prints a table of medians. It is not a test; README records its output with the date and machine.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5

LOAD_ONE = """
import json, time
def rss():
    fields = dict(line.split(':', 1) for line in open('/proc/self/status'))
    return int(fields['VmRSS'].split()[0]) / 1024, int(fields['VmHWM'].split()[0]) / 1024
from attnviz.embeddings import load_glove
import numpy, pyarrow.parquet, gensim  # imports are not part of the load
before, _ = rss()
start = time.perf_counter()
kv = load_glove()
seconds = time.perf_counter() - start
after, peak = rss()
print(json.dumps({"seconds": seconds, "rss_mib": after - before, "peak_mib": peak - before, "words": len(kv)}))
"""


def glove_load() -> dict:
    """Each run in a fresh process, so nothing is cached in Python."""
    runs = [json.loads(subprocess.check_output([sys.executable, "-c", LOAD_ONE], cwd=ROOT)) for _ in range(RUNS)]
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def page_build(n_tokens: int) -> dict:
    """Server-side time of one full run of the page script (AppTest), cold (new input) and warm (cached)."""
    words = "when he saw his owner the dog was happy so he wagged his tail and ran".split()
    texts = [" ".join(words[(i + run) % len(words)] for i in range(n_tokens)) for run in range(RUNS)]
    return time_page("self_attention.py", texts)


def time_page(name: str, texts: list[str]) -> dict:
    """Median seconds of a full run of pages/`name` under AppTest for each new text (cold) and of a rerun with
    the same text (warm), after one run that fills the resource caches (vectors, models)."""
    from streamlit.testing.v1 import AppTest

    page = str(ROOT / "pages" / name)
    AppTest.from_file(page, default_timeout=120).run()
    cold, warm = [], []
    for text in texts:
        at = AppTest.from_file(page, default_timeout=120)
        at.query_params["text"] = text
        start = time.perf_counter()
        at.run()
        cold.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        start = time.perf_counter()
        at.run()  # the same input again: a rerun served from the cache
        warm.append(time.perf_counter() - start)
    return {"cold_s": statistics.median(cold), "warm_s": statistics.median(warm)}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    print(f"# {time.strftime('%Y-%m-%d')} · {platform.processor() or platform.machine()} · "
          f"{__import__('os').cpu_count()} cores · Python {platform.python_version()} · torch {torch.__version__}")
    load = glove_load()
    page = page_build(64)
    print(f"| figure | median of {RUNS} |")
    print("|---|---|")
    print(f"| GloVe 6B 50-d load into KeyedVectors ({load['words']:,} words) | {load['seconds']:.2f} s |")
    print(f"| memory added by the load: resident / peak | {load['rss_mib']:.0f} MiB / {load['peak_mib']:.0f} MiB |")
    print(f"| self-attention page, N = 64, server-side build, new input | {page['cold_s'] * 1000:.0f} ms |")
    print(f"| same, rerun with cached input | {page['warm_s'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
