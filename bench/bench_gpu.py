"""Benchmark on a GPU: attnviz's engine on CUDA beside transformers' eager forward with output_attentions=True, on the
same weights, alternated in one process, for two Llama models built from their configs with random weights:
SmolLM2-135M's shapes and a ~1B one (2048 wide, 16 layers, 32 heads sharing 8 K/V heads).

Run: python bench/bench_gpu.py [--tokenizer tokenizer.json] [--runs N] [--device cuda] [--small] [--keep DIR]
Printed for each model: that the engine computes it on the GPU, and how far its weights and next-piece logits are from
transformers' there; the forward over 512 pieces with every layer's weights brought to the CPU (what a page draws),
beside transformers' with its weights left on the GPU and with them brought to the CPU; the corpus pass of the head
scores (240 sentences: ours sorted, heads.BATCH a time; theirs 16 a time); a sentence's text → the atlas's data
(tokenize, forward, every head's thumbnail, the JSON the browser gets). Random weights: no timing here depends on the
values, and both engines get the same ones. The tokenizer is SmolLM2's (written from the built-in GGUF file where
none is given). --small: a 2-layer model and 2 runs, to try the script on the CPU. Not a test; docs/benchmarks.md
records its output with the date and machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, rope_theta=100000.0, tie_word_embeddings=True)
ONE_B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
             num_key_value_heads=8, rope_theta=500000.0, tie_word_embeddings=True)
EIGHT_B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, rope_theta=500000.0, tie_word_embeddings=False)  # Llama-3.1-8B's shapes
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             tie_word_embeddings=True)
TEXT = ("The cat sat on the mat because the mat was warm, and the dog that had been sleeping by the door watched it "
        "for a long time before it finally walked over and lay down beside the cat.")


def tokenizer_file(given: str | None, folder: Path) -> Path:
    if given:
        return Path(given)
    from attnviz import models

    path = folder / "tokenizer.json"
    models.load("smollm2", device="cpu").tokenizer.save(str(path))
    return path


def build(shape: dict, tokenizer: Path, folder: Path, context: int = 8192, device: str = "cpu", dtype=None):
    """A Llama of `shape` with seeded random weights, saved as a safetensors folder with the tokenizer, in float32
    (or `dtype`: bf16 for an 8B model's weights as shipped)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, max_position_embeddings=context, rms_norm_eps=1e-5, bos_token_id=0,
                         eos_token_id=0, **shape)
    with torch.device(device):
        LlamaForCausalLM(config).to(dtype or torch.float32).save_pretrained(folder)
    shutil.copy(tokenizer, folder / "tokenizer.json")


def timed(call, sync) -> float:
    sync()
    started = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - started


def alternated(calls: dict, runs: int, sync) -> dict[str, float]:
    """Median seconds of each call, the calls taken in turn `runs` times after one warm-up round."""
    for call in calls.values():
        call()
    times = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            times[name].append(timed(call, sync))
    return {name: statistics.median(t) for name, t in times.items()}


def compare(name: str, shape: dict, tokenizer: Path, device, runs: int, scratch: Path) -> None:
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM

    from attnviz import figures, heads, models
    from attnviz.models import engine
    from bench import bench_corpus as corpus

    folder = scratch / "".join(c for c in name if c.isalnum() or c == "-")
    build(shape, tokenizer, folder)
    ours = models.load(folder, device=device)
    theirs = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).to(device).eval()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    params = sum(p.numel() for p in theirs.parameters())
    print(f"\n## {name}: {ours.layers} layers × {ours.heads} heads ({ours.kv_heads} K/V), d={ours.d_model}, "
          f"{params / 1e6:.0f}M parameters, computed by {ours.computed_by} in {ours.dtype} on {ours.device}")

    ids = torch.randint(100, 40_000, (512,), generator=torch.Generator().manual_seed(0)).tolist()
    batch = torch.tensor([ids], device=device)  # (1, 512)

    def attnviz_forward():
        return engine.forward(ours.arch, ours.weights, ids)

    def transformers_forward():
        with torch.inference_mode():
            return theirs(batch, output_attentions=True)

    def transformers_to_cpu():
        out = transformers_forward()
        return [a.float().cpu() for a in out.attentions], out.logits[0, -1].cpu()

    mine = attnviz_forward()
    out = transformers_forward()
    theirs_weights = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()  # (L, H, n, n)
    weight_error = float(np.abs(mine.weights - theirs_weights).max())
    logit_error = float(np.abs(mine.next_logits - out.logits[0, -1].float().cpu().numpy()).max())
    print(f"parity on {device}: weights max |Δ| {weight_error:.2e}, next-piece logits max |Δ| {logit_error:.2e}")
    del out

    t = alternated({"attnviz": attnviz_forward, "transformers": transformers_forward,
                    "transformers+cpu": transformers_to_cpu}, runs, sync)
    print(f"forward, 512 pieces: attnviz {t['attnviz'] * 1e3:.1f} ms (every layer's weights on the CPU) · "
          f"transformers {t['transformers'] * 1e3:.1f} ms (weights left on the GPU), "
          f"{t['transformers+cpu'] * 1e3:.1f} ms (brought to the CPU) · ratio to the latter "
          f"{t['attnviz'] / t['transformers+cpu']:.2f}")

    pieces = [ours.tokenize(sentence) for sentence in heads.corpus()]
    ordered = sorted(pieces, key=len)
    t = alternated({"attnviz": lambda: corpus.attnviz_pass(ours, ordered),
                    "transformers": lambda: corpus.transformers_pass(theirs.model, pieces, device)}, runs, sync)
    print(f"corpus pass, {len(pieces)} sentences ({sum(map(len, pieces))} pieces): attnviz {t['attnviz'] * 1e3:.0f} ms · "
          f"transformers {t['transformers'] * 1e3:.0f} ms · ratio {t['attnviz'] / t['transformers']:.2f}")

    def text_to_atlas():
        run = ours.run(TEXT)
        data = figures.atlas_data(run.weights, chosen=(0, 0), group=ours.group)
        return json.dumps(data)

    first = timed(text_to_atlas, sync)
    t = alternated({"atlas": text_to_atlas}, runs, sync)
    n = len(ours.tokenize(TEXT))
    print(f"text → atlas data ({n} pieces, {ours.layers * ours.heads} thumbnails, "
          f"{len(text_to_atlas()) / 1e6:.1f} MB of JSON): {t['atlas'] * 1e3:.0f} ms (first call {first * 1e3:.0f} ms)")
    del ours, theirs
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", help="a tokenizer.json (default: SmolLM2's, from the built-in GGUF file)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a 2-layer model, 2 runs: to try the script on the CPU")
    parser.add_argument("--keep", metavar="DIR", help="keep the models' folders here (bench_effects.py --model reads one)")
    args = parser.parse_args()
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "CPU"
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {where}, Python "
          f"{platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = args.keep or scratch
        Path(scratch).mkdir(parents=True, exist_ok=True)
        tokenizer = tokenizer_file(args.tokenizer, Path(scratch))
        shapes = {"small": SMALL} if args.small else {"SmolLM2-135M's shapes": SMOLLM2, "~1B Llama": ONE_B}
        for name, shape in shapes.items():
            compare(name, shape, tokenizer, device, 2 if args.small else args.runs, Path(scratch))


if __name__ == "__main__":
    main()
