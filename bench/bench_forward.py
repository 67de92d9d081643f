"""Benchmark: SmolLM2-135M's forward over 512 pieces, every layer's weights kept, beside transformers' eager forward with
output_attentions=True (what bertviz and most tools call) on the same weights and threads, alternated in one process.

Run: python bench/bench_forward.py [--runs N] [--pieces N] [--profile]
Both read the built-in GGUF file (transformers de-quantizes it as attnviz does; test_decoder checks they agree). Each
run times attnviz's engine.forward, then transformers' forward, on the same random pieces. --profile prints where
attnviz's time goes (torch.profiler, one forward). Not a test; docs/benchmarks.md records its output.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import LlamaForCausalLM

    from attnviz import models
    from attnviz.models import engine

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pieces", type=int, default=512)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    ours = models.load("smollm2", device="cpu")
    path = models.smollm2_path()
    theirs = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                              dtype=torch.float32).eval()
    ids = torch.randint(100, 40_000, (args.pieces,), generator=torch.Generator().manual_seed(0)).tolist()

    def attnviz_forward():
        return engine.forward(ours.arch, ours.weights, ids)

    def transformers_forward():
        with torch.inference_mode():
            return theirs(torch.tensor([ids]), output_attentions=True)

    mine, peer = attnviz_forward(), transformers_forward()  # warm up; and the same weights both ways
    gap = float((torch.from_numpy(mine.weights) - torch.stack(peer.attentions)[:, 0]).abs().max())
    del peer
    ours_s, theirs_s = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        attnviz_forward()
        ours_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        out = transformers_forward()
        theirs_s.append(time.perf_counter() - started)
        del out
    ratio = statistics.median(ours_s) / statistics.median(theirs_s)
    print(f"\nSmolLM2-135M, {args.pieces} pieces, every layer's weights kept; median of {args.runs}, alternated:")
    print(f"  attnviz engine.forward:                         {statistics.median(ours_s):.3f} s "
          f"({', '.join(f'{v:.3f}' for v in ours_s)})")
    print(f"  transformers eager, output_attentions=True:     {statistics.median(theirs_s):.3f} s "
          f"({', '.join(f'{v:.3f}' for v in theirs_s)})")
    print(f"  ratio {ratio:.2f} (goal ≤ 0.80); largest weight difference {gap:.1e}")
    arch = ours.arch
    n, d, ff = args.pieces, arch.d_model, ours.weights.layers[0].w_up.shape[1]
    per_row = d * arch.heads * arch.head_dim * 2 + 2 * d * arch.kv_heads * arch.head_dim + 3 * d * ff
    flops = 2 * arch.layers * (n * per_row + 2 * arch.heads * n * n * arch.head_dim) + 2 * d * ours.weights.unembed.shape[1]
    a, b = torch.randn(4096, 1024), torch.randn(1024, 4096)
    best = 0.0
    for _ in range(6):
        started = time.perf_counter()
        a @ b
        best = max(best, 2 * 4096 * 1024 * 4096 / (time.perf_counter() - started) / 1e9)
    print(f"  the forward's arithmetic: {flops / 1e9:.1f} GFLOP; float32 matmul peak {best:.0f} GFLOP/s: "
          f"{flops / 1e9 / best:.3f} s at the peak, {flops / 1e9 / best / statistics.median(ours_s):.0%} of attnviz's time")
    if args.profile:
        from torch.profiler import profile

        with profile() as p:
            attnviz_forward()
        print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
