"""A needle in a haystack, at a model's own length: pass-key documents, what the model writes after the question, and
which heads fetch the key while it is copied (retrieval heads, Wu et al. 2024, "Retrieval Head Mechanistically
Explains Long-Context Factuality").

    from attnviz import models, needle
    model = models.load("smollm2")
    grid = needle.needle(model, lengths=[1000, 2000], depths=[0, 0.5, 1])
    grid.found                      # (lengths, depths) bool: the key came back
    grid.scores                     # (L, H) each head's retrieval score
    off = needle.needle(model, lengths=[1000, 2000], depths=[0, 0.5, 1], heads_off=grid.strongest(8))
    asked = needle.ask(model, my_text, retrieval=grid.strongest(8))  # a text of one's own, ending in its question
    asked.written.text, asked.copies[0]   # the answer; where its first piece was copied from, and by which heads
    asked.without["strongest"].text       # the answer without those heads ("random": without as many random ones)

A document is read into each layer's K/V cache one block of queries at a time (attnviz.models.scan.Blocked: no
n × n matrix is held), then the answer is written greedily from that cache, one query row per layer a step, and each
step keeps the row of weights of the query that chose the piece.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.effects import Ablation
from attnviz.models import engine
from attnviz.models.errors import ENGINE_FAMILIES, ModelError, a_or_an
from attnviz.models.pieces import Pieces
from attnviz.models.scan import BLOCK, Blocked

# The pass-key task of Mohtashami and Jaggi (2023), "Landmark Attention": the filler says nothing, so only the needle
# holds the answer.
INTRO = ("There is an important piece of information hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about it.")
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = "What is the pass key? The pass key is"
LENGTHS = (1000, 2000, 4000)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_CELLS = 64


@dataclass
class Haystack:
    """One pass-key document: its pieces, the needle's pieces (a range of positions) and the key hidden in it."""

    pieces: Pieces
    needle: range
    key: str
    depth: float


@dataclass
class Written:
    """What a model wrote greedily after a document: the pieces, and for each the weights (L, H, k) of the query that
    chose it over every key before it."""

    ids: list[int]
    text: str
    rows: list[np.ndarray] = field(repr=False)


@dataclass
class Prefix:
    """A document's first pieces as the model read them: their ids, and each layer's keys and values (KV, p, dh), all
    with the same heads removed. In a decoder these depend on those pieces alone, so a document that starts with the
    same pieces (the grid's filler, before each needle) reads on from them instead of again."""

    ids: list[int]
    caches: list[tuple[torch.Tensor, torch.Tensor]] = field(repr=False)

    def shared(self, ids: list[int]) -> int:
        """How many of `ids`' first pieces are this prefix's."""
        same = 0
        for a, b in zip(self.ids, ids):
            if a != b:
                break
            same += 1
        return same

    def cut(self, p: int) -> "Prefix":
        return Prefix(self.ids[:p], [(key[..., :p, :], value[..., :p, :]) for key, value in self.caches])  # (KV, p, dh)


@dataclass
class NeedleGrid:
    """Pass-key documents of each length (pieces) with the needle at each depth (0: the start, 1: the end), and what
    the model made of them. found (lengths, depths): the key is in what it wrote. retrievals (lengths, depths, L, H):
    while it copied a needle piece, how often each head's strongest key was that same piece inside the needle; copied
    (lengths, depths): the needle pieces it copied. Layers and heads count from 0."""

    model: str
    lengths: list[int]
    depths: list[float]
    keys: list[list[str]]
    answers: list[list[str]]
    pieces: np.ndarray  # (lengths, depths) each document's pieces
    found: np.ndarray
    retrievals: np.ndarray
    copied: np.ndarray
    heads_off: tuple[tuple[int, int], ...] = ()
    read: int = 0  # the pieces read into the K/V caches, those shared with an earlier document's filler left out

    @property
    def scores(self) -> np.ndarray:
        """(L, H) each head's retrieval score: its retrievals over the needle pieces copied in a document, averaged over
        the documents where any were copied (0 where none were)."""
        done = self.copied > 0  # (lengths, depths)
        if not done.any():
            return np.zeros(self.retrievals.shape[2:])
        return (self.retrievals[done] / self.copied[done][:, None, None]).mean(0)  # (L, H)

    def strongest(self, k: int) -> tuple[tuple[int, int], ...]:
        """The k heads (layer, head) of highest retrieval score, strongest first."""
        return strongest_heads(self.scores, k)

    @property
    def rate(self) -> float:
        """The share of documents whose key came back."""
        return float(self.found.mean())


def strongest_heads(scores: np.ndarray, k: int) -> tuple[tuple[int, int], ...]:
    """The k heads (layer, head) of highest score in (L, H) `scores`, highest first."""
    order = np.argsort(-scores, axis=None, kind="stable")[:k]
    return tuple((int(l), int(h)) for l, h in zip(*np.unravel_index(order, scores.shape)))


def check_model(model) -> None:
    if not (getattr(model, "can_scan", False) and getattr(model, "can_generate", False)):  # an engine decoder
        raise ModelError(f"{model.name} is {a_or_an(model.kind)} computed by {model.computed_by}; a needle's answer "
                         f"is written by a decoder attnviz's engine computes (it computes {ENGINE_FAMILIES}).")


def haystack(model, length: int, depth: float, key: str) -> Haystack:
    """The longest pass-key document of at most `length` pieces (the question at its end), the needle after the
    filler sentence nearest `depth` of the way through."""
    if not 0 <= depth <= 1:
        raise ValueError(f"a depth is a share of the document, from 0 to 1, got {depth!r}.")
    reader = model.reader
    whole = len(reader(" ".join([INTRO, NEEDLE.format(key=key), QUESTION]), limit=10**9))
    each = len(reader(" ".join([FILLER] * 20), limit=10**9)) / 20
    count = max(0, int((length - whole) / each) + 1)
    while True:
        text, span = _document(count, depth, key)
        pieces = reader(text, limit=10**9)
        if len(pieces) <= length or count == 0:
            break
        count -= 1
    if len(pieces) > length:
        raise ValueError(f"{length} pieces cannot hold a pass-key document for {model.name}: it needs {len(pieces)}.")
    inside = [i for i, (a, b) in enumerate(pieces.spans) if b > a and b > span[0] and a < span[1]]  # its characters
    return Haystack(pieces, range(inside[0], inside[-1] + 1), key, depth)


def _document(count: int, depth: float, key: str) -> tuple[str, tuple[int, int]]:
    """The text with `count` filler sentences around the needle, and the needle's characters (start, stop)."""
    before = round(depth * count)
    head = " ".join([INTRO] + [FILLER] * before) + " "
    needle = NEEDLE.format(key=key)
    tail = " ".join([""] + [FILLER] * (count - before) + [QUESTION])
    return head + needle + tail, (len(head), len(head) + len(needle))


def write(model, pieces: Pieces, steps: int, heads_off=(), progress=None) -> Written:
    """`steps` pieces written greedily after `pieces` (fewer where the model's end piece comes), the document read one
    block of queries at a time into each layer's K/V cache; each written piece's query row of weights (L, H, k) kept.
    `heads_off` [(layer, head), …] are removed (their output set to 0 before W_o), as effects.ablate removes them."""
    return _write(model, pieces, steps, [tuple(heads_off)], progress)[0][0]


READ_ON = 512  # the rows a step when a document is read on from a shared prefix (its weights: H × 512 × n at most)


def first_changed(layers: int, removals) -> int:
    """The first layer that any set of heads in `removals` removes a head of (`layers` where none removes any): below
    it, the model under every set is the model as it is, so those layers are computed once for all the sets."""
    return min((layer for heads in removals for layer, _ in heads), default=layers)


def _write(model, pieces: Pieces, steps: int, removals, progress=None, prefixes: list[Prefix] | None = None,
           keep: int | None = None) -> list[tuple[Written, Prefix | None]]:
    """write under each set of heads off in `removals` [[(layer, head), …], …], and the document as each read it (a
    Prefix of all its pieces). The layers below the first one any set changes (first_changed) are computed once for
    all of them; then each set in turn reads the rest and writes, so one set's keys and values of the later layers are
    held at a time. With `prefixes`, one per set, read under the same heads off (the grid's filler), their pieces are
    not read again: the rest are read on from their keys and values, READ_ON rows a step. `progress(done, total)`
    counts layers computed over the document: the shared ones once, the others once a set. `keep`: how many of the
    document's first pieces each Prefix holds (all by default; 0 none, so each set's keys and values go as soon as
    it has written)."""
    check_model(model)
    arch = model.arch
    n = len(pieces)
    if n + steps > arch.context:
        raise ModelError(f"{model.name} reads at most {arch.context:,} pieces; {n:,} and {steps} to write are more.")
    interventions = [Ablation(tuple(heads)) if heads else None for heads in removals]
    split = first_changed(arch.layers, removals)
    counter = _Counter(progress, split + len(removals) * (arch.layers - split))
    with torch.inference_mode():
        shared = 0 if prefixes is None else min(prefixes[0].shared(pieces.ids), n - 1)  # at least the last is read
        if shared >= BLOCK:  # fewer: the whole document is read as quickly
            below = _read_on_below(model, pieces, prefixes[0].cut(shared), split, counter)
            rest = [lambda k=k: _read_on_above(model, below, prefixes[k].cut(shared), interventions[k], split, counter)
                    for k in range(len(removals))]
        else:
            below = _read_below(model, pieces, split, counter)
            rest = [lambda k=k: _read_above(model, below, interventions[k], split, counter)
                    for k in range(len(removals))]
        written = []
        for read, intervention in zip(rest, interventions):
            answer, whole = _answer(model, pieces, steps, *read(), intervention)
            written.append((answer, whole if keep is None else whole.cut(keep) if keep else None))
            del whole  # before the next set reads: one set's keys and values at a time
        return written


class _Counter:
    """progress(done, total) in whole layers over a document, where a step may be a share of a layer (read on)."""

    def __init__(self, progress, total: int):
        self.progress, self.total, self.done, self.told = progress, total, 0.0, 0

    def add(self, share: float = 1.0) -> None:
        self.done += share
        whole = min(self.total, int(self.done + 1e-9))
        if self.progress is not None and whole > self.told:
            self.progress(whole, self.total)
            self.told = whole


def _answer(model, pieces: Pieces, steps: int, caches: list, last: list, x: torch.Tensor, intervention
            ) -> tuple[Written, Prefix]:
    """The pieces written greedily from a document read into `caches` (each layer's keys and values), `last` its last
    query's row of weights in each layer (H, n) and x the last layer's output (n, d); and the document as read.
    Each step feeds the piece written and the pieces that followed the same words earlier in the text (_guess); a fed
    piece is kept while the row before it chose it, as a greedy step would: the same pieces, with the weights read
    once for several of them where the model copies from the document (the pass key)."""
    arch, weights = model.arch, model.weights
    n, device = len(pieces), weights.embeddings.device
    ends = set(getattr(model, "end_ids", ()))
    read = Prefix(list(pieces.ids), list(caches))
    logits = engine.logits(weights, x[-1:])  # (1, vocab)
    rows, written = [torch.stack(last).numpy()], []  # (L, H, n)
    while True:
        token = int(logits[-1].argmax())
        written.append(token)
        if token in ends or len(written) == steps:
            break
        fed = [token] + _guess(pieces.ids, written, steps, ends)  # (m,) pieces greedy steps may write and feed
        c = n + len(written) - 1  # the first fed piece's position
        positions = torch.arange(c, c + len(fed), device=device)  # (m,)
        x = engine.embed(arch, weights, torch.tensor(fed, device=device), positions)  # (m, d)
        seen = []
        for i, x, a, trace in engine.run_layers(arch, weights, x, positions, intervention=intervention,
                                                cached=caches.__getitem__):
            caches[i] = (trace.key, trace.value)  # (KV, c + m, dh) each
            seen.append(a.weights.float().cpu())  # (H, m, c + m)
        logits = engine.logits(weights, x)  # (m, vocab)
        kept = 1  # the fed pieces that greedy steps would have fed: each chosen by the row before it
        while kept < len(fed) and int(logits[kept - 1].argmax()) == fed[kept]:
            kept += 1
        written += fed[1:kept]
        rows += [torch.stack([w[:, j, :c + j + 1] for w in seen]).numpy() for j in range(kept)]  # (L, H, c + j + 1)
        if kept < len(fed):
            caches[:] = [(key[..., :c + kept, :], value[..., :c + kept, :]) for key, value in caches]
        logits = logits[:kept]  # (kept, vocab): the last row chooses the next piece
    return Written(written, model.tokenizer.decode(written, skip_special_tokens=True), rows), read


LOOKUP = 3  # the most pieces matched when the pieces to feed are looked up in the text so far


def _guess(ids: list[int], written: list[int], steps: int, ends: set) -> list[int]:
    """The pieces to feed after `written`, looked up in the text so far (_lookup over the document's `ids` and
    `written`): at most those that greedy steps would feed (none an end piece, and not the last of `steps`)."""
    guess = []
    for piece in _lookup(ids + written)[:max(0, steps - len(written) - 1)]:
        if piece in ends:
            break
        guess.append(piece)
    return guess


def _lookup(ids: list[int]) -> list[int]:
    """The pieces that followed the latest earlier place where the text's last LOOKUP pieces (or fewer, down to one)
    stand: what a model copying from its context writes next (prompt lookup, Saxena 2023), such as the pass key after
    "The pass key is"."""
    for match in range(min(LOOKUP, len(ids) - 1), 0, -1):
        tail = ids[-match:]
        for start in range(len(ids) - match - 1, -1, -1):
            if ids[start:start + match] == tail:
                return ids[start + match:]
    return []


@dataclass
class _Below:
    """A document read through the layers below `split`: their keys and values (KV, n, dh), the last query's row of
    weights in each (H, n), and what enters layer `split`: x (n, d) at `positions` (n,), or for a document read on, a
    list of (positions (m,), x (m, d)), one a step of READ_ON rows."""

    caches: list
    last: list
    x: torch.Tensor | list
    positions: torch.Tensor | None = None


def _whole(model, x: torch.Tensor, positions: torch.Tensor, start: int, stop: int, intervention, counter: _Counter
           ) -> tuple[torch.Tensor, list, list]:
    """A whole document's x (n, d) at `positions` (n,) through layers start … stop − 1, a block of queries at a time
    (the scan's blocked layer): (x after them, each layer's keys and values (KV, n, dh), each layer's last query row
    of weights (H, n))."""
    n, caches, last = len(positions), [], []

    def visit(first, exps, total):  # the block of queries from `first`
        if first + exps.shape[1] == n:
            last.append((exps[:, -1] / total[:, -1]).float().cpu())

    blocked = Blocked(BLOCK, visit=visit)
    for i, x, a, _ in (engine.run_layers(model.arch, model.weights, x, positions, start=start, intervention=intervention,
                                         attention=lambda i: blocked, trace=False) if start < stop else ()):
        caches.append((a.key, a.value))  # (KV, n, dh) each
        counter.add()
        if i + 1 == stop:
            break
    return x, caches, last


def _on(model, x: torch.Tensor, positions: torch.Tensor, caches: list, start: int, stop: int, intervention,
        share: float, counter: _Counter) -> tuple[torch.Tensor, list]:
    """A step of rows x (m, d) at `positions` (m,) read on through layers start … stop − 1, each against its keys and
    values so far in `caches` (grown in place, to (KV, c + m, dh)): (x after them, each layer's last query row of
    weights (H, c + m)). `share`: the step's share of the rows, for the progress."""
    last = []
    for i, x, a, trace in (engine.run_layers(model.arch, model.weights, x, positions, start=start,
                                             intervention=intervention, cached=caches.__getitem__)
                           if start < stop else ()):
        caches[i] = (trace.key, trace.value)  # (KV, c + m, dh) each
        last.append(a.weights[:, -1].float().cpu().clone())  # (H, c + m): a copy, as a view keeps the step's weights
        counter.add(share)
        if i + 1 == stop:
            break
    return x, last


def _read_below(model, pieces: Pieces, split: int, counter: _Counter) -> _Below:
    """The whole document read through layers 0 … split − 1."""
    device = model.weights.embeddings.device
    positions = torch.arange(len(pieces), device=device)  # (n,)
    x = engine.embed(model.arch, model.weights, torch.tensor(pieces.ids, device=device), positions)  # (n, d)
    x, caches, last = _whole(model, x, positions, 0, split, None, counter)
    return _Below(caches, last, x, positions)


def _read_above(model, below: _Below, intervention, split: int, counter: _Counter) -> tuple[list, list, torch.Tensor]:
    """The rest of _read_below's document, layers split … L − 1 under `intervention`: every layer's keys and values
    (KV, n, dh), the last query's row of weights in each layer (H, n), and the last layer's output (n, d)."""
    x, caches, last = _whole(model, below.x, below.positions, split, model.layers, intervention, counter)
    return below.caches + caches, below.last + last, x


def _read_on_below(model, pieces: Pieces, prefix: Prefix, split: int, counter: _Counter) -> _Below:
    """A document whose first pieces are `prefix`'s, read on through layers 0 … split − 1: only the rest, READ_ON rows
    at a time, each step against the keys and values so far."""
    n, p, device = len(pieces), len(prefix.ids), model.weights.embeddings.device
    caches = list(prefix.caches[:split])  # (KV, p, dh) each, growing
    steps, last = [], []
    for start in range(p, n, READ_ON):
        stop = min(n, start + READ_ON)
        positions = torch.arange(start, stop, device=device)  # (m,)
        x = engine.embed(model.arch, model.weights, torch.tensor(pieces.ids[start:stop], device=device),
                         positions)  # (m, d)
        x, last = _on(model, x, positions, caches, 0, split, None, (stop - start) / (n - p), counter)
        steps.append((positions, x))
    return _Below(caches, last, steps)


def _read_on_above(model, below: _Below, prefix: Prefix, intervention, split: int, counter: _Counter
                   ) -> tuple[list, list, torch.Tensor]:
    """The rest of _read_on_below's document, layers split … L − 1 under `intervention`, read on from `prefix`'s keys
    and values of those layers (read under the same intervention): as _read_above gives."""
    caches = below.caches + list(prefix.caches[split:])  # (KV, p or more, dh) each, growing
    new = sum(len(positions) for positions, _ in below.x)  # the pieces read on
    for positions, x in below.x:
        x, last = _on(model, x, positions, caches, split, model.layers, intervention, len(positions) / new, counter)
    return caches, below.last + last, x


def retrievals(ids: list[int], needle: range, written: list[int], rows: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Wu et al.'s retrieval events: ((L, H) how often each head's strongest key was the very piece being copied,
    inside the needle; the needle pieces copied). The piece written at step t is copied when it is one of the needle's
    pieces; rows[t] (L, H, k) are the weights of the query that chose it, over the document and the pieces written
    before it (`ids` + written[:t])."""
    needle_ids = {ids[i] for i in needle}
    events = np.zeros(rows[0].shape[:2], np.int64)  # (L, H)
    copied = 0
    for token, row in zip(written, rows):
        if token not in needle_ids:
            continue
        copied += 1
        strongest = row.argmax(-1)  # (L, H)
        inside = (strongest >= needle.start) & (strongest < needle.stop)  # (L, H)
        events += inside & (np.asarray(ids)[np.minimum(strongest, len(ids) - 1)] == token)
    return events, copied


def needle(model, lengths=LENGTHS, depths=DEPTHS, seed: int = 0, heads_off=(), progress=None,
           share_filler: bool = True) -> NeedleGrid:
    """Pass-key documents of each of `lengths` pieces with the needle at each of `depths`, each key a random 5-digit
    number (seeded), the answer written greedily after the question: the grid of which keys came back, and each head's
    retrieval events while the key was copied. `heads_off` [(layer, head), …] are removed throughout (zero ablation).
    `progress(done, total)` hears of each layer of each document read.

    Every document starts with the same filler, up to its needle: the longest document with the deepest needle is read
    first, and each other reads on from the filler it shares with it (`share_filler`; False reads every document
    whole, the same numbers up to float32's rounding, in more time)."""
    return grids(model, lengths, depths, seed, [heads_off], progress, share_filler)[0]


def grids(model, lengths=LENGTHS, depths=DEPTHS, seed: int = 0, removals=((),), progress=None,
          share_filler: bool = True) -> list[NeedleGrid]:
    """needle's grid under each set of heads off in `removals` [[(layer, head), …], …], the same documents read once
    for all of them: each document's layers below the first one any set changes (first_changed) are computed once, the
    rest once a set, so removing heads of late layers costs about those layers. Each grid equals needle's under its set
    (up to float32's rounding where the filler is shared). `progress(done, total)` counts layers over documents."""
    check_model(model)
    lengths, depths = _checked(model, lengths, depths)
    removals = [tuple((int(l), int(h)) for l, h in heads) for heads in removals]
    if not removals:
        raise ValueError("give at least one set of heads to remove (an empty one: the model as it is).")
    for l, h in (head for heads in removals for head in heads):
        if not (0 <= l < model.layers and 0 <= h < model.heads):
            raise ValueError(f"head ({l}, {h}) is not in {model.name} ({model.layers} layers × {model.heads} heads, "
                             "counted from 0).")
    rng = np.random.default_rng(seed)
    shape = (len(lengths), len(depths))
    keys = [[str(rng.integers(10_000, 100_000)) for _ in depths] for _ in lengths]
    found = [_Cells(shape, model.layers, model.heads) for _ in removals]
    split = first_changed(model.layers, removals)
    each = split + len(removals) * (model.layers - split)  # layers computed over one document
    total = len(lengths) * len(depths) * each
    order = sorted(np.ndindex(*shape), key=lambda ab: (-depths[ab[1]], -lengths[ab[0]]))  # the longest filler first
    fillers, read = None, 0
    for done, (a, b) in enumerate(order):
        stack = haystack(model, lengths[a], depths[b], keys[a][b])
        tick = None if progress is None else (lambda i, _, done=done * each: progress(done + i, total))
        steps = len(model.reader(f" {stack.key}.", limit=10**9).ids) + 2
        shared = 0 if fillers is None else min(fillers[0].shared(stack.pieces.ids), len(stack.pieces) - 1)
        shared = shared if shared >= BLOCK else 0  # as _write decides
        refill = share_filler and (fillers is None or stack.needle.start > len(fillers[0].ids))
        outcome = _write(model, stack.pieces, steps, removals, tick, fillers if shared else None,
                         keep=stack.needle.start if refill else 0)
        read += len(stack.pieces) - shared
        if refill:
            fillers = [filler for _, filler in outcome]  # the filler every later document starts with
        for cells, (written, _) in zip(found, outcome):
            cells.note((a, b), stack, written)
    return [cells.grid(model.name, lengths, depths, keys, heads, read) for cells, heads in zip(found, removals)]


class _Cells:
    """What one grid found, document by document."""

    def __init__(self, shape: tuple[int, int], layers: int, heads: int):
        self.answers = [["" for _ in range(shape[1])] for _ in range(shape[0])]
        self.pieces, self.copied = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        self.found = np.zeros(shape, bool)
        self.events = np.zeros((*shape, layers, heads), np.int64)

    def note(self, cell: tuple[int, int], stack: Haystack, written: Written) -> None:
        a, b = cell
        self.answers[a][b], self.pieces[a, b] = written.text, len(stack.pieces)
        self.found[a, b] = stack.key in written.text
        self.events[a, b], self.copied[a, b] = retrievals(stack.pieces.ids, stack.needle, written.ids, written.rows)

    def grid(self, name, lengths, depths, keys, heads_off, read) -> NeedleGrid:
        return NeedleGrid(name, lengths, depths, keys, self.answers, self.pieces, self.found, self.events,
                          self.copied, tuple(heads_off), read)


def _checked(model, lengths, depths) -> tuple[list[int], list[float]]:
    lengths, depths = list(lengths), list(depths)
    if not lengths or not depths or len(lengths) * len(depths) > MAX_CELLS:
        raise ValueError(f"give at least one length and one depth, and at most {MAX_CELLS} documents in all.")
    for length in lengths:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or not 64 <= length <= model.arch.context - 16:
            raise ValueError(f"a length is a whole number of pieces from 64 to {model.arch.context - 16:,} "
                             f"({model.name} reads {model.arch.context:,}, and the answer needs room), got {length!r}.")
    for depth in depths:
        if isinstance(depth, bool) or not isinstance(depth, (int, float)) or not 0 <= depth <= 1:
            raise ValueError(f"a depth is a share of the document, from 0 to 1, got {depth!r}.")
    return [int(x) for x in lengths], [float(x) for x in depths]


def retrieval_scores(model, lengths=LENGTHS, depths=DEPTHS, seed: int = 0, progress=None) -> np.ndarray:
    """(L, H) each head's retrieval score over the pass-key grid (NeedleGrid.scores)."""
    return needle(model, lengths, depths, seed, progress=progress).scores


@dataclass
class Ablated:
    """The grid as the model is, without the k strongest retrieval heads, and without k random heads drawn from the
    same layers (as many from each)."""

    before: NeedleGrid
    strongest: NeedleGrid
    random: NeedleGrid


def share_interval(found: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share found / total (a few trials: 4 of 6 is anywhere from 30 % to 90 %)."""
    if total <= 0:
        return 0.0, 1.0
    p = found / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * np.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def without_retrieval_heads(model, k: int = 8, lengths=LENGTHS, depths=DEPTHS, seed: int = 0, before=None,
                            progress=None, share_filler: bool = True) -> Ablated:
    """The pass-key grid before and after removing the k strongest retrieval heads, beside removing k random heads
    of the same layers. `before`, where given, is the model's own grid on these documents (it is not read again).
    Both sets are removed in one reading of the documents (grids): the layers below the first strong head's are
    computed once for both, as the random heads lie in the same layers. `share_filler`: as needle's."""
    before = before or needle(model, lengths, depths, seed, share_filler=share_filler)
    heads = before.strongest(k)
    strongest, random = grids(model, before.lengths, before.depths, seed, [heads, like_heads(model, heads, seed)],
                              progress, share_filler)
    return Ablated(before, strongest, random)


@dataclass
class Copy:
    """Where one written piece came from in the text: the text's piece equal to it that the most heads had as their
    strongest key (None where no head's strongest key was such a piece: not copied from the text), and those heads."""

    position: int | None
    heads: tuple[tuple[int, int], ...]


@dataclass
class Asked:
    """The model's answer to a text of one's own (`ask`): what it wrote, where each piece was copied from, and the
    answers written without the retrieval heads and without as many random heads of the same layers."""

    pieces: Pieces
    written: Written
    copies: list[Copy]
    removed: dict[str, tuple[tuple[int, int], ...]]  # "strongest", "random": the heads removed (empty: none asked)
    without: dict[str, Written]  # the answer written without each set

    def same(self, name: str) -> bool:
        """Whether the answer without the heads `name` is the answer as the model is."""
        return self.without[name].ids == self.written.ids


def copied_from(ids: list[int], written: list[int], rows: list[np.ndarray]) -> list[Copy]:
    """For each written piece, where it was copied from (Copy): rows[t] (L, H, k) are the weights of the query that
    chose written[t] over the text `ids` and the pieces written before it. A head reads the piece's source when its
    strongest key is a piece of the text equal to it (Wu et al.'s copy condition, with no needle to stay inside)."""
    text = np.asarray(ids)  # (n,)
    copies = []
    for token, row in zip(written, rows):
        strongest = row.argmax(-1)  # (L, H)
        inside = strongest < len(text)  # (L, H) a key of the text, not a piece written
        hits = inside & (text[np.minimum(strongest, len(text) - 1)] == token)  # (L, H)
        if not hits.any():
            copies.append(Copy(None, ()))
            continue
        sources, counts = np.unique(strongest[hits], return_counts=True)
        source = int(sources[counts.argmax()])  # the position the most heads read (the first of a tie)
        heads = tuple((int(l), int(h)) for l, h in zip(*np.nonzero(hits & (strongest == source))))
        copies.append(Copy(source, heads))
    return copies


def like_heads(model, heads, seed: int = 0) -> tuple[tuple[int, int], ...]:
    """As many random heads as `heads`, one in the layer of each, none of `heads` (seeded): what removing heads of the
    same layers does, beside removing these."""
    rng = np.random.default_rng(seed + 1)
    chosen, others = set(heads), []
    for layer, _ in heads:
        pool = [(layer, h) for h in range(model.heads) if (layer, h) not in chosen and (layer, h) not in others]
        others.append(pool[rng.integers(len(pool))] if pool else heads[0])
    return tuple(others)


ASK_STEPS = 16  # the pieces an answer to one's own text is written for (a 5-digit key and its full stop are 3 or so)


def ask(model, text: str, steps: int = ASK_STEPS, retrieval=(), seed: int = 0, progress=None) -> Asked:
    """The model's answer after `text` (a document of one's own ending in a question: greedy, at most `steps` pieces,
    the text read one block of queries at a time as the needle lab's are), where each written piece was copied from
    and by which heads (copied_from); and with `retrieval` [(layer, head), …] (the lab's strongest retrieval heads),
    the answer again without them and without as many random heads of the same layers (like_heads), the text's
    lower layers read once for all three. `progress(done, total)` hears of each layer read. TextError for a text the
    model cannot read with `steps` pieces after it; ModelError for a model whose layers attnviz does not compute."""
    pieces = model.reader(text, limit=max(1, model.context - steps))
    removed = {"strongest": tuple(retrieval), "random": like_heads(model, retrieval, seed)} if retrieval else {}
    answers = [w for w, _ in _write(model, pieces, steps, [(), *removed.values()], progress, keep=0)]
    written = answers[0]
    return Asked(pieces, written, copied_from(pieces.ids, written.ids, written.rows), removed,
                 dict(zip(removed, answers[1:])))
