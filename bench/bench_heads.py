"""Benchmark: what a head does, measured (attnviz.heads) on the built-in models.

Run: python bench/bench_heads.py [--runs N] [--scan]
For SmolLM2-135M and all-MiniLM-L6-v2, each in a fresh process with the model already loaded: the corpus pass
(heads.measure: 240 generated sentences and 8 probes of 24 random pieces repeated twice), its seconds (median of
--runs), the process's resident memory before and after, and the top heads of every score with the shuffled control of
the strongest induction head. --scan: instead, `attnviz heads smollm2` as one process beside the same command under
`torchrun --nproc-per-node 2` (gloo; the processes split the corpus), alternated, each its whole wall-clock time and
the pass it prints, and how far the two files of scores are apart. Not a test; docs/benchmarks.md and docs/models.md record its output with the date and
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


def scan(world: int, out: Path, cache: Path) -> tuple[float, float]:
    """`attnviz heads smollm2 --out OUT` in `world` processes (torchrun where more than one), with no scores kept in
    `cache` (its de-quantized model kept): (the command's wall-clock seconds, the pass's seconds it prints)."""
    import os
    import re
    import shutil
    import time

    launch = [sys.executable, "-m", "attnviz.cli"] if world == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}", "-m", "attnviz.cli"]
    shutil.rmtree(cache / "heads", ignore_errors=True)
    env = {**os.environ, "ATTNVIZ_CACHE": str(cache), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([*launch, "heads", "smollm2", "--out", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    wall = time.perf_counter() - started
    return wall, float(re.search(r"probes in ([0-9.]+) s", done.stdout).group(1))


def scans(runs: int) -> None:
    import tempfile

    import numpy as np

    from attnviz import heads

    times = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as folder:
        files = {world: Path(folder) / f"{world}.npz" for world in times}
        scan(1, files[1], Path(folder))  # writes the de-quantized model into the cache
        for _ in range(runs):
            for world in times:
                times[world].append(scan(world, files[world], Path(folder)))
        one, two = (heads.load(files[world]).scores for world in times)
        gap = max(float(np.abs(one[name] - two[name]).max()) for name in one)
    for world, measured in times.items():
        walls, passes = zip(*measured)
        print(f"attnviz heads smollm2, {world} process{'es' if world > 1 else ''}: {statistics.median(walls):.1f} s "
              f"whole command ({', '.join(f'{w:.1f}' for w in walls)}), the pass {statistics.median(passes):.1f} s "
              f"({', '.join(f'{p:.1f}' for p in passes)})")
    print(f"the two files' scores differ by at most {gap:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scan", action="store_true", help="one process beside two under torchrun (gloo)")
    args = parser.parse_args()
    runs = args.runs
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}")
    if args.scan:
        sys.path.insert(0, str(ROOT))
        return scans(runs)
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
