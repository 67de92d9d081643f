"""Benchmark: how exact the scan is at length, on SmolLM2-135M (its GGUF file, as transformers reads it), held to two
float64 truths beside transformers' own float32 forward held to the same ones:

- "transformers float64": transformers' model in float64 as it is. Its RoPE angles are still float32: transformers
  computes the inverse frequencies and their product with the positions in float32 whatever the model's dtype, so at
  position p they are off by up to p·2⁻²⁴ radians.
- "exact": the same float64 model with the angles p·θ_i computed in float64 from θ_i = base^(−2i/d), the best truth
  there is.

Figures: the next logits' largest error; one layer's weights (LAYER, every head, the last 256 queries), their strongest
8 and entropy. Random pieces, each size in a fresh process.

Run: python bench/bench_scan_precision.py [--pieces 500,2000]
Not a test; docs/benchmarks.md records its output (tests/test_scan.py holds a tiny model to the same at 2,048 pieces).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_scan import pieces_of, random_ids  # noqa: E402

LAYER = 15  # of 30, from 0
QUERIES = 256  # the last ones: the farthest positions, where rounded angles are most off


def measure(n: int) -> dict:
    """In this process: the scan, transformers' float32 forward and both truths at `n` pieces; every error."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    from attnviz import models
    from attnviz.models import scan as scanning

    ours = models.load("smollm2", device="cpu")
    ids = random_ids(n)
    scan = scanning.scan(ours.arch, ours.weights, pieces_of(ids), "smollm2")
    base = float(getattr(ours.arch.rope_base, "base", ours.arch.rope_base))
    del ours
    path = models.smollm2_path()
    theirs = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                              dtype=torch.float32).eval()
    kept = {}
    plain = modeling_llama.eager_attention_forward

    def keeping(module, *args, **kwargs):  # one layer's weights (H, n, n) kept; the model keeps none
        output, weights = plain(module, *args, **kwargs)
        if module.layer_idx == LAYER:
            kept["weights"] = weights[0, :, -QUERIES:].double().clone()  # (H, QUERIES, n)
        return output, None

    def exact_rope(module, x, position_ids):
        d = 2 * module.inv_freq.shape[0]
        theta = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))  # (d / 2,)
        angles = position_ids[0].to(torch.float64)[:, None] * theta[None, :]  # (n, d / 2)
        turned = torch.cat((angles, angles), -1)[None]  # (1, n, d)
        return turned.cos().to(x.dtype), turned.sin().to(x.dtype)

    modeling_llama.eager_attention_forward = keeping
    x = torch.tensor([ids])  # (1, n)
    runs = {}
    with torch.inference_mode():
        runs["transformers float32"] = (theirs(x, use_cache=False).logits[0, -1].double().numpy(), kept.pop("weights"))
        theirs = theirs.double()
        runs["truth: transformers float64"] = (theirs(x, use_cache=False).logits[0, -1].numpy(), kept.pop("weights"))
        modeling_llama.LlamaRotaryEmbedding.forward = exact_rope
        runs["truth: exact"] = (theirs(x, use_cache=False).logits[0, -1].numpy(), kept.pop("weights"))
    heads = scan.heads
    tiles = torch.from_numpy(np.stack([scan.tile(LAYER, h, range(n - QUERIES, n), range(n)) for h in range(heads)])).double()
    runs["scan"] = (scan.next_logits.astype(np.float64), tiles)
    entropy_scan = scan.entropy[LAYER][:, -QUERIES:]  # (H, QUERIES)
    top_scan = scan.strongest_weights[LAYER][:, -QUERIES:]  # (H, QUERIES, top)

    def entropy(weights):
        return (-(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)).numpy()

    found = {}
    for truth in ("truth: transformers float64", "truth: exact"):
        logits, weights = runs[truth]
        for who in ("scan", "transformers float32"):
            their_logits, their_weights = runs[who]
            top = top_scan if who == "scan" else torch.topk(their_weights, top_scan.shape[-1], -1).values.numpy()
            ent = entropy_scan if who == "scan" else entropy(their_weights)
            found[f"{who} | {truth}"] = dict(
                logits=float(np.abs(their_logits - logits).max()),
                weights=float((their_weights - weights).abs().max()),
                top=float(np.abs(top - torch.topk(weights, top_scan.shape[-1], -1).values.numpy()).max()),
                entropy=float(np.abs(ent - entropy(weights)).max()))
    return dict(pieces=n, errors=found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", default="500,2000")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores")
    print("| pieces | who | held to | next logits | layer 16's weights (last 256 queries) | strongest 8 | entropy |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(p) for p in args.pieces.split(",")):
        line = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True)
        result = json.loads(line.stdout.strip().splitlines()[-1])
        for name, e in result["errors"].items():
            who, truth = name.split(" | ")
            print(f"| {n:,} | {who} | {truth.removeprefix('truth: ')} | {e['logits']:.2g} | {e['weights']:.2g} | "
                  f"{e['top']:.2g} | {e['entropy']:.2g} |", flush=True)


if __name__ == "__main__":
    main()
