"""Benchmark on a GPU: a whole document's scan (attnviz's model.scan) on a ~1B Llama-shaped model at 32,768 pieces,
beside transformers' SDPA forward over the same pieces (no attentions, no cache, the last position's logits only),
alternated in one process. First the scan's parity with transformers' eager attentions on that GPU at 1,024 pieces
(every summary and a tile), then the times, the GPU memory each takes over the loaded model, and a 256 × 256 tile.

The model is bench_gpu.py's ~1B Llama (16 layers × 32 heads sharing 8 K/V heads, d = 2,048) with a context of
32,768 and seeded random weights, in float32: no time here depends on the weights' values, and both engines get the
same ones. The pieces are random ids.

Run: python bench/bench_scan_gpu.py --tokenizer tokenizer.json [--pieces 32768] [--runs 3] [--small]
--small: a 2-layer model at 1,024 pieces, to try the script on the CPU. Not a test; docs/benchmarks.md records its
output with the date and machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_gpu import EIGHT_B, ONE_B, SMALL, build, tokenizer_file  # noqa: E402
from bench.bench_scan import pieces_of, random_ids  # noqa: E402


def parity(ours, theirs_eager, n: int, block: int, device) -> None:
    """The scan's summaries and a tile beside eager attentions over n pieces, on `device`."""
    import numpy as np
    import torch

    from attnviz.models import scan as scanning

    ids = random_ids(n)
    found = scanning.scan(ours.arch, ours.weights, pieces_of(ids), "bench", block=block)
    with torch.inference_mode():
        out = theirs_eager(torch.tensor([ids], device=device), output_attentions=True, use_cache=False)
    gaps = dict(overview=0.0, sink=0.0, entropy=0.0, strongest_weights=0.0, tile=0.0)
    b = n // block
    for layer, attention in enumerate(out.attentions):
        weights = attention[0].double()  # (H, n, n)
        overview = weights.view(-1, b, block, b, block).sum(-1).mean(2)  # (H, B, B)
        entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)  # (H, n)
        sink = weights[:, 1:, 0].mean(-1)  # (H,)
        strongest = weights.topk(found.strongest_weights.shape[-1], -1).values  # (H, n, top)
        for name, reference in (("overview", overview), ("entropy", entropy), ("sink", sink),
                                ("strongest_weights", strongest)):
            mine = torch.from_numpy(np.asarray(getattr(found, name)[layer], np.float64))
            gaps[name] = max(gaps[name], float((mine - reference.cpu()).abs().max()))
        for head in (0, ours.heads - 1):
            tile = torch.from_numpy(found.tile(layer, head, slice(n - 256, n), slice(0, 256))).double()  # (256, 256)
            gaps["tile"] = max(gaps["tile"], float((tile - weights[head, -256:, :256].cpu()).abs().max()))
    logits = float(np.abs(found.next_logits - out.logits[0, -1].float().cpu().numpy()).max())
    print(f"parity with transformers' eager attentions on {device}, {n:,} pieces, every layer and head: max |Δ| "
          + ", ".join(f"{name} {gap:.1e}" for name, gap in gaps.items()) + f"; next-piece logits {logits:.1e}",
          flush=True)


def profile(ours, ids: list[int], block: int, device) -> None:
    """One layer's scan over `ids` under torch's profiler: the kernels that take the most device time."""
    import torch

    from attnviz.models import engine
    from attnviz.models import scan as scanning

    n = len(ids)
    with torch.inference_mode():
        positions = torch.arange(n, device=device)  # (n,)
        x = engine.embed(ours.arch, ours.weights, torch.tensor(ids, device=device), positions)  # (n, d)
        for _ in range(2):  # the second under the profiler
            summaries = scanning.Summaries(ours.arch.heads, n, block, scanning.STRONGEST, device)
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities) as profiler:
                began = time.perf_counter()
                next(engine.run_layers(ours.arch, ours.weights, x, positions, trace=False,
                                       attention=lambda i: scanning.Blocked(block, summaries)))
                if device.type == "cuda":
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - began
    print(f"one layer's scan at {n:,} pieces: {seconds:.2f} s", flush=True)
    print(profiler.key_averages().table(sort_by=f"self_{'device' if device.type == 'cuda' else 'cpu'}_time_total", row_limit=25, max_name_column_width=60), flush=True)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import LlamaForCausalLM

    from attnviz import models
    from attnviz.models import scan as scanning

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", help="a tokenizer.json (default: SmolLM2's, from the built-in GGUF file)")
    parser.add_argument("--pieces", type=int, default=32768)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--block", type=int, default=scanning.BLOCK)
    parser.add_argument("--no-parity", action="store_true", help="skip the parity check at 1,024 pieces")
    parser.add_argument("--profile", action="store_true", help="only profile one layer's scan: its kernels' times")
    parser.add_argument("--small", action="store_true", help="a 2-layer model at 1,024 pieces: to try it on the CPU")
    parser.add_argument("--eight", action="store_true",
                        help="Llama-3.1-8B's shapes (32 layers × 32 heads over 8 K/V heads, d = 4,096), bf16 weights")
    parser.add_argument("--parity-pieces", type=int, default=1024, help="the parity check's length (the 8B: 4096)")
    parser.add_argument("--passes", action="store_true",
                        help="torch's passes instead of the fused Triton kernel (ATTNVIZ_FLASH=0): the figures before it")
    args = parser.parse_args()
    if args.passes:
        os.environ["ATTNVIZ_FLASH"] = "0"
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.type == "cuda"
    where = torch.cuda.get_device_name(device) if cuda else platform.processor() or "CPU"
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {where}, {os.cpu_count()} CPU cores, "
          f"Python {platform.python_version()}, torch {torch.__version__}", flush=True)
    shape, n = (SMALL, 1024) if args.small else (EIGHT_B if args.eight else ONE_B, args.pieces)
    weights_dtype = torch.bfloat16 if args.eight else torch.float32  # an 8B model's weights as shipped
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        began = time.perf_counter()
        build(shape, tokenizer_file(args.tokenizer, Path(scratch)), folder, context=max(n, args.parity_pieces),
              device=device.type, dtype=weights_dtype)
        ours = models.load(folder, device=device)
        print(f"{'Llama-3.1-8B-shaped' if args.eight else '~1B'} Llama: {ours.layers} layers × {ours.heads} heads ({ours.kv_heads} K/V), d = {ours.d_model}, "
              f"context {ours.arch.context:,}, computed by {ours.computed_by} in {ours.dtype} on {ours.device} "
              f"(built and loaded in {time.perf_counter() - began:.0f} s)", flush=True)
        from attnviz.models import flash

        why = flash.declined(ours.arch, torch.zeros(1, device=device), args.block)
        print(f"the scan's layers: {'the fused Triton kernel (flash.py)' if why is None else 'torch passes: ' + why}",
              flush=True)

        if args.profile:
            profile(ours, random_ids(n), args.block, device)
            return
        if not args.no_parity:
            eager = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=weights_dtype)
            parity(ours, eager.to(device).eval(), args.parity_pieces, args.block, device)
            del eager
        theirs = LlamaForCausalLM.from_pretrained(folder, attn_implementation="sdpa", dtype=weights_dtype)
        theirs = theirs.to(device).eval()

    ids = random_ids(n)
    pieces = pieces_of(ids)
    batch = torch.tensor([ids], device=device)  # (1, n)
    loaded = torch.cuda.memory_allocated(device) if cuda else 0

    def peer():
        with torch.inference_mode():
            return theirs(batch, use_cache=False, logits_to_keep=1).logits[0, -1].float().cpu()  # (vocab,)

    def ours_scan(block=args.block):
        return scanning.scan(ours.arch, ours.weights, pieces, "bench", block=block)

    scanning.scan(ours.arch, ours.weights, pieces_of(ids[:256]), "bench")  # warm up
    try:
        peer_logits = peer()
    except torch.OutOfMemoryError as error:  # float32 with grouped K/V heads: SDPA's math kernel, the full matrix
        print(f"transformers' SDPA forward in float32 at {n:,} pieces: {str(error).splitlines()[0]}", flush=True)
        theirs = theirs.to(torch.bfloat16)
        torch.cuda.empty_cache()
        peer_logits = peer()
        print("so the peer below runs in bfloat16 (its flash kernel), attnviz in float32", flush=True)
    times = {"scan": [], "peer": []}
    peaks = {"scan": 0, "peer": 0}
    found = None
    for run in range(args.runs):
        for name, call in (("scan", ours_scan), ("peer", peer)):
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            sync()
            started = time.perf_counter()
            result = call()
            sync()
            times[name].append(time.perf_counter() - started)
            if cuda:
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated(device) - loaded)
            if name == "scan":
                found = result
            print(f"  run {run + 1}: {name} {times[name][-1]:.2f} s", flush=True)
    scan_s, peer_s = statistics.median(times["scan"]), statistics.median(times["peer"])
    print(f"\n{n:,} random pieces, {args.runs} runs each, alternated in one process:")
    print(f"  attnviz model.scan (block {args.block}, top 8, {scanning.GPU_QUERIES if cuda else args.block} queries a "
          f"step): {scan_s:.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times['scan'])}) (goal on an H100 ≤ 2 s)")
    print(f"  transformers SDPA forward, no attentions, no cache: {peer_s:.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times['peer'])}); ratio {scan_s / peer_s:.1f}")
    if cuda:
        print(f"  GPU memory over the loaded models: scan peak {peaks['scan'] / 2**30:.2f} GiB, "
              f"transformers' peak {peaks['peer'] / 2**30:.2f} GiB")
    gap = float((torch.from_numpy(found.next_logits) - peer_logits).abs().max())
    print(f"  the last position's logits differ from transformers' SDPA forward by at most {gap:.1e}")
    tiles = []
    for start in (0, n // 2, n - 256):
        began = time.perf_counter()
        found.tile(ours.layers // 2, min(4, ours.heads - 1), slice(start, start + 256), slice(max(0, start - 128), max(0, start - 128) + 256))
        tiles.append((time.perf_counter() - began) * 1000)
    print(f"  a 256 × 256 tile (start, middle, end): {', '.join(f'{t:.1f}' for t in tiles)} ms (goal ≤ 50)")
    eager = ours.layers * ours.heads * n ** 2 * 4
    print(f"  eager attention with output_attentions=True would hold {ours.layers} × {ours.heads} × {n:,}² float32 "
          f"weights: {eager / 2**30:,.0f} GiB")
    if cuda:
        del found
        for step in (args.block, 2 * scanning.GPU_QUERIES):
            torch.cuda.empty_cache()
            sync()
            started = time.perf_counter()
            scanning.scan(ours.arch, ours.weights, pieces, "bench", block=args.block, step=step)
            sync()
            print(f"  the scan {step} queries a step (the same summaries): {time.perf_counter() - started:.2f} s",
                  flush=True)

if __name__ == "__main__":
    main()
