"""Benchmark: a score taken apart (attnviz.effects.score_parts) and composition scores, beside transformers.

Run: python bench/bench_why.py [--runs N]
SmolLM2-135M from its GGUF file, on a text of 64 pieces, the model loaded and warmed first:
- one cell (layer 17, head 4, the last query against piece 8) taken apart into its 2 + 17·10 parts a side,
  forward included: effects.score_parts;
- beside it, transformers' eager forward with output_attentions on the same 64 pieces (LlamaForCausalLM read from the
  same file): what a user would run to see that score at all, which gives the weight and not its parts;
- every head pair's Q-, K- and V-composition scores from the weights (effects.composition).
Median of --runs, alternated. Not a test; docs/benchmarks.md records its output with the date and machine.
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

SENTENCE = "When he saw his owner, the dog was happy, so he wagged his tail. "


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    import torch
    from transformers import LlamaForCausalLM

    from attnviz import effects, models

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{platform.processor() or 'cpu'}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    model = models.load("smollm2", device="cpu")
    text = SENTENCE * 8
    ids = model.tokenize(text).ids[:64]
    text = model.tokenizer.decode(ids)
    ids = model.tokenize(text).ids
    n = len(ids)
    path = models.smollm2_path()
    module = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                              attn_implementation="eager").eval()

    def ours():
        effects.score_parts(model, text, 17, 4, n - 1, 8)

    def theirs():
        with torch.no_grad():
            module(torch.tensor([ids]), output_attentions=True)

    ours(), theirs()  # warm
    parts, forward = [], []
    for _ in range(args.runs):
        parts.append(timed(ours))
        forward.append(timed(theirs))
    composed = timed(lambda: effects.composition(model))
    found = effects.score_parts(model, text, 17, 4, n - 1, 8)
    print(f"\n{model.name}, {n} pieces, layer 17 head 4 (counted from 0), query {n - 1}, key 8; median of {args.runs}:")
    print(f"  one cell taken apart, {len(found.query_names)} parts a side (score_parts): "
          f"{statistics.median(parts):.3f} s (runs {', '.join(f'{t:.3f}' for t in parts)})")
    print(f"  transformers' eager forward with attentions, same pieces:  "
          f"{statistics.median(forward):.3f} s (runs {', '.join(f'{t:.3f}' for t in forward)})")
    print(f"  every head pair's Q-, K-, V-composition (composition):     {composed:.2f} s")
    print(f"  the cell: score {found.score:.4f}, the table's sum {found.table.sum():.4f}")


if __name__ == "__main__":
    main()
