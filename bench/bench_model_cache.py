"""The server's model cache (appkit/model.model) with three models in turn, under a budget that holds two of them: the
process's resident memory after each load, and after the least recently used is let go.

Run: python bench/bench_model_cache.py [--budget 1.1GB]
Each model runs one sentence after it loads, so that every weight has been read (SmolLM2's come from a memory-mapped
file, resident only once read). The three: SmolLM2-135M (538 MB of float32), all-MiniLM-L6-v2 (90 MB) and a GPT-2 of GPT-2 small's shape with random
weights (498 MB), made here with transformers' config class and saved to a temp folder. Not a test; docs/benchmarks.md
records the output with the date and machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def resident_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def gpt2_small(folder: Path) -> Path:
    import torch
    import transformers as T
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257))
    model.save_pretrained(str(folder))
    vocab = {chr(c): i for i, c in enumerate(range(33, 127))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", default="1.1GB")
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        return print(gpt2_small(args.make))
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "gpt2-small-random"
        # made in a process of its own, so that building it leaves nothing in this one's memory
        subprocess.run([sys.executable, __file__, "--make", str(folder)], check=True, capture_output=True)
        os.environ["ATTNVIZ_MODELS"] = str(folder)
        os.environ["ATTNVIZ_MODEL_BUDGET"] = args.budget
        from appkit import served as _model

        cache, _, _ = _model._models()
        print(f"bench_model_cache: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{platform.machine()}, {os.cpu_count()} cores, budget {args.budget}")
        print(f"| step | models held | their weights | resident memory |")
        print("|---|---|---|---|")
        print(f"| start | none | 0 MB | {resident_mib():,.0f} MiB |")
        for name in ("smollm2", "minilm", "gpt2-small-random", "minilm"):
            _model.model(name).run("When he saw his owner, the dog was happy")  # every weight read at least once
            held = [key for key in ("smollm2", "minilm", "gpt2-small-random") if key in cache]
            print(f"| {name} loaded | {', '.join(held)} | {cache.nbytes / 1e6:,.0f} MB | {resident_mib():,.0f} MiB |")


if __name__ == "__main__":
    main()
