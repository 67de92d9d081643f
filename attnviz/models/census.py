"""What each head does over a whole document: the long-context head census, from one scan (attnviz.models.scan).

For every head, the numbers the long-context papers define per head, on the user's own document:
- **streaming** (StreamingLLM's sinks, DuoAttention's streaming heads): the share of each long row's weight on the
  first `sinks` pieces and on the `recent` pieces up to it, and the distant share left. A long row is a query past
  sinks + recent (or the budget, whichever is more), which has keys beyond both;
- **retrieval**, two ways: DuoAttention's, the distant share a head needs (a head whose distant share is large cannot
  keep only the sinks and the window); Wu et al. 2024's retrieval score, where the needle lab ran (attnviz.needle:
  the share of the needle's copied pieces the head looked straight at);
- **MInference's patterns** (decoders): the share of the long rows' weight that each pattern keeps at a budget of
  `budget` keys a query. A-shape: the first `sinks` keys and the last budget − sinks. Vertical-slash: the budget / 4
  keys and the 3 · budget / 4 offsets i − j with the most weight over the document (the oracle choice; MInference
  estimates them from the last 64 queries; equals to 5 digits, the lowest first), less the cells where both meet. Block-sparse: each block of queries keeps
  the budget / block blocks of keys with the most weight (the overview's). The pattern with the best recall;
- **previous-piece** and **local**: the share on the piece before, and within `local_span` pieces.

Each head falls in the first class whose rule holds (Rules, Census.classify): previous-piece, local, retrieval by Wu
et al.'s score, streaming, retrieval by the distant share, else dense.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attnviz.models.engine import rules as engine_rules

CLASSES = ("previous", "local", "streaming", "retrieval", "dense")
CLASS_NAMES = {"previous": "previous-piece", "local": "local", "streaming": "streaming", "retrieval": "retrieval",
               "dense": "dense"}
PATTERNS = ("a_shape", "vertical_slash", "block_sparse")
PATTERN_NAMES = {"a_shape": "A-shape", "vertical_slash": "vertical-slash", "block_sparse": "block-sparse"}


@dataclass(frozen=True)
class Rules:
    """The census's settings and each class's threshold, each a share of a row's weight unless it says pieces."""

    sinks: int = 4  # pieces: StreamingLLM's attention sinks
    recent: int = 256  # pieces: the window a streaming head keeps (DuoAttention's recent tokens)
    local_span: int = 16  # pieces
    budget: int = 512  # keys a query, for MInference's patterns
    previous: float = 0.5  # previous-piece: at least this on the piece before
    local: float = 0.8  # local: at least this within local_span pieces
    streaming: float = 0.9  # streaming: at least this on the sinks and the recent window
    retrieval: float = 0.25  # retrieval (DuoAttention's view): at least this distant, beyond both,
    focus: float = 4.5  # nats: and on few keys, a long row's mean entropy at most this (e^4.5 ≈ 90 keys' worth)
    wu: float = 0.1  # retrieval (Wu et al.'s score), where the needle lab ran

    def statements(self) -> dict[str, str]:
        """Each class's rule, in words."""
        return {
            "previous": f"at least {self.previous:.0%} of each row's weight on the piece before",
            "local": f"at least {self.local:.0%} within the {self.local_span} pieces up to each query",
            "streaming": f"at least {self.streaming:.0%} of each long row's weight on the first {self.sinks} pieces "
                         f"and the {self.recent} up to the query",
            "retrieval": f"a retrieval score (Wu et al.) of at least {self.wu:g} where the needle lab ran, or at "
                         f"least {self.retrieval:.0%} of each long row's weight beyond the first {self.sinks} pieces "
                         f"and the {self.recent} up to the query, on few keys (a mean entropy of at most "
                         f"{self.focus:g} nats)",
            "dense": "none of the above: its weight spreads over many keys, near and far",
        }


@dataclass(frozen=True)
class Census:
    """Per head (L, H), shares of a row's weight in [0, 1]: sink and recent (long rows), distant (what is left of
    each long row's weight), previous (rows q ≥ 1), local (every row), entropy (nats, the long rows'); recalls (decoders:
    PATTERNS → (L, H), else {}); wu (L, H) Wu et al.'s retrieval score, or None; the rules; the pieces n and the long
    rows' first query."""

    n: int
    long_from: int
    sink: np.ndarray
    recent: np.ndarray
    distant: np.ndarray
    previous: np.ndarray
    local: np.ndarray
    entropy: np.ndarray
    recalls: dict[str, np.ndarray]
    wu: np.ndarray | None
    rules: Rules
    kv_group: int  # query heads that share a key/value head
    # the names, for whoever draws a census without importing this module (attnviz.figures is below it)
    CLASSES: ClassVar[tuple[str, ...]] = CLASSES
    CLASS_NAMES: ClassVar[dict[str, str]] = CLASS_NAMES
    PATTERNS: ClassVar[tuple[str, ...]] = PATTERNS
    PATTERN_NAMES: ClassVar[dict[str, str]] = PATTERN_NAMES

    @property
    def best_pattern(self) -> np.ndarray | None:
        """(L, H) the index into PATTERNS of each head's best recall, or None for an encoder."""
        if not self.recalls:
            return None
        return np.stack([self.recalls[p] for p in PATTERNS]).argmax(0)

    def classify(self, rules: Rules | None = None) -> np.ndarray:
        """(L, H) the index into CLASSES of each head: the first rule of `rules` (the census's own by default) that
        holds, in this order: previous-piece, local, retrieval by Wu et al.'s score (where the needle lab ran: a head
        that copies the needle needs the whole cache, whatever it does elsewhere), streaming, retrieval by the distant
        share, else dense. The browser's map applies the same rules to the same numbers (census.mjs)."""
        rules = rules or self.rules
        index = CLASSES.index
        wu = np.zeros_like(self.sink) if self.wu is None else self.wu
        ordered = [(self.previous >= rules.previous, index("previous")), (self.local >= rules.local, index("local")),
                   (wu >= rules.wu if self.wu is not None else np.zeros(self.sink.shape, bool), index("retrieval")),
                   (self.sink + self.recent >= rules.streaming, index("streaming")),
                   ((self.distant >= rules.retrieval) & (self.entropy <= rules.focus), index("retrieval"))]
        found = np.full(self.sink.shape, index("dense"))
        for holds, name in reversed(ordered):  # the first rule that holds wins
            found = np.where(holds, name, found)
        return found

    def counts(self, rules: Rules | None = None) -> dict[str, int]:
        classes = self.classify(rules)
        return {name: int((classes == i).sum()) for i, name in enumerate(CLASSES)}

    def cache_share(self, rules: Rules | None = None) -> float:
        """The share of a full KV cache this document needs when each key/value head whose query heads are all
        streaming, local or previous-piece keeps only the sinks and its window (the largest its heads need), and every
        other keeps all n pieces."""
        rules = rules or self.rules
        classes = self.classify(rules)
        keeps = np.select([classes == CLASSES.index("previous"), classes == CLASSES.index("local"),
                           classes == CLASSES.index("streaming")],
                          [min(self.n, 2), min(self.n, rules.local_span), min(self.n, rules.sinks + rules.recent)],
                          self.n)  # (L, H) entries each query head needs
        by_kv = keeps.reshape(keeps.shape[0], -1, self.kv_group).max(-1)  # (L, KV)
        return float(by_kv.sum() / (by_kv.size * self.n))

    def sentence(self, rules: Rules | None = None) -> str:
        """How many heads fall in each class, and what that means for a KV cache."""
        rules = rules or self.rules
        counts = self.counts(rules)
        total = sum(counts.values())
        parts = ", ".join(f"{counts[c]:,} {CLASS_NAMES[c]}" for c in CLASSES)
        short = sum(counts[c] for c in ("previous", "local", "streaming"))
        share = self.cache_share(rules)
        said = (f"Of the {total:,} heads over these {self.n:,} pieces: {parts}. {short:,} read no further than a "
                f"window and the first pieces: a streaming head needs {min(self.n, rules.sinks + rules.recent):,} of "
                f"the {self.n:,} keys and values. With every key/value head whose heads all do so keeping only those, "
                f"this document's KV cache would be {share:.0%} of its full size.")
        if self.long_from >= self.n:
            said += (f" The text is no longer than the window and the sinks ({self.long_from:,} pieces), so every row "
                     "reads within them: scan a longer text to tell the heads apart.")
        return said


def census(scan, rules: Rules = Rules(), wu: np.ndarray | None = None, progress=None) -> Census:
    """The census of every head of `scan` (attnviz.models.scan.Scan, with its verticals and slashes) under `rules`;
    `wu` (L, H): Wu et al.'s retrieval scores from the needle lab, where it ran. No second reading of the scores: the
    lines and the overview come from the scan's one pass, and only the first rows' tile and the cells where a chosen
    key meets a chosen offset are computed again, from the queries, keys and log-sum-exps it kept. `progress(done,
    total)` hears of each layer."""
    if scan.verticals is None or scan.slashes is None:
        raise ValueError("This scan has no verticals and slashes (made by an older attnviz): scan the text again.")
    n, layers, heads = len(scan), scan.layers, scan.heads
    causal = scan.architecture.causal
    long_from = min(n, max(rules.sinks + rules.recent, rules.budget if causal else 0))
    offsets = np.arange(-(n - 1), n)  # (2n − 1,) the slashes' offsets
    fields = {name: np.zeros((layers, heads)) for name in ("sink", "recent", "distant", "previous", "local")}
    recalls = {p: np.zeros((layers, heads)) for p in PATTERNS} if causal else {}
    width = long_from if causal else n  # the keys the rows before the long ones may read
    for layer in range(layers):
        for head in range(heads):
            early = (scan.tile(layer, head, range(0, long_from), range(0, width)).astype(np.float64) if long_from
                     else np.zeros((0, width)))  # (R, width) the weights of the rows before the long ones
            found = _head(scan, layer, head, early, offsets, rules, causal)
            for name, value in found.items():
                (recalls if name in PATTERNS else fields)[name][layer, head] = value
        if progress is not None:
            progress(layer + 1, layers)
    entropy = scan.entropy[:, :, long_from if long_from < n else 0:].mean(-1).astype(np.float64)  # (L, H)
    return Census(n, long_from, fields["sink"], fields["recent"], fields["distant"], fields["previous"],
                  fields["local"], entropy, recalls, None if wu is None else np.asarray(wu, np.float64), rules,
                  scan.architecture.heads // scan.architecture.kv_heads)


def _head(scan, layer: int, head: int, early: np.ndarray, offsets: np.ndarray, rules: Rules, causal: bool) -> dict:
    """One head's numbers (see census) from its lines, its early rows' weights (R, c) on keys 0 … c − 1 (all they
    read) and its overview."""
    n = len(scan)
    verticals = scan.verticals[layer, head].astype(np.float64)  # (n,)
    slashes = scan.slashes[layer, head].astype(np.float64)  # (2n − 1,)
    R = early.shape[0]
    early_offsets = np.arange(R)[:, None] - np.arange(early.shape[1])[None, :]  # (R, c) i − j
    mass = slashes.sum()  # every row's weight: n, less a learned sink's shares
    long_mass = mass - early.sum()  # (the long rows')
    long_rows = n - R

    def share(part: float) -> float:
        return 0.0 if long_rows == 0 or long_mass <= 0 else float(part / long_mass)
    sink_mass = verticals[: rules.sinks].sum() - early[:, : rules.sinks].sum()
    band = (offsets >= 0) & (offsets < rules.recent)  # (2n − 1,)
    recent_mass = slashes[band].sum() - early[(early_offsets >= 0) & (early_offsets < rules.recent)].sum()
    found = {"sink": share(sink_mass), "recent": share(recent_mass)}
    found["distant"] = max(0.0, 1.0 - found["sink"] - found["recent"]) if long_rows else 0.0
    found["previous"] = float(slashes[n] / max(n - 1, 1)) if n > 1 else 0.0  # offset 1, at 1 + n − 1
    found["local"] = float(slashes[(offsets >= 0) & (offsets < rules.local_span)].sum() / n)
    if causal:
        found.update(_recalls(scan, layer, head, early, verticals, slashes, offsets, rules, long_mass))
    return found


def _recalls(scan, layer: int, head: int, early: np.ndarray, verticals: np.ndarray, slashes: np.ndarray,
             offsets: np.ndarray, rules: Rules, long_mass: float) -> dict[str, float]:
    """MInference's three patterns' recall of the long rows' weight at rules.budget keys a query (a decoder's head)."""
    n, R, budget = len(scan), early.shape[0], rules.budget
    if n <= R or long_mass <= 0:
        return {p: 1.0 for p in PATTERNS}  # every row reads within the budget
    early_offsets = np.arange(R)[:, None] - np.arange(early.shape[1])[None, :]  # (R, c)
    # A-shape: the first `sinks` keys and the last budget − sinks
    window = budget - rules.sinks
    sink_mass = verticals[: rules.sinks].sum() - early[:, : rules.sinks].sum()
    band = (offsets >= 0) & (offsets < window)
    window_mass = slashes[band].sum() - early[(early_offsets >= 0) & (early_offsets < window)].sum()
    a_shape = (sink_mass + window_mass) / long_mass  # long rows q ≥ budget: the two never meet
    # vertical-slash: the keys and offsets with the most weight in the long rows, less the cells where both meet
    long_verticals = verticals.copy()  # (n,)
    long_verticals[: early.shape[1]] -= early.sum(0)
    long_slashes = slashes - np.bincount((early_offsets + n - 1).ravel(), early.ravel(), 2 * n - 1)  # (2n − 1,)
    keys = _ranked(long_verticals)[: budget // 4]  # (v,)
    causal = offsets >= 0
    chosen = _ranked(np.where(causal, long_slashes, -1.0))[: budget - budget // 4]
    chosen = chosen[causal[chosen]] - (n - 1)  # (s,) the offsets
    both = _met(scan, layer, head, keys, chosen, R)
    vertical_slash = (long_verticals[keys].sum() + long_slashes[chosen + n - 1].sum() - both) / long_mass
    # block-sparse: each block of long queries keeps its budget / block strongest blocks of keys
    block = scan.block
    overview = scan.overview[layer, head].astype(np.float64)  # (B, B) mean weight of a block's queries
    first = -(-R // block)  # the first block of queries wholly in the long rows
    if first >= overview.shape[0]:
        block_sparse = 1.0
    else:
        kept = max(1, budget // block)
        strongest = -np.sort(-overview[first:], axis=-1)[:, :kept].sum(-1)  # (B′,) per block, each query's mean
        sizes = np.array([min(block, n - a * block) for a in range(first, overview.shape[0])], np.float64)
        block_sparse = float((strongest * sizes).sum() / overview[first:].sum(-1).dot(sizes))
    return {"a_shape": float(min(1.0, a_shape)), "vertical_slash": float(min(1.0, max(0.0, vertical_slash))),
            "block_sparse": float(min(1.0, block_sparse))}


def _ranked(sums: np.ndarray) -> np.ndarray:
    """The indices of `sums` from the most weight to the least, equals (to 5 digits of the largest: the float32 sums'
    rounding is below that) lowest first: a head whose rows spread evenly ties many keys and offsets, and which of
    them is chosen changes where a key and an offset meet."""
    largest = float(np.abs(sums).max()) or 1.0
    return np.argsort(-np.round(sums / largest, 5), kind="stable")


def _met(scan, layer: int, head: int, keys: np.ndarray, offsets: np.ndarray, first_row: int) -> float:
    """Σ α[k + d, k] over the chosen keys k and offsets d with first_row ≤ k + d < n: the cells a vertical and a
    slash both hold, from the kept queries, keys and log-sum-exps. Where the family shapes its scores (ALiBi, a soft
    cap) or hides keys by a window, each cell's key is taken as a tile of its own column."""
    n = len(scan)
    rows = keys[:, None] + offsets[None, :]  # (v, s)
    inside = (rows >= first_row) & (rows < n)
    q, k = rows[inside], np.broadcast_to(keys[:, None], rows.shape)[inside]  # (m,) each
    if q.size == 0:
        return 0.0
    arch = scan.architecture
    plain = not engine_rules.shaping(arch) and not arch.relative_span and engine_rules.keys(arch, layer).window is None
    if plain:  # float32 products, as the scan's own: each cell's weight within float32's rounding of its score
        query = scan.queries[layer][head].index_select(0, torch.from_numpy(q))  # (m, dh), scaled by 1/√dh
        key = scan.keys[layer][arch.kv_head(head)].index_select(0, torch.from_numpy(k))  # (m, dh)
        scores = (query * key).sum(-1).double().numpy()  # (m,)
        return float(np.exp(scores - scan.normalisers[layer, head, q]).sum())
    total = 0.0
    for key_at in np.unique(k):
        column = scan.tile(layer, head, range(0, n), range(int(key_at), int(key_at) + 1))[:, 0]  # (n,)
        total += float(column[q[k == key_at]].astype(np.float64).sum())
    return total


def with_rules(found: Census, **changed) -> Census:
    """The census with other thresholds (the numbers stay: a threshold changes only the classes)."""
    return dataclasses.replace(found, rules=dataclasses.replace(found.rules, **changed))


FORMAT = 1  # a kept census's layout and the shares' definitions: a change here makes every kept file stale
FIELDS = ("sink", "recent", "distant", "previous", "local", "entropy")


def save(found: Census, path) -> None:
    """The census as a .npz of plain arrays (read back with allow_pickle=False), written whole or not at all."""
    import json
    import os
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(found, name) for name in FIELDS} | {f"recall_{p}": r for p, r in found.recalls.items()}
    if found.wu is not None:
        arrays["wu"] = found.wu
    meta = json.dumps({"format": FORMAT, "n": found.n, "long_from": found.long_from, "kv_group": found.kv_group,
                       "rules": dataclasses.asdict(found.rules)})
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    with open(partial, "wb") as file:
        np.savez(file, meta=np.array(meta), **arrays)
    os.replace(partial, path)


def load(path) -> Census | None:
    """A census save() wrote, or None where the file is missing, of another FORMAT, or not one."""
    import json

    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("format") != FORMAT:
                return None
            arrays = {name: data[name].astype(np.float64) for name in data.files if name != "meta"}
        recalls = {p: arrays[f"recall_{p}"] for p in PATTERNS if f"recall_{p}" in arrays}
        return Census(int(meta["n"]), int(meta["long_from"]), *(arrays[name] for name in FIELDS), recalls,
                      arrays.get("wu"), Rules(**meta["rules"]), int(meta["kv_group"]))
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
        return None
