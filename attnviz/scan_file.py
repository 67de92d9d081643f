"""A scan as one open file that another tool reads without attnviz (docs/scan-file.md): safetensors, every head's
summaries as named tensors and what they were made from (the model, its revision, the text's hash, the pieces, the
block size, attnviz's version) as the header's metadata.

Why safetensors: a scan is a handful of dense arrays of several dimensions (L, H, n, s), not a table, so Parquet
would flatten them into columns and lose their shapes; NPZ is a zip of .npy files whose readers outside numpy are
few, and whose object arrays load by unpickling. safetensors is a JSON header and raw little-endian arrays: its
package reads it in Python (numpy, torch, JAX), Rust and JavaScript, a reader of a few lines does the rest, a file
cannot run code, and the model files of the same community are already in it.

Any tile's exact weights come back from the model and the text: w_ij = exp(s_ij − lse_i), s_ij the head's score of
key j from query i (q·k/√dh with the model's own position rules, −∞ where its mask hides the key) and lse_i the row's
log-sum-exp, which the file keeps in float64.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from dataclasses import dataclass

import numpy as np

FORMAT = "attnviz-scan"
LAYOUT = 1  # a change to the names, shapes or meanings below makes a new layout
MAX_BYTES = 2**31  # a file past this is refused before it is read
DEFINITIONS = {
    "overview": "(L, H, B, B) float32: the mean over the queries of block a of the weight on the keys of block b, "
                "B = ceil(n / block); each row sums to 1 (1 minus a learned sink's share)",
    "sink": "(L, H) float32: the mean over queries q >= 1 of the weight on piece 0",
    "entropy": "(L, H, n) float32: each query's -sum_k w log w, in nats (a learned sink counted as one more outcome)",
    "strongest_keys": "(L, H, n, s) int16 or int32: each query's strongest keys, strongest first",
    "strongest_weights": "(L, H, n, s) float32: their weights",
    "lse": "(L, H, n) float64: each query's log sum_k exp(s_qk) over the keys it may read; w_qk = exp(s_qk - lse_q)",
    "ids": "(n,) int64: the pieces, the model's own vocabulary ids",
    "next_logits": "(vocab,) float32: a decoder's logits after the last piece (absent for an encoder)",
    "verticals": "(L, H, n) float32: each key's weight summed over the queries",
    "slashes": "(L, H, 2n - 1) float32: each offset d = i - j's weight summed over the queries, d at d + n - 1",
    "census.sink": "(L, H) float32: the share of a long row's weight on the first `sinks` pieces (census_rules)",
    "census.recent": "(L, H) float32: on the `recent` pieces up to the query",
    "census.distant": "(L, H) float32: beyond both",
    "census.previous": "(L, H) float32: the share of a row's weight on the piece before",
    "census.local": "(L, H) float32: within `local_span` pieces up to the query",
    "census.entropy": "(L, H) float32: a long row's mean entropy, nats",
    "census.a_shape": "(L, H) float32: MInference's A-shape's recall of the long rows' weight at `budget` keys (a decoder's)",
    "census.vertical_slash": "(L, H) float32: vertical-slash's, budget / 4 keys and 3 budget / 4 offsets",
    "census.block_sparse": "(L, H) float32: block-sparse's, budget / block blocks of keys a block of queries",
    "census.wu": "(L, H) float32: Wu et al.'s retrieval score from the needle lab (absent where it did not run)",
    "census.class": "(L, H) int8: each head's class, an index into census_classes, under census_rules",
}


@dataclass(frozen=True)
class ScanFile:
    """A scan file read back: `meta` (the header's strings, decoded where they hold JSON) and `arrays` (the tensors)."""

    meta: dict
    arrays: dict[str, np.ndarray]

    def __getattr__(self, name: str):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def weights(self, layer: int, head: int, rows: range, scores: np.ndarray) -> np.ndarray:
        """A tile's weights (len(rows), c) from the head's scores of those rows (len(rows), c), −inf where hidden."""
        return np.exp(np.asarray(scores, np.float64) - self.arrays["lse"][layer, head, rows.start:rows.stop, None])


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(scan, model, found=None) -> bytes:
    """The scan (attnviz.models.scan.Scan) of `model` as the bytes of a scan file (layout LAYOUT), with its census
    (`found`, attnviz.models.census.Census; taken here where not given)."""
    from attnviz.models import census
    from safetensors.numpy import save

    from attnviz import __version__
    from attnviz.heads import model_key

    try:
        revision = model_key(model)
    except Exception:  # noqa: BLE001  a model with no files of its own to key (built in memory): said as unknown
        revision = ""
    arrays = {"overview": scan.overview, "sink": scan.sink, "entropy": scan.entropy, "strongest_keys": scan.strongest_keys,
              "strongest_weights": scan.strongest_weights, "lse": scan.normalisers,
              "ids": np.asarray(scan.pieces.ids, np.int64)}
    if scan.next_logits is not None:
        arrays["next_logits"] = scan.next_logits
    if scan.verticals is not None:
        found = found if found is not None else census.census(scan)
        arrays.update(verticals=scan.verticals, slashes=scan.slashes)
        for name in ("sink", "recent", "distant", "previous", "local", "entropy"):
            arrays[f"census.{name}"] = getattr(found, name).astype(np.float32)
        for name, values in found.recalls.items():
            arrays[f"census.{name}"] = values.astype(np.float32)
        if found.wu is not None:
            arrays["census.wu"] = found.wu.astype(np.float32)
        arrays["census.class"] = found.classify().astype(np.int8)
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    meta = {"format": FORMAT, "layout": str(LAYOUT), "attnviz": __version__, "model": scan.model,
            "revision": revision, "family": model.family, "kind": model.kind, "text_sha256": text_digest(scan.pieces.text),
            "n": str(len(scan)), "layers": str(scan.layers), "heads": str(scan.heads), "block": str(scan.block),
            "strongest": str(scan.strongest_keys.shape[-1]), "pieces": json.dumps(scan.pieces.labels(), ensure_ascii=False),
            "definitions": json.dumps({k: v for k, v in DEFINITIONS.items() if k in arrays})}
    if found is not None:
        meta.update(census_rules=json.dumps(dataclasses.asdict(found.rules)), census_classes=json.dumps(census.CLASSES),
                    census_statements=json.dumps(found.rules.statements()), census_long_from=str(found.long_from))
    return save(arrays, metadata=meta)


def header(data: bytes) -> dict:
    """The safetensors header of `data` (its JSON), checked as far as this layout needs. ValueError, in words."""
    if len(data) < 8:
        raise ValueError("This is not a scan file: it is shorter than a safetensors header.")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8 or size > 100 * 2**20:
        raise ValueError("This is not a scan file: its header's length points past the file.")
    try:
        found = json.loads(data[8:8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("This is not a scan file: its header is not JSON.") from None
    if not isinstance(found, dict) or not isinstance(found.get("__metadata__"), dict):
        raise ValueError("This is not a scan file: its header has no metadata.")
    return found


def read(source) -> ScanFile:
    """A scan file from a path or its bytes: parsed, never unpickled. ValueError, in words, for a file that is not
    one, of another layout, or whose arrays do not fit each other."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    data = source if isinstance(source, (bytes, bytearray)) else _read_bytes(source)
    meta = dict(header(data)["__metadata__"])
    if meta.get("format") != FORMAT:
        raise ValueError(f"This is not a scan file: its format is {str(meta.get('format'))[:40]!r}, not {FORMAT!r}.")
    if meta.get("layout") != str(LAYOUT):
        raise ValueError(f"This scan file has layout {str(meta.get('layout'))[:10]!r}; this attnviz reads layout "
                         f"{LAYOUT}.")
    try:
        arrays = load(bytes(data))
    except SafetensorError as error:
        raise ValueError(f"This scan file's arrays cannot be read: {error}.") from None
    for name in ("pieces", "definitions", "census_rules", "census_classes", "census_statements"):
        if name not in meta:
            continue
        try:
            meta[name] = json.loads(meta[name])
        except json.JSONDecodeError:
            raise ValueError(f"This scan file's {name} are not JSON.") from None
    _check(meta, arrays)
    return ScanFile(meta, arrays)


def _read_bytes(path) -> bytes:
    from pathlib import Path

    path = Path(path)
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path.name} is larger than a scan file of any model attnviz reads ({MAX_BYTES // 2**30} GiB).")
    return path.read_bytes()


def _check(meta: dict, arrays: dict[str, np.ndarray]) -> None:
    try:
        n, layers, heads, block, kept = (int(meta[k]) for k in ("n", "layers", "heads", "block", "strongest"))
    except (KeyError, ValueError):
        raise ValueError("This scan file does not say its size (n, layers, heads, block, strongest) in whole numbers.") from None
    count = -(-n // block) if block > 0 else -1
    want = {"overview": (layers, heads, count, count), "sink": (layers, heads), "entropy": (layers, heads, n),
            "strongest_keys": (layers, heads, n, kept), "strongest_weights": (layers, heads, n, kept), "lse": (layers, heads, n),
            "ids": (n,)}
    for name, shape in want.items():
        if name not in arrays:
            raise ValueError(f"This scan file has no {name}.")
        if arrays[name].shape != shape:
            raise ValueError(f"This scan file's {name} is {arrays[name].shape}, not {shape} as its metadata says.")
    if not isinstance(meta.get("pieces"), list) or len(meta["pieces"]) != n:
        raise ValueError(f"This scan file's pieces are not a list of its {n:,} pieces.")
