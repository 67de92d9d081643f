"""Benchmark: a whole document's scan (model.scan) beside the peer a user would reach for, transformers' SDPA forward
over the same pieces (no attentions, no cache), on SmolLM2-135M at 8,192 pieces, its own context; alternated, each
run in a fresh process, so that its peak memory over the loaded model is its own. Also a 256 × 256 tile's time, and
what eager attention with output_attentions=True would need for the same pieces.

Run: python bench/bench_scan.py [--runs N] [--pieces N]
Not a test; docs/benchmarks.md records its output.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def resident_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def random_ids(n: int) -> list[int]:
    import torch

    return torch.randint(100, 40_000, (n,), generator=torch.Generator().manual_seed(0)).tolist()


def pieces_of(ids: list[int]):
    """Pieces by id alone, each named by its id: random pieces need no tokenizer."""
    from attnviz.models.pieces import Pieces

    k = len(ids)
    return Pieces([str(i) for i in ids], ids, [None] * k, [(0, 0)] * k, "", [False] * k, [False] * k,
                  [str(i) for i in ids])


def one(which: str, n: int) -> dict:
    """In this process: load the model, then time `which` once; the memory after the load and the peak after."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from attnviz import models
    from attnviz.models import scan as scanning
    ours = models.load("smollm2", device="cpu")
    ids = random_ids(n)
    if which == "transformers":
        from transformers import LlamaForCausalLM

        path = models.smollm2_path()
        theirs = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="sdpa",
                                                  dtype=torch.float32).eval()
        del ours
        loaded = resident_mib()
        with torch.inference_mode():
            theirs(torch.tensor([ids[:64]]), use_cache=False)  # warm up
            started, cpu = time.perf_counter(), time.process_time()
            out = theirs(torch.tensor([ids]), use_cache=False)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        return dict(which=which, seconds=seconds, cpu=cpu, loaded=loaded, peak=peak_mib(),
                    logits=out.logits[0, -1, :5].tolist())
    loaded = resident_mib()
    chosen = pieces_of(ids)
    scanning.scan(ours.arch, ours.weights, pieces_of(ids[:64]), "smollm2")  # warm up
    started, cpu = time.perf_counter(), time.process_time()
    found = scanning.scan(ours.arch, ours.weights, chosen, "smollm2")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = peak_mib()
    tiles = []
    for start in (0, n // 2, n - 256):
        began = time.perf_counter()
        found.tile(15, 4, slice(start, start + 256), slice(max(0, start - 128), max(0, start - 128) + 256))
        tiles.append(time.perf_counter() - began)
    from attnviz.models import fused

    return dict(which=which, seconds=seconds, cpu=cpu, loaded=loaded, peak=peak, tile_ms=[t * 1000 for t in tiles],
                logits=found.next_logits[:5].tolist(), kernel=fused.library() is not None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pieces", type=int, default=8192)
    parser.add_argument("--one", choices=["attnviz", "transformers"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.pieces)))
        return
    import torch

    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    results = {"attnviz": [], "transformers": []}
    for _ in range(args.runs):
        for which in ("attnviz", "transformers"):
            done = subprocess.run([sys.executable, __file__, "--one", which, "--pieces", str(args.pieces)],
                                  capture_output=True, text=True, check=True)
            results[which].append(json.loads(done.stdout.strip().splitlines()[-1]))
    ours, theirs = results["attnviz"], results["transformers"]
    t_ours, t_theirs = [r["seconds"] for r in ours], [r["seconds"] for r in theirs]
    print(f"\nSmolLM2-135M, {args.pieces:,} random pieces; {args.runs} runs each, alternated, each in a fresh process:")
    kernel = "its fused kernel" if all(r["kernel"] for r in ours) else "torch's passes alone (no kernel built)"
    print(f"  the scan's passes over each block: {kernel}")
    print(f"  attnviz model.scan (block 128, top 8):             {statistics.median(t_ours):.2f} s "
          f"({', '.join(f'{v:.2f}' for v in t_ours)})")
    print(f"  transformers SDPA forward, no attentions, no cache: {statistics.median(t_theirs):.2f} s "
          f"({', '.join(f'{v:.2f}' for v in t_theirs)})")
    print(f"  ratio {statistics.median(t_ours) / statistics.median(t_theirs):.2f} (goal ≤ 1.5)")
    c_ours, c_theirs = [r["cpu"] for r in ours], [r["cpu"] for r in theirs]
    print(f"  CPU seconds (both threads; steady where a shared host takes time away): attnviz "
          f"{statistics.median(c_ours):.1f} ({', '.join(f'{v:.1f}' for v in c_ours)}), transformers "
          f"{statistics.median(c_theirs):.1f} ({', '.join(f'{v:.1f}' for v in c_theirs)}); "
          f"ratio {statistics.median(c_ours) / statistics.median(c_theirs):.2f}")
    grown = [r["peak"] - r["loaded"] for r in ours]
    print(f"  scan's peak memory over the loaded model: {max(grown) / 1024:.2f} GiB (largest of the runs; goal ≤ 2)")
    print(f"  transformers' peak over its loaded model: {max(r['peak'] - r['loaded'] for r in theirs) / 1024:.2f} GiB")
    tiles = [t for r in ours for t in r["tile_ms"]]
    print(f"  a 256 × 256 tile (layer 15, head 4; start, middle, end): median {statistics.median(tiles):.1f} ms, "
          f"largest {max(tiles):.1f} ms (goal ≤ 50)")
    gap = max(abs(a - b) for a, b in zip(ours[0]["logits"], theirs[0]["logits"]))
    print(f"  the last position's first 5 logits differ by at most {gap:.1e}")
    from attnviz import models

    model = models.load("smollm2", device="cpu")
    need = model.layers * model.heads * args.pieces ** 2 * 4
    print(f"  eager attention with output_attentions=True would hold {model.layers} × {model.heads} × "
          f"{args.pieces:,}² float32 weights: {need / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
