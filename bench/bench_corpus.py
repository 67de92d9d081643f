"""Benchmark: the head scores' corpus pass (240 sentences) for SmolLM2-135M, attnviz's padded batches beside
transformers' eager forward with output_attentions=True over the same sentences batched 16 at a time (with its
attention mask), on the same weights and threads, alternated in one process.

Run: python bench/bench_corpus.py [--runs N]
Printed per run: attnviz's batch_weights over the sentences sorted by length, heads.BATCH a time (what heads.measure
does);
transformers over them in the corpus's order, 16 a time (what a user's loop does), and over the same sorted batches
(so the gain from sorting and the gain from the engine are told apart); the whole heads.measure (probes and scoring
included); the arithmetic: FLOPs of the projections and MLPs over the real pieces ÷ the measured peak of a large
matmul. Not a test; docs/benchmarks.md records its output.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BATCH = 16  # the peer's batch, as the issue sets it


def peak_gflops(torch) -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)  # (2048, 2048) each
    a @ b
    started = time.perf_counter()
    for _ in range(10):
        a @ b
    return 2 * 2048**3 * 10 / (time.perf_counter() - started) / 1e9


def attnviz_pass(model, ordered: list) -> list:
    """attnviz's corpus pass, as heads.measure makes it: every layer's weights (L, H, n, n) of each of the pieces
    `ordered` (sorted by length), heads.BATCH sequences a forward."""
    from attnviz import heads

    return [w for k in range(0, len(ordered), heads.BATCH) for w in model.batch_weights(ordered[k:k + heads.BATCH])]


def transformers_pass(peer, sequences: list, device: str = "cpu") -> list:
    """The peer's: transformers' eager forward with output_attentions=True (`peer` a LlamaModel on `device`), BATCH
    sequences a forward with their attention mask, each sequence's weights (L, H, n, n) brought to the CPU as numpy."""
    import torch

    found = []
    with torch.inference_mode():
        for k in range(0, len(sequences), BATCH):
            batch = sequences[k:k + BATCH]
            n = max(len(p) for p in batch)
            ids = torch.zeros(len(batch), n, dtype=torch.long)  # (B, n)
            mask = torch.zeros(len(batch), n, dtype=torch.long)  # (B, n)
            for b, p in enumerate(batch):
                ids[b, : len(p)], mask[b, : len(p)] = torch.tensor(p.ids), 1
            out = peer(ids.to(device), attention_mask=mask.to(device), output_attentions=True)
            stacked = torch.stack(out.attentions, 1).float().cpu()  # (B, L, H, n, n)
            found += [stacked[b, :, :, : len(p), : len(p)].numpy() for b, p in enumerate(batch)]
    return found


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from transformers import LlamaModel

    from attnviz import heads, models

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    ours = models.load("smollm2", device="cpu")
    path = models.smollm2_path()
    theirs = LlamaModel.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                        dtype=torch.float32).eval()
    pieces = [ours.tokenize(sentence) for sentence in heads.corpus()]
    ordered = sorted(pieces, key=len)

    gap = max(float(np.abs(w - t).max()) for w, t in zip(attnviz_pass(ours, ordered[:32]), transformers_pass(theirs, ordered[:32])))
    times = {"attnviz, sorted batches": [], "transformers, corpus order": [], "transformers, sorted batches": []}
    for _ in range(args.runs):
        for name, call in (("attnviz, sorted batches", lambda: attnviz_pass(ours, ordered)),
                           ("transformers, corpus order", lambda: transformers_pass(theirs, pieces)),
                           ("transformers, sorted batches", lambda: transformers_pass(theirs, ordered))):
            started = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - started)
    measured = heads.measure(ours).seconds
    real = sum(len(p) for p in pieces)
    per_piece = sum(2 * t.numel() for b in ours.weights.layers
                    for t in (b.w_query, b.w_key, b.w_value, b.w_out, b.w_up, b.w_gate, b.w_down) if t is not None)
    flops = real * per_piece
    peak = peak_gflops(torch)
    print(f"{len(pieces)} sentences, {real} pieces; largest weight gap attnviz − transformers {gap:.1e}")
    peer = statistics.median(times["transformers, corpus order"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<30} {median:6.2f} s median of {args.runs} ({', '.join(f'{v:.2f}' for v in values)}); "
              f"{median / peer:.2f}× transformers in corpus order")
    print(f"  heads.measure, the whole pass (8 probes and the scoring too): {measured:.2f} s")
    print(f"  arithmetic: {flops / 1e9:.0f} GFLOP of projections and MLPs over the real pieces; a 2048² matmul runs at "
          f"{peak:.0f} GFLOP/s, so ≥ {flops / 1e9 / peak:.2f} s, {flops / 1e9 / peak / peer:.2f}× transformers")


if __name__ == "__main__":
    main()
