"""The community's files of per-head classes, both ways: a census (attnviz.models.census) written in each layout, and
each layout read back as numbers per head, and drawn beside what a document shows (beside: a file of any layout
set beside a census of the same model).

- DuoAttention's `full_attention_heads.tsv`: one line a layer, one tab-separated number a key/value head, in [0, 1]:
  how much the head needs its full KV cache (its learned gate; 1 a retrieval head, 0 a streaming head), with a
  `config.json` of its sink_size and recent_size. Written from the census: each key/value head's largest distant
  share over the query heads that read it.
- MInference's `*_best_pattern.json`: a list with a dict a layer, head (a string) → [pattern, size, size, score], the
  pattern "stream_llm" (sizes: the first keys and the last), "vertical_and_slash" (the vertical lines and the slashes)
  or "block_sparse" (the blocks kept, of how many keys). Written from the census: each head's best pattern at its
  budget, its recall as the score.
- Retrieval_Head's `head_score/*.json`: one line of JSON, "layer-head" → the retrieval scores of each detection, a
  head's score their mean. Written from the needle lab's scores (Wu et al.'s definition).

Each reader parses (never unpickles) and says in words what is wrong with a file that is not in its layout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from attnviz.models.census import CLASSES, PATTERN_NAMES, PATTERNS, Census

MINFERENCE_NAMES = {"a_shape": "stream_llm", "vertical_slash": "vertical_and_slash", "block_sparse": "block_sparse"}
MAX_CHARS = 20_000_000  # a file of any model's heads is far smaller


def duo_tsv(found: Census) -> str:
    """DuoAttention's full_attention_heads.tsv of the census: (layers, key/value heads)."""
    needs = found.distant.reshape(found.distant.shape[0], -1, found.kv_group).max(-1)  # (L, KV)
    return "".join("\t".join(f"{float(v):.10f}" for v in np.clip(row, 0, 1)) + "\n" for row in needs)


def duo_config(found: Census) -> str:
    """The config.json beside it: the sinks and the recent window the census measured with."""
    return json.dumps({"sink_size": found.rules.sinks, "recent_size": found.rules.recent})


def read_duo_tsv(text: str) -> np.ndarray:
    """(layers, key/value heads) from a full_attention_heads.tsv, clipped to [0, 1] as DuoAttention loads it."""
    rows = [line.split("\t") for line in _text(text).strip().splitlines() if line.strip()]
    if not rows:
        raise ValueError("This file has no rows: a full_attention_heads.tsv has one line a layer.")
    if len({len(row) for row in rows}) != 1:
        raise ValueError("This file's lines have different numbers of values: a full_attention_heads.tsv has one "
                         "tab-separated value for each key/value head on every line.")
    try:
        values = np.array([[float(v) for v in row] for row in rows])
    except ValueError:
        raise ValueError("This file holds something that is not a number: a full_attention_heads.tsv holds only "
                         "tab-separated numbers.") from None
    if not np.isfinite(values).all():
        raise ValueError("This file holds a value that is not finite (nan or inf).")
    return np.clip(values, 0, 1)


def minference_json(found: Census, block: int) -> str:
    """MInference's best-pattern JSON of a decoder's census: each head's best pattern at the census's budget."""
    if not found.recalls:
        raise ValueError("MInference's patterns are a decoder's: this census is an encoder's.")
    budget, sinks = found.rules.budget, found.rules.sinks
    sizes = {"a_shape": (sinks, budget - sinks), "vertical_slash": (budget // 4, budget - budget // 4),
             "block_sparse": (max(1, budget // block), block)}
    best = found.best_pattern
    layers = []
    for layer in range(best.shape[0]):
        heads = {}
        for head in range(best.shape[1]):
            pattern = PATTERNS[best[layer, head]]
            heads[str(head)] = [MINFERENCE_NAMES[pattern], *sizes[pattern],
                                round(float(found.recalls[pattern][layer, head]), 3)]
        layers.append(heads)
    return json.dumps(layers)


def read_minference_json(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(the index into PATTERNS of each head's pattern, its score), each (layers, heads), from a best-pattern JSON."""
    found = _json(text)
    names = {v: k for k, v in MINFERENCE_NAMES.items()}
    if not isinstance(found, list) or not found or not all(isinstance(layer, dict) and layer for layer in found):
        raise ValueError("This file is not a MInference best-pattern list: a list with a dict of heads a layer.")
    heads = {len(layer) for layer in found}
    if len(heads) != 1:
        raise ValueError("This file's layers name different numbers of heads.")
    count = heads.pop()
    pattern, score = np.zeros((len(found), count), int), np.zeros((len(found), count))
    for l, layer in enumerate(found):
        for key, entry in layer.items():
            if not (isinstance(key, str) and key.isdigit() and int(key) < count):
                raise ValueError(f"Layer {l} names a head {str(key)[:20]!r}, not one of 0 to {count - 1}.")
            if (not isinstance(entry, list) or len(entry) != 4 or entry[0] not in names
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in entry[1:])):
                raise ValueError(f"Layer {l}, head {key}: an entry is [pattern, size, size, score], the pattern one of "
                                 f"{', '.join(MINFERENCE_NAMES.values())}; this one is {str(entry)[:60]}.")
            pattern[l, int(key)] = PATTERNS.index(names[entry[0]])
            score[l, int(key)] = float(entry[3])
    if not np.isfinite(score).all():
        raise ValueError("This file holds a score that is not finite.")
    return pattern, score


def retrieval_head_json(wu: np.ndarray) -> str:
    """Retrieval_Head's head_score JSON of the needle lab's scores (L, H): one detection a head, on one line."""
    return json.dumps({f"{l}-{h}": [round(float(wu[l, h]), 6)] for l in range(wu.shape[0]) for h in range(wu.shape[1])})


def read_retrieval_head_json(text: str, layers: int | None = None, heads: int | None = None) -> np.ndarray:
    """(layers, heads) of each head's mean retrieval score from a head_score JSON (sized by the heads it names, or by
    `layers` and `heads` where given; a head it does not name scores 0)."""
    found = _json(text)
    if not isinstance(found, dict) or not found:
        raise ValueError("This file is not a Retrieval_Head score file: a dict of \"layer-head\" → scores.")
    scores = {}
    for key, values in found.items():
        parts = key.split("-") if isinstance(key, str) else []
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"This file names a head {str(key)[:20]!r}; Retrieval_Head names them \"layer-head\".")
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)):
            raise ValueError(f"Head {key}'s scores are not a list of numbers.")
        scores[int(parts[0]), int(parts[1])] = float(np.mean(values))
    shape = (layers or 1 + max(l for l, _ in scores), heads or 1 + max(h for _, h in scores))
    if any(l >= shape[0] or h >= shape[1] for l, h in scores):
        raise ValueError(f"This file names heads past this model's {shape[0]} layers × {shape[1]} heads: it is "
                         "another model's.")
    out = np.zeros(shape)
    for (l, h), value in scores.items():
        out[l, h] = value
    if not np.isfinite(out).all():
        raise ValueError("This file holds a score that is not finite.")
    return out


def _text(text) -> str:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("This file is not UTF-8 text.") from None
    if len(text) > MAX_CHARS:
        raise ValueError(f"This file has {len(text):,} characters, more than any model's heads need.")
    return text


def _json(text):
    try:
        return json.loads(_text(text))
    except json.JSONDecodeError as error:
        raise ValueError(f"This file is not JSON ({error.msg}, line {error.lineno}).") from None


LAYOUTS = ("DuoAttention", "MInference", "Retrieval_Head")


@dataclass(frozen=True)
class Beside:
    """A community file read beside a census of the same model: per query head (L, H), what the file says (`said`)
    and the same measure on this document (`shown`), both in [0, 1], with their short titles and what each is
    (`meaning`); `agree` (L, H) bool, where the two put a head in the same class (the file's retrieval heads and
    this document's; MInference: the same best pattern); and the counts in a sentence."""

    layout: str
    said: np.ndarray
    shown: np.ndarray
    said_title: str
    shown_title: str
    meaning: str
    agree: np.ndarray
    sentence: str


def layout_of(name: str, text) -> str:
    """Which of LAYOUTS a file is, from its name and its first character (a .tsv is DuoAttention's; a JSON list
    MInference's; a JSON object Retrieval_Head's)."""
    head = _text(text).lstrip()[:1]
    if name.lower().endswith(".tsv") or (head and head not in "[{"):
        return "DuoAttention"
    if head == "[":
        return "MInference"
    if head == "{":
        return "Retrieval_Head"
    raise ValueError("This file is empty: a full_attention_heads.tsv, a best-pattern JSON or a head_score JSON has "
                     "one head's number at least.")


def beside(found: Census, name: str, text) -> Beside:
    """The file `name` (its contents `text`, bytes or str) in any of LAYOUTS, read and set beside the census
    `found` of the same model's heads. ValueError, in words, for a file in no layout or of another model's shape."""
    layout = layout_of(name, text)
    layers, heads = found.sink.shape
    retrieval = found.classify() == CLASSES.index("retrieval")  # (L, H)
    if layout == "DuoAttention":
        gates = read_duo_tsv(text)  # (L, KV)
        _same_shape(gates.shape, (layers, heads // found.kv_group), "key/value heads")
        said = np.repeat(gates, found.kv_group, 1)  # (L, H) each query head its key/value head's gate
        marks = said >= 0.5
        sentence = (f"The file gives {int(marks.sum())} of {marks.size} heads a gate of 0.5 or more (their whole "
                    f"cache); this document puts {int(retrieval.sum())} in the retrieval class; {_both(marks, retrieval)}.")
        meaning = (f"The file's gate: 1 where a head needs its whole KV cache, 0 where its first sinks and recent "
                   f"window do. This document's: the share of each long row's weight beyond the first "
                   f"{found.rules.sinks} pieces and the {found.rules.recent} up to the query.")
        return Beside(layout, said, np.clip(found.distant, 0, 1), "The file: each head's gate",
                      "This document: the distant share", meaning, marks == retrieval, sentence)
    if layout == "MInference":
        if not found.recalls:
            raise ValueError("MInference's patterns are a decoder's: this model is an encoder.")
        pattern, score = read_minference_json(text)  # (L, H) each
        _same_shape(pattern.shape, (layers, heads), "heads")
        recall = np.stack([found.recalls[p] for p in PATTERNS])  # (3, L, H)
        mine = np.take_along_axis(recall, pattern[None], 0)[0]  # (L, H) this document's recall of the file's pattern
        same = pattern == found.best_pattern
        counts = ", ".join(f"{PATTERN_NAMES[p]} {int((pattern == i).sum())}" for i, p in enumerate(PATTERNS))
        sentence = (f"The file's patterns: {counts}. This document's best pattern at {found.rules.budget} keys is "
                    f"the file's for {int(same.sum())} of {same.size} heads.")
        meaning = (f"The file's score: what its search found for the pattern it chose. This document's: the share of "
                   f"each long row's weight that the file's pattern keeps at {found.rules.budget} keys a query.")
        return Beside(layout, np.clip(score, 0, 1), np.clip(mine, 0, 1), "The file: its pattern's score",
                      "This document: that pattern's recall", meaning, same, sentence)
    scores = read_retrieval_head_json(text, layers, heads)  # (L, H)
    marks = scores >= found.rules.wu
    shown, what, title = ((found.wu, "Wu et al.'s retrieval score, from the needle lab on the example pass-key "
                                     "document", "Wu et al.'s score") if found.wu is not None else
                          (found.distant, f"the share of each long row's weight beyond the first {found.rules.sinks} "
                           f"pieces and the {found.rules.recent} up to the query (the needle lab has not run)",
                           "the distant share"))
    sentence = (f"The file gives {int(marks.sum())} of {marks.size} heads a retrieval score of {found.rules.wu:g} or "
                f"more; this document puts {int(retrieval.sum())} in the retrieval class; {_both(marks, retrieval)}.")
    meaning = (f"The file's score: the share of a needle's pieces the head copied, its detections' mean (Wu et al.). "
               f"This document's: {what}.")
    return Beside(layout, np.clip(scores, 0, 1), np.clip(shown, 0, 1), "The file: each head's retrieval score",
                  f"This document: {title}", meaning, marks == retrieval, sentence)


def _same_shape(got: tuple[int, int], want: tuple[int, int], what: str) -> None:
    if tuple(got) != tuple(want):
        raise ValueError(f"This file is another model's: {got[0]} layers × {got[1]} {what}, where this model has "
                         f"{want[0]} × {want[1]}.")


def _both(marks: np.ndarray, retrieval: np.ndarray) -> str:
    both = int((marks & retrieval).sum())
    return f"{both} {'is' if both == 1 else 'are'} both"
