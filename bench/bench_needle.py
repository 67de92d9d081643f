"""Experiment and benchmark: SmolLM2-135M on pass-key documents (attnviz.needle.needle) at several lengths and depths,
its retrieval heads (Wu et al. 2024), and the grid again without the k strongest of them, beside k random heads of the
same layers. Prints the grids, the strongest heads with their scores, and the time each document took.

Run: python bench/bench_needle.py [--lengths 1000 2000 4000] [--depths 0 0.25 0.5 0.75 1] [--k 8] [--json out.json]
     python bench/bench_needle.py --waits --lengths 500 1000 --depths 0 0.5 1: the Long text page's two
     waits (the grid, then "Turn off the k strongest" beside k random heads), each document read whole against the
     filler shared (needle's share_filler), alternated, each twice; and whether both give the same grids.
     python bench/bench_needle.py --sets --lengths 500 1000 --depths 0 0.5 1: "Turn off the k strongest" with both
     sets of heads removed in one reading of the documents (needle.grids, as the page does) against each set in a
     reading of its own (two needle calls), alternated, each --runs times; and whether both give the same grids.
     python bench/bench_needle.py --lookup --lengths 500 1000 --depths 0 0.5 1: the page's two waits with each step
     feeding the pieces that followed the same words earlier in the text (needle._guess, as the page does) against
     one greedy step a piece, alternated, each --runs times; the pieces fed a step, and whether both give the same
     grids.
     --root DIR: the attnviz of another checkout (`git worktree add DIR COMMIT`) instead of this one's, to time an
     earlier commit's two waits beside these (each mode's code must exist there; the default mode is the oldest).
Not a test; docs/benchmarks.md records its output.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grid_text(grid, title: str) -> str:
    lines = [f"{title}: {int(grid.found.sum())} of {grid.found.size} keys back"]
    lines.append("pieces \\ depth | " + " | ".join(f"{d:g}" for d in grid.depths))
    for a, length in enumerate(grid.lengths):
        lines.append(f"{length:>14} | " + " | ".join("found" if f else "missed" for f in grid.found[a]))
    return "\n".join(lines)


def waits(model, lengths, depths, k: int, seed: int) -> None:
    """The page's two waits, read whole and with the filler shared, alternated so that a busy machine weighs on both."""
    from attnviz import needle

    times = {False: [], True: []}
    grids = {}
    for _ in range(2):
        for share in (False, True):
            started = time.perf_counter()
            before = needle.needle(model, lengths, depths, seed, share_filler=share)
            middle = time.perf_counter()
            off = needle.without_retrieval_heads(model, k, seed=seed, before=before, share_filler=share)
            times[share].append((middle - started, time.perf_counter() - middle, before.read, off.strongest.read))
            grids[share] = (before, off)
            print(f"{'filler shared' if share else 'each read whole'}: the grid {middle - started:.1f} s, turning off "
                  f"{k} heads {time.perf_counter() - middle:.1f} s", flush=True)
    for share, runs in times.items():
        name = "filler shared" if share else "each read whole"
        print(f"{name}: the grid {', '.join(f'{g:.1f}' for g, _, _, _ in runs)} s; turning off {k} heads (two grids) "
              f"{', '.join(f'{o:.1f}' for _, o, _, _ in runs)} s; pieces read: grid {runs[0][2]:,}, each ablated grid "
              f"{runs[0][3]:,}")
    whole, shared = grids[False], grids[True]
    same = all(a.answers == b.answers and (a.found == b.found).all() and (a.retrievals == b.retrievals).all()
               for a, b in zip((whole[0], whole[1].strongest, whole[1].random), (shared[0], shared[1].strongest, shared[1].random)))
    print(f"the same answers, keys found and retrieval events both ways: {same}")
    for share in (False, True):
        print(grid_text(grids[share][0], "shared" if share else "whole"))


def sets(model, lengths, depths, k: int, seed: int, runs: int) -> None:
    """The turning off both ways, alternated so that a busy machine weighs on both: each set of heads in a reading of
    its own, and both in one reading (the layers below the first removed head once)."""
    from attnviz import needle

    before = needle.needle(model, lengths, depths, seed)
    off = needle.without_retrieval_heads(model, k, seed=seed, before=before)
    split = needle.first_changed(model.layers, [off.strongest.heads_off, off.random.heads_off])
    print(f"the strongest {off.strongest.heads_off}; random {off.random.heads_off}; the first layer either set "
          f"changes: {split} (from 0) of {model.layers}")
    times = {"each set alone": [], "one reading": []}
    grown = {"each set alone": [], "one reading": []}  # MiB: the peak resident memory over what it was before
    same = True
    for _ in range(runs):
        started, base = time.perf_counter(), peak_reset()
        alone = [needle.needle(model, lengths, depths, seed, heads) for heads in (off.strongest.heads_off,
                                                                                 off.random.heads_off)]
        times["each set alone"].append(time.perf_counter() - started)
        grown["each set alone"].append(peak() - base)
        started, base = time.perf_counter(), peak_reset()
        together = needle.without_retrieval_heads(model, k, seed=seed, before=before)
        times["one reading"].append(time.perf_counter() - started)
        grown["one reading"].append(peak() - base)
        for a, b in zip(alone, (together.strongest, together.random)):
            same &= a.answers == b.answers and (a.found == b.found).all() and (a.retrievals == b.retrievals).all()
        print(", ".join(f"{name} {runs[-1]:.1f} s" for name, runs in times.items()), flush=True)
    for name, runs in times.items():
        print(f"{name}: median {sorted(runs)[len(runs) // 2]:.1f} s ({', '.join(f'{t:.1f}' for t in runs)}); the peak "
              f"resident memory grew by {', '.join(f'{m:.0f}' for m in grown[name])} MiB")
    print(f"the same answers, keys found and retrieval events both ways: {same}")


def looked_up(model, lengths, depths, k: int, seed: int, runs: int) -> None:
    """The grid and the turning off with the pieces looked up in the text fed at once (needle._answer) and without
    (each piece its own greedy step: needle._guess made to find nothing), alternated so that a busy machine weighs on
    both."""
    from attnviz import needle

    guess, fed = needle._guess, []

    def counted(*args):
        found = guess(*args)
        fed.append(1 + len(found))
        return found

    times = {"one greedy step a piece": [], "pieces looked up and fed at once": []}
    grids = {}
    for _ in range(runs):
        for name, guesser in zip(times, (lambda *args: [], counted)):
            needle._guess, fed[:] = guesser, []
            try:
                started = time.perf_counter()
                before = needle.needle(model, lengths, depths, seed)
                middle = time.perf_counter()
                off = needle.without_retrieval_heads(model, k, seed=seed, before=before)
                times[name].append((middle - started, time.perf_counter() - middle))
            finally:
                needle._guess = guess
            grids[name] = (before, off.strongest, off.random)
            steps = f"; {len(fed)} steps fed {sum(fed)} pieces" if fed else ""
            print(f"{name}: the grid {middle - started:.1f} s, turning off {k} heads "
                  f"{time.perf_counter() - middle:.1f} s{steps}", flush=True)
    for name, both in times.items():
        print(f"{name}: the grid {', '.join(f'{g:.1f}' for g, _ in both)} s; turning off {k} heads "
              f"{', '.join(f'{o:.1f}' for _, o in both)} s")
    a, b = grids.values()
    same = all(x.answers == y.answers and (x.found == y.found).all() and (x.retrievals == y.retrievals).all()
               and (x.copied == y.copied).all() for x, y in zip(a, b))
    print(f"the same answers, keys found, retrieval events and copies both ways: {same}")


def peak() -> float:
    """This process's peak resident memory (VmHWM, MiB)."""
    from bench.bench_memory import status

    return status(os.getpid(), "VmHWM")


def peak_reset() -> float:
    """This process's resident memory now (MiB), with its peak (VmHWM) reset to it."""
    import gc

    from bench.bench_memory import reset_peak, status

    gc.collect()
    reset_peak(os.getpid())
    return status(os.getpid(), "VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--depths", type=float, nargs="+", default=[0, 0.25, 0.5, 0.75, 1])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--waits", action="store_true")
    parser.add_argument("--sets", action="store_true")
    parser.add_argument("--lookup", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, help="the checkout whose attnviz is timed (this one by default)")
    args = parser.parse_args()
    if args.root:
        sys.path.insert(0, str(args.root.resolve()))

    import torch

    from attnviz import models, needle

    model = models.load("smollm2", device="cpu")
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}; {model.name}: {model.describe()}; "
          f"attnviz from {Path(needle.__file__).parents[1]}")
    if args.waits:
        return waits(model, args.lengths, args.depths, args.k, args.seed)
    if args.lookup:
        return looked_up(model, args.lengths, args.depths, args.k, args.seed, args.runs)
    if args.sets:
        return sets(model, args.lengths, args.depths, args.k, args.seed, args.runs)
    started = time.perf_counter()
    before = needle.needle(model, args.lengths, args.depths, args.seed)
    first = time.perf_counter() - started
    print(f"the grid of {before.found.size} documents: {first:.1f} s ({first / before.found.size:.1f} s a document)")
    print(grid_text(before, "as it is"))
    strongest = before.strongest(args.k)
    print("strongest retrieval heads (layer, head from 0: score): "
          + ", ".join(f"L{l}H{h}: {before.scores[l, h]:.2f}" for l, h in strongest))
    print(f"heads with a score above 0.1: {int((before.scores > 0.1).sum())} of {before.scores.size}")
    started = time.perf_counter()
    off = needle.without_retrieval_heads(model, args.k, lengths=args.lengths, depths=args.depths, seed=args.seed,
                                         before=before)
    print(f"turning off the {args.k} strongest beside {args.k} random heads (two grids): "
          f"{time.perf_counter() - started:.1f} s")
    print(grid_text(off.strongest, f"without the {args.k} strongest"))
    print(grid_text(off.random, f"without {args.k} random heads of the same layers ({off.random.heads_off})"))
    for name, grid in (("without the strongest", off.strongest), ("without random heads", off.random)):
        print(f"{name}: answers {grid.answers}")
    if args.json:
        args.json.write_text(json.dumps({
            "lengths": before.lengths, "depths": before.depths, "keys": before.keys,
            "found": before.found.tolist(), "answers": before.answers, "scores": before.scores.round(4).tolist(),
            "strongest": strongest, "found_without_strongest": off.strongest.found.tolist(),
            "random_heads": off.random.heads_off, "found_without_random": off.random.found.tolist(),
            "seconds_first_grid": round(first, 1)}))


if __name__ == "__main__":
    main()
