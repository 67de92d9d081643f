"""The key–value database of our notes: exact lookup, hard (one-hot) retrieval and soft (weighted) retrieval.

Records are (key, value) pairs. Keys are encoded to vectors; a query is encoded the same way and
scored against every key with the engine's `attend`.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnviz.functional import attend, entropy, make_scorer
from attnviz.embeddings import tokenize

ENCODERS = ("glove", "ngram", "numeric")
SIMILARITIES = ("scaled_dot", "cosine", "gaussian")
VALUE_KINDS = ("numeric", "categorical", "word", "text")
NGRAM_DIM = 512
MAX_RECORDS = 2000
MAX_CSV_BYTES = 1024 * 1024
# Numeric keys, values and queries stay within ±1e15: the engine computes in float32 (up to 3.4e38), and a
# Gaussian score squares a difference of two such numbers and divides it by 2σ²τ (σ, τ down to 0.05, 0.01).
NUMBER_LIMIT = 1e15
NUMBER_RULE = "a number from -1e15 to 1e15"

# name: (records, key encoder, similarity, value kind, example query)
PRESETS = {
    "Surnames → first names": (
        [("Zhang", "Aston"), ("Lipton", "Zachary"), ("Li", "Mu"), ("Smola", "Alex"), ("Hu", "Rachel"), ("Werness", "Brent")],
        "ngram", "cosine", "text", "Li",
    ),
    "Country → capital": (
        [("france", "paris"), ("germany", "berlin"), ("italy", "rome"), ("japan", "tokyo"), ("egypt", "cairo"),
         ("canada", "ottawa"), ("spain", "madrid")],
        "glove", "cosine", "word", "greece",
    ),
    "GPA → starting salary": (
        [("2.0", "48000"), ("2.5", "52000"), ("3.0", "58000"), ("3.3", "61000"), ("3.5", "64000"), ("3.7", "68000"),
         ("4.0", "75000")],
        "numeric", "gaussian", "numeric", "3.4",
    ),
    "Word → class": (
        [("apple", "fruit"), ("banana", "fruit"), ("cherry", "fruit"), ("carrot", "vegetable"),
         ("potato", "vegetable"), ("onion", "vegetable"), ("salmon", "fish"), ("tuna", "fish")],
        "glove", "cosine", "categorical", "pear",
    ),
}


class RecordError(ValueError):
    """Records that cannot be used; the message says which and why."""


def records_frame(pairs) -> pd.DataFrame:
    return pd.DataFrame(pairs, columns=["key", "value"])


def half_filled(frame: pd.DataFrame) -> list[int]:
    """The rows (from 0) with a key or a value but not both, once stripped: a record still being typed."""
    stripped = frame.loc[:, ["key", "value"]].astype("string").fillna("").apply(lambda col: col.str.strip())
    return [i for i, (key, value) in enumerate(zip(stripped.key, stripped.value)) if (key == "") != (value == "")]


def clean_records(frame: pd.DataFrame, *, numeric_keys: bool, numeric_values: bool) -> pd.DataFrame:
    """Strip the table, drop fully empty rows, and say exactly which row is unusable."""
    frame = frame.loc[:, ["key", "value"]].astype("string").fillna("")
    frame = frame.apply(lambda col: col.str.strip())
    frame = frame[(frame.key != "") | (frame.value != "")].reset_index(drop=True)
    if frame.empty:
        raise RecordError("The table is empty. Add at least one record (a key and its value).")
    if len(frame) > MAX_RECORDS:
        raise RecordError(f"The table has {len(frame):,} records; the limit is {MAX_RECORDS:,}.")
    for column, numeric in (("key", numeric_keys), ("value", numeric_values)):
        empty = frame.index[frame[column] == ""].tolist()
        if empty:
            raise RecordError(f"Row {empty[0] + 1} has an empty {column}. Fill it in or delete the row.")
        if numeric:
            bad = [i for i, v in enumerate(frame[column]) if not is_number(v)]
            if bad:
                raise RecordError(f"Row {bad[0] + 1}: the {column} '{frame[column][bad[0]]}' is not {NUMBER_RULE}.")
    return frame


def is_number(text: str) -> bool:
    """True for a finite number within ±NUMBER_LIMIT."""
    try:
        return abs(float(text)) <= NUMBER_LIMIT  # False for NaN, inf and 1e400
    except (ValueError, TypeError):
        return False


def parse_csv(data: bytes) -> pd.DataFrame:
    """Records from an uploaded or pasted CSV: the first two columns are key and value."""
    if len(data) > MAX_CSV_BYTES:
        raise RecordError(f"The CSV is {len(data) / 1024:.0f} KiB; the limit is {MAX_CSV_BYTES // 1024} KiB.")
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, header=None)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as error:
        raise RecordError(f"Could not read the CSV: {error}") from error
    if frame.shape[1] < 2:
        raise RecordError("The CSV needs two columns: key, value.")
    frame = frame.iloc[:, :2]
    frame.columns = ["key", "value"]
    if frame.iloc[0].str.lower().tolist() == ["key", "value"]:
        frame = frame.iloc[1:]
    return frame.reset_index(drop=True)


# ---------------------------------------------------------------- key encoders


def ngram_vector(text: str, dim: int = NGRAM_DIM) -> np.ndarray:
    """Counts of the character 2- and 3-grams of "#text#", hashed into `dim` buckets, unit length.

    Names share n-grams with their own prefixes and misspellings, so they land close, whether or not
    GloVe knows them.
    """
    padded = f"#{text.lower()}#"
    vector = np.zeros(dim, np.float32)  # (dim,)
    for n in (2, 3):
        for i in range(len(padded) - n + 1):
            vector[zlib.crc32(padded[i : i + n].encode("utf-8")) % dim] += 1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


def glove_vector(text: str, kv) -> tuple[np.ndarray, bool]:
    """Mean of the GloVe vectors of the text's words; (zeros, False) when GloVe knows none of them."""
    known = [kv[t] for t in tokenize(text) if t in kv.key_to_index]
    if not known:
        return np.zeros(kv.vector_size, np.float32), False
    return np.mean(known, axis=0).astype(np.float32), True


def encode(texts: list[str], encoder: str, kv=None) -> tuple[np.ndarray, list[bool]]:
    """(vectors (n, d), known flags) for keys or queries."""
    if encoder == "ngram":
        return np.stack([ngram_vector(t) for t in texts]), [True] * len(texts)
    if encoder == "numeric":
        values = [float(t) if is_number(t) else None for t in texts]
        return np.array([[v or 0.0] for v in values], np.float32), [v is not None for v in values]
    if encoder == "glove":
        pairs = [glove_vector(t, kv) for t in texts]
        return np.stack([p[0] for p in pairs]), [p[1] for p in pairs]
    raise ValueError(f"Unknown key encoder '{encoder}'. Choose one of: {', '.join(ENCODERS)}.")


# ---------------------------------------------------------------- retrieval


def value_matrix(values: list[str], kind: str, kv=None) -> tuple[np.ndarray, list[str]]:
    """V (N, dv) and the names of its columns for each value kind."""
    if kind == "numeric":
        return np.array([[float(v)] for v in values], np.float32), ["value"]
    if kind == "categorical":
        classes = sorted(set(values))
        return np.eye(len(classes), dtype=np.float32)[[classes.index(v) for v in values]], classes
    if kind == "word":
        return encode(values, "glove", kv)[0], [f"d{i}" for i in range(kv.vector_size)]
    if kind == "text":
        return np.eye(len(values), dtype=np.float32), [f"#{i} {v}" for i, v in enumerate(values)]
    raise ValueError(f"Unknown value kind '{kind}'. Choose one of: {', '.join(VALUE_KINDS)}.")


@dataclass
class Retrieval:
    exact: list[int]  # record indices whose key equals the query exactly (duplicates allowed)
    hard_weights: np.ndarray  # (M, N) one-hot
    soft_weights: np.ndarray  # (M, N) rows sum to 1
    hard_output: np.ndarray  # (M, dv)
    soft_output: np.ndarray  # (M, dv)
    scores: np.ndarray  # (M, N)
    query_vectors: np.ndarray  # (M, d)
    key_vectors: np.ndarray  # (N, d)
    query_known: list[bool]


def exact_matches(query: str, keys: list[str], numeric: bool) -> list[int]:
    if numeric:
        return [i for i, k in enumerate(keys) if is_number(query) and float(k) == float(query)]
    return [i for i, k in enumerate(keys) if k.strip().casefold() == query.strip().casefold()]


def retrieve(
    queries: list[str], keys: list[str], values: np.ndarray, *, encoder: str, similarity: str,
    temperature: float, sigma: float = 1.0, kv=None,
) -> Retrieval:
    """Hard and soft retrieval of M queries over N records at once: weights (M, N), outputs (M, dv)."""
    key_vectors, _ = encode(keys, encoder, kv)  # (N, d)
    query_vectors, known = encode(queries, encoder, kv)  # (M, d)
    q, k, v = (torch.from_numpy(np.asarray(a, np.float32)) for a in (query_vectors, key_vectors, values))
    score_fn = make_scorer(similarity, k.shape[-1], k.shape[-1], sigma=sigma)
    soft = attend(q, k, v, scoring=score_fn, temperature=temperature)  # weights (M, N)
    hard = attend(q, k, v, scoring=score_fn, hard=True)
    return Retrieval(
        exact=exact_matches(queries[0], keys, encoder == "numeric"),
        hard_weights=hard.weights.numpy(), soft_weights=soft.weights.numpy(),
        hard_output=hard.output.numpy(), soft_output=soft.output.numpy(), scores=soft.scores.numpy(),
        query_vectors=query_vectors, key_vectors=key_vectors, query_known=known,
    )


def entropy_curve(scores: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """Entropy (nats) of softmax(scores / τ) for each τ; scores (N,) -> (len(τ),)."""
    logits = torch.from_numpy(np.asarray(scores, np.float64))[None, :] / torch.from_numpy(temperatures)[:, None]  # (T, N)
    return entropy(torch.softmax(logits, -1)).numpy()  # (T,)


def pca_2d(points: np.ndarray) -> np.ndarray:
    """Project rows (n, d) onto their first two principal components (n, 2); pads with zeros when d < 2."""
    points = np.asarray(points, np.float64)  # (n, d) float64: squares of float32-sized numbers stay finite
    centred = points - points.mean(0)  # (n, d)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ vt[:2].T  # (n, ≤2)
    return np.pad(projected, ((0, 0), (0, 2 - projected.shape[1])))
