"""Benchmark: what a head does, measured (attnviz.heads) on the built-in models.

Run: python bench/bench_heads.py [--runs N]
For SmolLM2-135M and all-MiniLM-L6-v2, each in a fresh process with the model already loaded: the corpus pass
(heads.measure: 240 generated sentences and 8 probes of 24 random pieces repeated twice), its seconds (median of
--runs), the process's resident memory before and after, and the top heads of every score with the shuffled control of
the strongest induction head. Not a test; docs/benchmarks.md and docs/models.md record its output with the date and
machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEASURE_ONE = """
import json, resource, sys, time
import numpy as np
from attnviz import heads, models
model = models.load(sys.argv[1], device="cpu")
model.run("warm up")
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
before = rss()
found = heads.measure(model)
l, h, _ = found.top("induction", 1)[0]
print(json.dumps({
    "seconds": found.seconds, "rss_before": before, "rss_after": rss(),
    "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "top": {name: found.top(name, 3) for name in found.scores},
    "control": {"repeat": float(found.control["repeat"][l, h]), "shuffled": float(found.control["shuffled"][l, h]),
                "shuffled_max": float(found.control["shuffled"].max())},
}))
"""


def measure(name: str) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE_ONE, name], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}")
    for name in ("smollm2", "minilm"):
        results = [measure(name) for _ in range(runs)]
        seconds = [r["seconds"] for r in results]
        last = results[-1]
        print(f"\n{name}: corpus pass {statistics.median(seconds):.1f} s median of {runs} "
              f"({', '.join(f'{s:.1f}' for s in seconds)}); resident memory {last['rss_before'] / 2**20:.0f} → "
              f"{last['rss_after'] / 2**20:.0f} MiB, peak {last['peak'] / 2**20:.0f} MiB")
        for score, top in last["top"].items():
            print(f"  {score:<11}" + "  ".join(f"L{l + 1} H{h + 1} {v:.2f}" for l, h, v in top))
        c = last["control"]
        print(f"  strongest induction head on the repeat's offsets: {c['repeat']:.2f}; on the shuffled control "
              f"{c['shuffled']:.2f} (largest of any head {c['shuffled_max']:.2f})")


if __name__ == "__main__":
    main()
