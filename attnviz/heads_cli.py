"""`attnviz heads MODEL`: every head's scores measured from the command line, with a progress bar, into the file the
pages read (attnviz.heads.cache_path), so a teacher can measure them before class. Started under
`torchrun --nproc-per-node N` (or on several nodes), the processes split the corpus: gloo on CPUs, nccl on GPUs; their
sums are all-reduced and rank 0 writes the result."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnviz heads", description="Measure what every head of a model does over a "
                                "corpus (attnviz.heads) and keep the scores where the app reads them.")
    p.add_argument("model", help='a built-in name ("minilm", "smollm2"), a model folder or a .gguf file')
    p.add_argument("--corpus", metavar="FILE", help="sentences to measure on, one a line (default: the 240 generated "
                                                    "sentences the pages use)")
    p.add_argument("--out", metavar="FILE", help="also write the scores here (.npz; attnviz.heads.load reads it)")
    p.add_argument("--device", default=None, help="cpu, cuda, … (default: CUDA where there is one, else the CPU)")
    return p


def read_corpus(path: str) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise SystemExit(f"attnviz heads: --corpus {path}: {error}") from None
    sentences = [line.strip() for line in lines if line.strip()]
    if not sentences:
        raise SystemExit(f"attnviz heads: --corpus {path} holds no sentence (one a line).")
    return sentences


class Bar:
    """A progress bar on standard error: `done/total` and a bar of 30 marks, redrawn in place."""

    def __init__(self, label: str, stream=sys.stderr):
        self.label, self.stream, self.last = label, stream, -1

    def __call__(self, done: int, total: int) -> None:
        marks = 30 * done // max(total, 1)
        if marks == self.last and done != total:
            return
        self.last = marks
        self.stream.write(f"\r{self.label} [{'#' * marks}{' ' * (30 - marks)}] {done}/{total}")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def distributed():
    """(rank, world, reduce, finish) under torchrun (WORLD_SIZE set), else one process's."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, None, lambda: None
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if backend == "nccl" else torch.device("cpu")

    def reduce(array: np.ndarray) -> np.ndarray:
        tensor = torch.from_numpy(np.ascontiguousarray(array, np.float64)).to(device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.cpu().numpy()

    return dist.get_rank(), dist.get_world_size(), reduce, dist.destroy_process_group


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    from attnviz import heads, models

    sentences = read_corpus(args.corpus) if args.corpus else None
    rank, world, reduce, finish = distributed()
    device = args.device
    if device is None and world > 1 and os.environ.get("LOCAL_RANK") is not None:
        import torch

        device = f"cuda:{os.environ['LOCAL_RANK']}" if torch.cuda.is_available() else "cpu"
    try:
        model = models.load(args.model, device=device)
        bar = Bar(f"{model.name}: {world} process{'es' if world > 1 else ''}") if rank == 0 else None
        found = heads.measure(model, sentences, progress=bar, part=(rank, world), reduce=reduce)
    except (models.ModelError, models.TextError, heads.HeadsError) as error:
        raise SystemExit(f"attnviz heads: {error}") from None
    if rank == 0:
        kept = heads.save(found, heads.cache_path(model, sentences))
        print(f"{model.name}: {found.sentences} sentences and {found.probes} probes in {found.seconds:.1f} s; kept in "
              f"{kept}")
        if args.out:
            print(f"also written to {heads.save(found, Path(args.out))}")
        for name in found.scores:
            layer, head, value = found.top(name, 1)[0]
            print(f"  {heads.SCORES[name]}: layer {layer + 1}, head {head + 1} ({value:.2f}), counted from 1")
    finish()


if __name__ == "__main__":
    main()
