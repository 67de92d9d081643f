import struct

import numpy as np
import pytest

from attnviz.embeddings import (
    MAX_UPLOAD_BYTES, GloveMatrix, VectorFileError, embed, glove_files, load_uploaded, load_vectors, nearest_words,
    npy_row_blocks, tokenize, vectors_from_settings,
)

DOG = "When he saw his owner, the dog was happy, so he wagged his tail"
WORDS = {"cat": [1.0, 0.0, 0.5], "dog": [0.9, 0.1, 0.4], "café": [-1.0, 2.0, 0.25]}


def test_the_mapped_glove_matrix_answers_as_the_keyed_vectors_do(glove):
    """The first heatmap's GloVe (memory-mapped, no gensim) gives the KeyedVectors' words, vectors and norms, bit
    for bit, so a page's numbers do not change when the KeyedVectors take over."""
    matrix = GloveMatrix.load()
    assert len(matrix) == len(glove) and matrix.vector_size == glove.vector_size
    assert matrix.index_to_key == glove.index_to_key and isinstance(matrix.vectors, np.memmap)
    rows = np.random.default_rng(0).integers(0, len(glove), 500)
    assert np.array_equal(np.asarray(matrix.vectors[rows]), glove.vectors[rows])
    assert np.array_equal(matrix.norms, glove.norms)
    tokens = tokenize(DOG + " qzxvw")
    for oov in ("zero", "random", "drop"):
        a, b = embed(tokens, matrix, oov=oov, seed=5), embed(tokens, glove, oov=oov, seed=5)
        assert a.tokens == b.tokens and a.oov == b.oov and np.array_equal(a.vectors, b.vectors)
    near, keyed = nearest_words(matrix, glove["dog"] + glove["tail"], 8), nearest_words(glove, glove["dog"] + glove["tail"], 8)
    assert [w for w, _ in near] == [w for w, _ in keyed]
    assert np.allclose([c for _, c in near], [c for _, c in keyed], atol=1e-6)  # the product's sums run in another order


def test_real_glove_has_400000_words(glove):
    assert len(glove) == 400_000
    assert glove.vector_size == 50
    assert glove.norms is not None and glove.norms.shape == (400_000,)
    assert glove.most_similar("dog", topn=1)[0][0] == "cat"


def test_glove_rows_match_the_packaged_matrix_and_index(glove):
    import pyarrow.parquet as pq

    matrix_path, index_path = glove_files()
    matrix = np.load(matrix_path)  # (400000, 50), read whole by numpy: an independent reader
    words = pq.read_table(index_path).column("index").to_pylist()
    assert glove.index_to_key == words
    np.testing.assert_array_equal(glove.vectors, matrix)
    np.testing.assert_allclose(glove.norms, np.linalg.norm(matrix, axis=1), rtol=1e-6)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("rows", [1, 3, 7, 50])
def test_npy_row_blocks_reads_both_layouts(tmp_path, order, rows):
    matrix = np.asarray(np.arange(7 * 4, dtype=np.float32).reshape(7, 4), order=order)  # (7, 4)
    path = tmp_path / "m.npy"
    np.save(path, matrix)
    blocks = list(npy_row_blocks(path, rows))
    assert [start for start, _ in blocks] == list(range(0, 7, rows))
    np.testing.assert_array_equal(np.concatenate([block for _, block in blocks]), matrix)


def test_npy_row_blocks_rejects_truncated_and_object_files(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.ones((10, 3), dtype=np.float32))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(VectorFileError, match="ends early"):
        list(npy_row_blocks(path, 4))
    np.save(path, np.array([["a", None]], dtype=object))
    with pytest.raises(VectorFileError, match="not a 2-D matrix of numbers"):
        list(npy_row_blocks(path, 4))


def test_tokenizer_on_the_dog_sentence(glove):
    tokens = tokenize(DOG)
    assert tokens == ["when", "he", "saw", "his", "owner", ",", "the", "dog", "was", "happy", ",",
                      "so", "he", "wagged", "his", "tail"]
    assert all(t in glove.key_to_index for t in tokens)
    assert "," not in tokenize(DOG, drop_punctuation=True)


def test_tokenizer_splits_clitics_like_glove(glove):
    tokens = tokenize("The dog's owner didn't say \u201cI can\u2019t\u201d: $3.50... well-known")
    assert tokens == ["the", "dog", "'s", "owner", "did", "n't", "say", '"', "i", "ca", "n't", '"', ":",
                      "$", "3.50", "...", "well-known"]
    assert all(t in glove.key_to_index for t in tokens)


def test_tokenizer_handles_odd_characters():
    assert tokenize("") == [] and tokenize(" \n\t ") == []
    assert tokenize("a\u200bb\x00c") == ["abc"]  # zero-width and control characters vanish
    assert tokenize("<b>hi</b>") == ["<", "b", ">", "hi", "<", "/", "b", ">"]
    assert tokenize("ＤＯＧ 😀") == ["dog", "😀"]


def test_oov_policies(glove):
    tokens = ["the", "qzxjvwk", "dog", "qzxjvwk"]
    zero = embed(tokens, glove, oov="zero")
    assert zero.oov == [False, True, False, True]
    assert np.array_equal(zero.vectors[1], np.zeros(50)) and np.array_equal(zero.vectors[0], glove["the"])
    rand = embed(tokens, glove, oov="random", seed=1)
    assert np.array_equal(rand.vectors[1], rand.vectors[3])  # the same word gets the same vector
    assert np.linalg.norm(rand.vectors[1]) == pytest.approx(np.median(glove.norms), rel=1e-5)
    assert not np.array_equal(rand.vectors[1], embed(tokens, glove, oov="random", seed=2).vectors[1])
    dropped = embed(tokens, glove, oov="drop")
    assert dropped.tokens == ["the", "dog"] and dropped.vectors.shape == (2, 50) and dropped.oov == [False, False]
    with pytest.raises(ValueError, match="OOV policy"):
        embed(tokens, glove, oov="guess")


def _glove_text(path):
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in WORDS.items()), encoding="utf-8")


def _word2vec_text(path):
    path.write_text(f"{len(WORDS)} 3\n" + "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in WORDS.items()), encoding="utf-8")


def _word2vec_binary(path):
    # The word2vec C tool's layout: a text header, then per word "word " and float32 little-endian numbers.
    body = b"".join(w.encode() + b" " + struct.pack("<3f", *v) + b"\n" for w, v in WORDS.items())
    path.write_bytes(f"{len(WORDS)} 3\n".encode() + body)


@pytest.mark.parametrize("writer, suffix", [(_glove_text, ".txt"), (_word2vec_text, ".txt"), (_word2vec_binary, ".bin")])
def test_loads_small_vector_files(tmp_path, writer, suffix):
    path = tmp_path / f"vectors{suffix}"
    writer(path)
    kv = load_vectors(path)
    assert len(kv) == 3 and kv.vector_size == 3
    for word, vector in WORDS.items():
        np.testing.assert_allclose(kv[word], vector, rtol=1e-6)
    assert nearest_words(kv, np.array([1.0, 0.0, 0.5], np.float32), topn=1)[0][0] == "cat"


def test_upload_is_parsed_not_unpickled(tmp_path):
    path = tmp_path / "v.txt"
    _glove_text(path)
    kv = load_uploaded(path.read_bytes(), "mine.txt")
    assert set(kv.key_to_index) == set(WORDS)
    import pickle

    with pytest.raises(VectorFileError):
        load_uploaded(pickle.dumps({"cat": [1, 2, 3]}), "evil.bin")


@pytest.mark.parametrize("content, message", [
    (b"", "my vectors.txt is empty"),
    (b"cat 1 2 3\ndog 1 2\n", "Could not read my vectors.txt as glove vectors: .+"),
    (b"cat one two\n", "Could not read my vectors.txt as glove vectors: .+"),
    (b"2 3\ncat 1 2 3\n", "Could not read my vectors.txt as word2vec vectors: .+"),
    (b"2 300\ncat 1 2 3\n", "my vectors.txt's header says 2 words of 300 numbers, which needs at least 1,200 bytes"),
    (b"cat nan 1 2\n", "my vectors.txt has NaN or infinite numbers"),
    (b"100000000000 50\ncat 1 2 3\n", "header says 100,000,000,000 words of 50 numbers, .+ but the file has 26"),
    (b"0 3\n", "both must be at least 1"),
])
def test_malformed_files_get_a_whole_message_naming_the_users_file(content, message):
    with pytest.raises(VectorFileError, match=message) as error:
        load_uploaded(content, "my vectors.txt")
    assert "upload.txt" not in str(error.value) and not str(error.value).endswith(": ")


def test_a_header_claiming_billions_of_rows_is_refused_before_any_allocation():
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(VectorFileError, match="header says"):
        load_uploaded(b"100000000000 3\ncat 1 2 3\n", "v.bin")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 10 * 2**20


@pytest.mark.parametrize("header", ["", "3 3\n"])
def test_repeated_words_keep_their_first_vector(header):
    kv = load_uploaded(f"{header}the 1 2 3\ncat 4 5 6\nthe 7 8 9\n".encode(), "dup.txt")
    assert kv.index_to_key == ["the", "cat"] and kv.duplicates_skipped == 1
    np.testing.assert_array_equal(kv["the"], [1, 2, 3])
    np.testing.assert_allclose(kv.norms, np.linalg.norm(kv.vectors, axis=1))


def test_upload_size_cap_is_exactly_the_stated_limit():
    assert MAX_UPLOAD_BYTES == 50_000_000
    line = b"the 1 2 3"
    exact = line + b" " * (MAX_UPLOAD_BYTES - len(line) - 1) + b"\n"  # one word; trailing blanks are ignored
    assert len(load_uploaded(exact, "big.txt")) == 1
    with pytest.raises(VectorFileError, match="50,000,001 bytes; the upload limit is 50 MB \\(50,000,000 bytes\\)"):
        load_uploaded(exact + b" ", "big.txt")


def test_vector_path_from_settings():
    assert vectors_from_settings([], {}) == (None, None)
    assert vectors_from_settings([], {"ATTNVIZ_VECTORS": "/v.txt"}) == ("/v.txt", None)
    assert vectors_from_settings(["app.py", "--vectors", "/w.bin", "--vectors-format", "word2vec-bin"],
                                 {"ATTNVIZ_VECTORS": "/v.txt"}) == ("/w.bin", "word2vec-bin")


def test_nearest_words_of_zero_vector_is_empty(glove):
    assert nearest_words(glove, np.zeros(50, np.float32)) == []
    assert nearest_words(glove, glove["dog"], topn=2)[0][0] == "dog"


def test_nearest_words_equal_gensims_own_search(glove):
    """nearest_words (torch's product and top-k) against gensim's similar_by_vector on mixtures of real words."""
    rng = np.random.default_rng(4)
    words = ["dog", "happy", "tail", "river", "king", "computer", "the", "ran"]
    for _ in range(6):
        weights = rng.dirichlet(np.ones(len(words)))  # (8,) a softmax row's shape: positive, sums to 1
        mixture = (weights[:, None] * np.stack([glove[w] for w in words])).sum(0).astype(np.float32)  # (50,)
        ours = nearest_words(glove, mixture, topn=8)
        theirs = glove.similar_by_vector(mixture, topn=8)
        assert [w for w, _ in ours] == [w for w, _ in theirs]
        assert max(abs(a - b) for (_, a), (_, b) in zip(ours, theirs)) < 1e-5
