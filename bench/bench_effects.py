"""Benchmark: what a head changes (attnviz.effects), each figure beside the naive way measured in the same run.

Run: python bench/bench_effects.py [--runs N] [--device cpu|cuda]
SmolLM2-135M on a 15-piece sentence, the model loaded and warmed first, alternating the two ways each run:
- every head's effect (270 heads): effects.head_effects (each layer's copies from the clean run's input to it,
  batched) beside one whole forward per head with that head ablated (naive_head_effects, here);
- importance with occlusion (six measures and the baseline): effects.importance beside the same measures with occlusion
  computed the plain way, one knocked-out forward per piece;
- the arithmetic: the multiply–adds head_effects does, over the measured peak of a large float32 matmul on this
  machine: the time the arithmetic alone would take.
Not a test; docs/benchmarks.md records its output with the date and machine.
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

TEXT = "When he saw his owner, the dog was happy and he wagged his"  # 15 pieces for SmolLM2


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def naive_head_effects(model, text: str, how: str = "zero", *, piece: int | None = None):
    """effects.head_effects the plain way, one whole forward per head with that head ablated: this benchmark's
    comparison and tests/test_effects.py's reference. (L, H) float32."""
    import numpy as np
    import torch

    from attnviz import effects

    model = effects.engine_model(model, "a head's effect")
    pieces = effects.pieces_of(model, text)
    clean = model.run_pieces(pieces)
    n = len(pieces)
    read = effects.check_piece(piece, n, n - 1 if model.kind == "decoder" else 0)
    out = np.zeros((model.layers, model.heads))
    target = int(np.argmax(clean.next_logits)) if model.kind == "decoder" else None
    for layer in range(model.layers):
        for head in range(model.heads):
            run = model.run_pieces(pieces, intervention=effects.Ablation(((layer, head),), how))
            if target is not None:
                out[layer, head] = effects.log_prob(run.next_logits, target) - effects.log_prob(clean.next_logits, target)
            else:  # the encoder's output vectors (after a final norm where it has one)
                a, b = (effects.output_vector(model, torch.from_numpy(r.hidden[-1, read])).double().numpy()
                        for r in (run, clean))
                out[layer, head] = 1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    return out.astype(np.float32)


def naive_importance(model, text: str) -> None:
    """importance's work with occlusion done the plain way: one forward per piece, every edge into it knocked out."""
    from attnviz import effects

    n = len(model.tokenize(text))
    for j in range(n):
        effects.knock_out(model, text, [(i, j) for i in range(n) if i != j])
    run = model.run(text)
    effects.contributions_of(model, run)
    effects.gradient_times_input(model, model.tokenize(text), n - 1, int(run.next_logits.argmax()))


def peak_gflops(device) -> float:
    """The best of a few large float32 matmuls, in GFLOP/s."""
    import torch

    a = torch.randn(4096, 1024, device=device)
    b = torch.randn(1024, 4096, device=device)
    best = 0.0
    for _ in range(6):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, 2 * 4096 * 1024 * 4096 / (time.perf_counter() - started) / 1e9)
    return best


def head_effect_flops(model, n: int) -> float:
    """The multiply–adds of head_effects' matrix products, ×2: each copy runs from its layer to the end (the last layer
    on one query row), every layer's projections, attention and feed-forward, and the unembedding of each copy."""
    arch = model.arch
    d, dh, ff, heads, kv = arch.d_model, arch.head_dim, model.weights.layers[0].w_up.shape[1], arch.heads, arch.kv_heads
    per_row = d * heads * dh + 2 * d * kv * dh + heads * dh * d + (3 if arch.gated else 2) * d * ff
    attention = 2 * heads * n * dh  # QKᵀ and αV, per query row
    layers_run = sum(arch.layers - l for l in range(arch.layers))  # each layer's copies run to the end
    rows = heads * layers_run * n
    vocab = model.weights.unembed.shape[1]
    return 2 * (rows * (per_row + attention) + heads * arch.layers * d * vocab)


def main() -> None:
    import torch

    from attnviz import effects, models

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="smollm2", help="SmolLM2-135M's built-in file, or a folder of the same shapes "
                                                           "(bench_gpu.py --keep writes one where the file cannot go)")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads, {device}")
    model = models.load(args.model, device=device)
    n = len(model.tokenize(TEXT))
    effects.head_effects(model, TEXT)  # warm up both ways
    effects.importance(model, TEXT)
    batched, naive, imp, imp_naive = [], [], [], []
    for _ in range(args.runs):
        batched.append(timed(lambda: effects.head_effects(model, TEXT)))
        naive.append(timed(lambda: naive_head_effects(model, TEXT)))
        imp.append(timed(lambda: effects.importance(model, TEXT)))
        imp_naive.append(timed(lambda: naive_importance(model, TEXT)))
    same = abs(effects.head_effects(model, TEXT) - naive_head_effects(model, TEXT)).max()
    peak = peak_gflops(device)
    flops = head_effect_flops(model, n)

    def show(values):
        return f"{statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})"

    print(f"\n{model.name}, {n} pieces, {model.layers * model.heads} heads; median of {args.runs}, alternated:")
    print(f"  every head's effect, one call (head_effects):      {show(batched)}")
    print(f"  the naive way, one ablated forward per head:       {show(naive)}"
          f"  ({statistics.median(naive) / statistics.median(batched):.1f}× the batched time; largest difference {same:.1e})")
    print(f"  importance with occlusion (importance):            {show(imp)}")
    print(f"  the same with occlusion one forward per piece:     {show(imp_naive)}"
          f"  ({statistics.median(imp_naive) / statistics.median(imp):.1f}×)")
    print(f"  head_effects' arithmetic: {flops / 1e9:.0f} GFLOP; this machine's float32 matmul peak {peak:.0f} GFLOP/s; "
          f"the arithmetic alone takes {flops / 1e9 / peak:.2f} s, {flops / 1e9 / peak / statistics.median(batched):.0%} "
          "of the measured time")


if __name__ == "__main__":
    main()
