"""Hostile input on every page and through every channel: sentence text, URL parameters, vector files, CSV
records and extreme controls. Each case runs the page under AppTest and asserts no exception, no NaN or
infinity in any chart's data, no raw user HTML in any chart spec, and the message a person should see.
"""

from __future__ import annotations

import base64
import builtins
import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from page_support import lesson_computed, sent_figures, type_sentence

from attnviz.embeddings import VectorFileError, load_uploaded, load_vectors, npy_row_blocks
from attnviz.retrieval import RecordError, parse_csv

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120
DRAWN = "a chart is drawn"  # the expected outcome of a case that needs no message
RAW_HTML = ("<script", "<img", "<b>", "<a href", "<iframe", "<svg")
PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<b>bold</b> dog", '<a href="javascript:alert(1)">cat</a>',
            "<iframe src=//x></iframe> tail", "<svg/onload=alert(1)> owner"]
WORDS = "when he saw his owner the dog was happy so he wagged his tail".split()
LONG = " ".join(WORDS[i % len(WORDS)] for i in range(600))


# ---------------------------------------------------------------- the checks


def sampled(cases: list[tuple], group, keep: int = 2) -> list:
    """Each case as a pytest param, the first `keep` of each group (`group(case)`) in the fast tier and the rest marked
    slow: every case runs in the full suite (README's command, CI), a sample of each kind in the edit–test loop."""
    seen: dict = {}
    out = []
    for case in cases:
        seen[group(case)] = seen.get(group(case), 0) + 1
        out.append(pytest.param(*case, marks=() if seen[group(case)] <= keep else pytest.mark.slow))
    return out


def run_page(page: str, params: dict | None = None, setup=None) -> AppTest:
    if page == "lesson.py":
        lesson_computed(params)
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=TIMEOUT)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.run()
    if setup:
        setup(at)
    return at


def messages(at) -> str:
    shown = " ".join(e.value for kind in (at.error, at.warning, at.info, at.success) for e in kind)
    return shown.replace("\\", "")  # messages are Markdown-escaped


def specs(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def leaves(value):
    """Every leaf of a chart spec, with plotly's typed arrays {dtype, bdata} decoded into their numbers."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        yield from np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).astype(float)
    elif isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from leaves(item)
    else:
        yield value


def live_scores(at) -> list[np.ndarray]:
    """The raw scores each interactive heatmap got, each side's for Compare (its tokens are plain text, set as text by
    the browser). The head atlas sends thumbnails and the census map its heads' numbers, not scores, and no user
    text."""
    sent = sent_figures(at)
    heatmaps = [side for data in sent for side in data.get("sides", [data])
                if "blocks" not in side and "fields" not in side and side.get("kind") not in ("matrix", "bars")]
    return [np.frombuffer(base64.b64decode(data["scores"]), "<f4") for data in heatmaps]


def check(at: AppTest, expect: str | None) -> None:
    """No exception, no NaN or raw HTML in any chart, and then `expect`: DRAWN, a message, or None (either)."""
    assert not at.exception, at.exception
    charts = specs(at)
    live = live_scores(at)
    assert all(np.isfinite(scores).all() for scores in live), "NaN or infinity in an interactive heatmap's scores"
    charts = charts + [{"data": []}] * len(live)
    for spec in charts:
        assert all(np.isfinite(x) for x in leaves(spec["data"]) if isinstance(x, float)), "NaN or infinity in a chart's data"
        raw = [s for s in leaves(spec) if isinstance(s, str) and any(tag in s.lower() for tag in RAW_HTML)]
        assert not raw, f"raw HTML in a chart: {raw[:2]}"
    if expect == DRAWN:
        assert charts, messages(at)
    elif expect is not None:
        assert expect.lower() in messages(at).lower(), messages(at)


# ---------------------------------------------------------------- sentence text


TEXTS = [
    ("", "Type a sentence"), ("   \n\t ", "Type a sentence"), ("...!?;:", DRAWN),
    ("\u200b\u200d\u2060", "no words or punctuation"), ("\x00\x01\x07 dog", DRAWN), ("🐶🐱🐭", "None of these words"),
    ("the 🐶 barked", DRAWN), ("كلب القط", "None of these words"), ("كلب the dog", DRAWN), ("狗 猫 the dog", DRAWN), ("e\u0301te\u0301 cafe\u0301", DRAWN),
    ('"quoted" and \'single\' words', DRAWN), ("**bold** [link](http://x) `code` $x^2$", DRAWN),
    ("dog " + "a" * 10_000, DRAWN), ("1e400 nan inf -inf 1e-400", DRAWN), ("qzxjvwk vvqqzzx", "None of these words"),
    ("dog " * 4200, "4,200 tokens"), (LONG, DRAWN), ("\r\n".join(WORDS), DRAWN), ("\ud7ff dog", DRAWN),
    *[(payload, DRAWN) for payload in PAYLOADS],
]


@pytest.mark.parametrize("text, expect", sampled(TEXTS, lambda case: case[1] == DRAWN, keep=6), ids=[f"text{i}" for i in range(len(TEXTS))])
def test_sentence_text(text, expect):
    at = run_page("self_attention.py", setup=lambda at: type_sentence(at, text))
    check(at, expect)
    if expect == DRAWN and "<" in text:
        rows = sent_figures(at)[0]["rows"]
        assert any("<" in t for t in rows)  # plain text, which the browser sets as text (tests/e2e: no element appears)


@pytest.mark.parametrize("text", sampled([(p,) for p in PAYLOADS[:3]], lambda case: None, keep=1))
@pytest.mark.parametrize("page, key", [("heads.py", "text"), ("encoder_decoder.py", "src"), ("batches.py", "batch")])
def test_html_in_the_other_pages_text(page, key, text):
    widget = {"batch": "text_area"}.get(key, "text_input")
    at = run_page(page, setup=lambda at: getattr(at, widget)(key=key).input(text + " the dog").run())
    check(at, DRAWN)


# ---------------------------------------------------------------- URL parameters

GPA = {"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric"}
URLS = [
    ("self_attention.py", {"temp": "nan"}, DRAWN), ("self_attention.py", {"temp": "inf"}, DRAWN),
    ("self_attention.py", {"temp": "1e400"}, DRAWN), ("self_attention.py", {"temp": "-1"}, DRAWN),
    ("self_attention.py", {"heads": "99", "proj": "random"}, DRAWN), ("self_attention.py", {"heads": "abc"}, DRAWN),
    ("self_attention.py", {"dk": "0", "proj": "random"}, DRAWN), ("self_attention.py", {"seed": "-1"}, DRAWN),
    ("self_attention.py", {"seed": "99999999999999999999999"}, DRAWN), ("self_attention.py", {"query": "100000"}, DRAWN),
    ("self_attention.py", {"mask": "keys", "hide": "1,2,abc"}, DRAWN), ("self_attention.py", {"mask": "keys", "hide": "-5,999,3"}, DRAWN),
    ("self_attention.py", {"mask": "keys", "hide": ",".join(map(str, range(16)))}, DRAWN),  # the browser says why
    ("self_attention.py", {"mask": "keys", "hide": ",".join(map(str, range(16))), "cmp": "1"}, None),
    ("self_attention.py", {"zw": "100", "zr": "-5", "zc": "1e9", "text": LONG}, DRAWN),
    ("self_attention.py", {"scoring": "<script>", "mask": "evil", "palette": "<img src=x>"}, DRAWN),
    ("self_attention.py", {"sigma": "nan", "scoring": "gaussian"}, DRAWN), ("self_attention.py", {"h": "1e9", "scoring": "additive"}, DRAWN),
    ("self_attention.py", {"oov": "random", "text": "qzxjvwk dog"}, DRAWN), ("self_attention.py", {"steps": "1", "head": "99", "proj": "random", "heads": "3"}, DRAWN),
    ("self_attention.py", {"punct": "1", "text": ", . ;"}, "no words or punctuation"),
    ("self_attention.py", {"text": "x" * 300_000}, "None of these words"),
    ("self_attention.py", {"text": "the dog " * 60_000}, "limit is 4,096"),
    ("kv_database.py", {"preset": "evil"}, DRAWN), ("kv_database.py", {"q": "<img src=x onerror=alert(1)>"}, DRAWN),
    ("kv_database.py", {**GPA, "q": "1e39"}, "a number from -1e15 to 1e15"),
    ("kv_database.py", {**GPA, "q": "nan"}, "a number from -1e15 to 1e15"),
    ("kv_database.py", {**GPA, "q": "1e15"}, DRAWN), ("kv_database.py", {**GPA, "q": "-1e15", "tau": "0.01", "sigma": "0.05"}, DRAWN),
    ("kv_database.py", {"tau": "nan", "sigma": "1e400", "sim": "gaussian"}, DRAWN),
    ("kv_database.py", {"kind": "evil", "encoder": "evil"}, DRAWN), ("kv_database.py", {"q": "   "}, "Type a query"),
    ("kv_database.py", {"encoder": "glove", "q": "qzxjvwk"}, "GloVe knows none"),
    ("pooling.py", {"n": "0"}, DRAWN), ("pooling.py", {"n": "1e9"}, DRAWN), ("pooling.py", {"noise": "-1", "f": "evil"}, DRAWN),
    ("pooling.py", {"bw": "0", "kernel": "boxcar"}, DRAWN), ("pooling.py", {"pick": "nan", "csigma": "inf", "chard": "2"}, DRAWN),
    ("scoring.py", {"m": "0", "n": "1e9"}, DRAWN), ("scoring.py", {"dq": "1e9", "dk": "1"}, "Cannot score"),
    ("scoring.py", {"samples": "50000"}, DRAWN), ("scoring.py", {"samples": "nan", "seed": "inf"}, DRAWN),
    ("encoder_decoder.py", {"src": "<b>x</b> dog", "tgt": ""}, "Type both"), ("encoder_decoder.py", {"k": "0", "scoring": "gaussian"}, DRAWN),
    ("encoder_decoder.py", {"src": "dog " * 70}, "at most 64 tokens"),
    ("batches.py", {"batch": "\n".join(["the dog"] * 9)}, "At most 8 sentences"), ("batches.py", {"item": "99"}, DRAWN),
    ("batches.py", {"batch": "qzxjvwk\ndog"}, "known word"),
    ("heads.py", {"focus": "999", "layers": "99", "lmode": "evil", "heads": "0"}, DRAWN), ("heads.py", {"text": "dog " * 70}, "at most 64 tokens"),
    ("heads.py", {"text": "qzxjvwk"}, "None of these words"),
    ("trained.py", {"layer": "99", "head": "-3", "measure": "<script>", "unit": "evil", "query": "1e9", "scale": "nan"}, DRAWN),
    ("trained.py", {"text": ""}, "Type a text"), ("trained.py", {"text": "   \t "}, "Type a text"),
    ("trained.py", {"model": "<script>alert(1)</script>"}, "offers no model called"),
    ("decoder.py", {"model": "../../../etc/passwd"}, "offers no model called"),
    ("trained.py", {"model": "smollm2"}, "Decoders open on the Decoder page"),
    ("decoder.py", {"model": "minilm", "layer": "1e9"}, "Encoders and encoder–decoders open on the Trained model page"),
    ("trained.py", {"kind": "evil", "target": "<b>x</b>", "mask": "causal_keys"}, DRAWN),
    ("trained.py", {"score": "<script>", "bycolour": "2", "bysort": "nan", "types": "1", "moved": "1", "text": "dog"}, DRAWN),
    ("lesson.py", {"step": "16", "copyseed": "1e9", "copyshuffle": "<b>"}, DRAWN),
    ("decoder.py", {"mask": "none", "hide": "0,-1,99999", "query": "-7", "key": "1e99"}, DRAWN),
    ("trained.py", {"text": "dog " * 600}, "at most 512 pieces"), ("trained.py", {"text": "... ?!"}, DRAWN),
    ("trained.py", {"text": "🙂 北京 <b>x</b> &amp; qzxjvwk", "unit": "words", "steps": "1"}, DRAWN),
    ("trained.py", {"text": "x" * 20_000}, DRAWN),
    ("self_attention.py", {"cmp": "1", "b_scoring": "<script>", "b_temp": "nan", "b_heads": "99", "b_proj": "random",
                           "b_mask": "keys", "b_hard": "2"}, DRAWN),
    ("self_attention.py", {"cmp": "1", "b_text": "qzxjvwk"}, "B: None of these words"),
    ("self_attention.py", {"text": "qzxjvwk zzqqx", "oov": "random"}, DRAWN),  # each unknown word gets a vector of its own
    ("self_attention.py", {"text": "qzxjvwk zzqqx", "oov": "drop"}, "the 'drop' policy leaves none"),
    ("self_attention.py", {"text": "qzxjvwk zzqqx"}, "Choose the 'random' policy"),
    ("self_attention.py", {"text": "dog", "parts": "1"}, DRAWN),
    ("self_attention.py", {"parts": "1", "text": "the dog " * 150, "key": "299", "query": "298"}, DRAWN),  # past 256: no (H, n, n) kept
    ("self_attention.py", {"key": "-7", "nsort": "maybe", "parts": "yes", "query": "3"}, DRAWN),
    ("self_attention.py", {"pos": "<script>", "b_pos": "nan"}, DRAWN), ("self_attention.py", {"pos": "rotary", "proj": "random", "dk": "1"}, DRAWN),
    ("self_attention.py", {"pos": "sinusoidal", "text": "dog", "cmp": "1", "b_text": "dog dog", "b_pos": "rotary"}, DRAWN),
    ("self_attention.py", {"pos": "rotary", "text": "the dog " * 300, "parts": "1"}, DRAWN),
    ("trained.py", {"learned": "1", "text": "🙂 北京 <b>x</b>"}, DRAWN), ("trained.py", {"learned": "evil"}, DRAWN),
    ("trained.py", {"qk": "1", "qkq": "999999", "text": "<script>x</script>"}, DRAWN), ("trained.py", {"qk": "1", "qkq": "-5"}, DRAWN),
    ("trained.py", {"qk": "1", "qkq": "3", "text": "the dog " * 90, "unit": "words"}, DRAWN), ("self_attention.py", {"key": "99999", "nhead": "-1"}, DRAWN),
    ("self_attention.py", {"key": "1e9", "proj": "random", "heads": "4", "nhead": "7", "mask": "causal", "query": "0"}, DRAWN),
    ("trained.py", {"key": "<b>", "query": "3", "mask": "keys", "hide": "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"}, DRAWN),
    ("self_attention.py", {"cmp": "1", "text": "the dog " * 200}, "A: The text has 400 tokens; the limit is 256"),
    ("lesson.py", {"step": "99"}, DRAWN), ("lesson.py", {"step": "-1"}, DRAWN), ("lesson.py", {"step": "<b>7</b>"}, DRAWN),
    *[("lesson.py", {"step": str(n), "text": "qzxjvwk", "q": "<img src=x>"}, None) for n in range(1, 17)],
    ("lesson.py", {"step": "7", "query": "999", "text": "dog " * 100}, "Type a sentence of 1 to 64 words"),
    ("lesson.py", {"step": "3", "tau": "inf", "q": ""}, DRAWN), ("lesson.py", {"step": "4", "sigma": "0"}, DRAWN),
    ("lesson.py", {"step": "5", "seed": "1e99"}, DRAWN), ("lesson.py", {"step": "9", "dk": "999"}, DRAWN),
    ("lesson.py", {"step": "10", "mask": "evil"}, DRAWN), ("lesson.py", {"step": "10", "mask": "padding"}, DRAWN),
    ("lesson.py", {"step": "10", "ctemp": "nan", "chard": "2", "cmask": "<script>", "cb_temp": "-1e309", "cb_mask": "keys",
                   "query": "999"}, DRAWN),
    ("lesson.py", {"step": "6", "text": "dog " * 70}, "A: The text has 70 tokens; the limit is 64"),
    ("lesson.py", {"step": "6", "ctemp": "0.01", "text": "dog dog dog"}, DRAWN),
    ("lesson.py", {"step": "8", "order": "dog"}, "Type a sentence of 2 to 64 words"), ("lesson.py", {"step": "8", "order": "<b>a</b> b", "opos": "x"}, DRAWN),
    ("lesson.py", {"step": "8", "order": "qzxjvwk zzqqx"}, "A: None of these words"),
    ("lesson.py", {"step": "12", "item": "99"}, DRAWN), ("lesson.py", {"step": "13", "heads": "0"}, DRAWN),
    ("lesson.py", {"step": "13", "heads": "2", "hhead": "7"}, DRAWN), ("lesson.py", {"step": "13", "hhead": "<b>"}, DRAWN),
    ("kv_database.py", {"drop": "<script>alert(1)</script>"}, DRAWN), ("kv_database.py", {"drop": "x" * 5000}, DRAWN),
    ("lesson.py", {"step": "14", "layer": "9", "head": "99", "text": "🙂 北京"}, DRAWN),
]


@pytest.mark.parametrize("page, params, expect", sampled(URLS, lambda case: case[0]), ids=[f"{p[:-3]}-{i}" for i, (p, _, _) in enumerate(URLS)])
def test_url_parameters(page, params, expect):
    check(run_page(page, params), expect)


# ---------------------------------------------------------------- vector files


class Marker:
    """Unpickling this creates a file: the proof that something was unpickled."""

    path = ""

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


def pickled(marker: Path) -> bytes:
    Marker.path = str(marker)
    return pickle.dumps({"the": Marker(), "dog": [1.0, 2.0]})


def vector_files(marker: Path) -> list[tuple[str, bytes, str]]:
    """(file name, contents, expected message) for files a person might hand the app."""
    return [
        ("empty.txt", b"", "empty.txt is empty"),
        ("dup.txt", b"the 1 2 3\ndog 4 5 6\nthe 7 8 9\n", "1 repeated word(s) skipped"),
        ("header.txt", b"100000000000 50\nthe 1 2 3\n", "header says 100,000,000,000 words"),
        ("huge.txt", b"the 1e20 1e20 1e20\ndog 1 1 1\n", "larger than float32"),
        ("large.txt", b"the 1e19 1e19 1e19\ndog 1 1 1\n", DRAWN),
        ("max.txt", b"the 3e38 3e38 3e38\ndog 1 2 3\n", "larger than float32"),
        ("nan.txt", b"the nan 1 2\n", "NaN or infinite"),
        ("inf.txt", b"the inf 1 2\n", "NaN or infinite"),
        ("ragged.txt", b"the 1 2 3\ndog 1 2\n", "Could not read ragged.txt"),
        ("words.txt", b"the one two three\n", "Could not read words.txt"),
        ("garbage.bin", bytes(range(256)) * 8, "garbage.bin"),
        ("pickle.bin", pickled(marker), "pickle.bin"),
        ("pickle.txt", pickled(marker), "None of these words"),  # parsed as text: garbage words, no unpickling
        ("utf16.txt", "the 1 2 3\n".encode("utf-16"), "utf16.txt"),
        ("header_only.txt", b"3 3\n", "header says 3 words of 3 numbers"),
        ("html.txt", b"<b>the</b> 1 2 3\n<img 4 5 6\ndog 1 0 0\n", DRAWN),
        ("binary.bin", b"2 3\n" + b"".join(w + b" " + struct.pack("<3f", 1, 2, 3) for w in (b"the", b"dog")), DRAWN),
        ("longword.txt", b"the 1 2 3\n" + b"w" * 100_000 + b" 1 2 3\n", DRAWN),
    ]


@pytest.fixture(scope="module")
def marker(tmp_path_factory):
    path = tmp_path_factory.mktemp("marker") / "unpickled"
    yield path
    assert not path.exists(), "a file was unpickled"


def _file_cases():
    return [case[0] for case in vector_files(Path("/unused"))]


@pytest.mark.parametrize("name", sampled([(n,) for n in _file_cases()], lambda case: None, keep=8))
def test_vector_files_through_the_page(tmp_path, monkeypatch, marker, name):
    _, content, expect = next(case for case in vector_files(marker) if case[0] == name)
    path = tmp_path / name
    path.write_bytes(content)
    monkeypatch.setenv("ATTNVIZ_VECTORS", str(path))

    def choose_the_file(at):
        at.radio(key="vectors").set_value(at.radio(key="vectors").options[1]).run()
        type_sentence(at, "<b>the</b> dog the")

    check(run_page("self_attention.py", setup=choose_the_file), expect)
    assert not marker.exists()


@pytest.mark.parametrize("name", _file_cases())
@pytest.mark.parametrize("fmt", [None, "glove", "word2vec", "word2vec-bin"])
def test_vector_files_as_uploads_never_unpickle(marker, name, fmt):
    _, content, _ = next(case for case in vector_files(marker) if case[0] == name)
    try:
        kv = load_uploaded(content, name, fmt)
    except VectorFileError as error:
        assert name in str(error) and "upload" not in str(error).replace("upload limit", "")
    else:
        assert len(kv) and np.isfinite(kv.vectors).all() and None not in kv.index_to_key
    assert not marker.exists()


def test_pickled_npy_is_refused_unread(tmp_path, marker):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([Marker()], dtype=object), allow_pickle=True)
    with pytest.raises(VectorFileError, match="not a 2-D matrix of numbers"):
        list(npy_row_blocks(path, 10))
    with pytest.raises(VectorFileError):
        load_vectors(path)
    with pytest.raises(RecordError):
        parse_csv(pickled(marker) + b"\xff\xfe")
    assert not marker.exists()


# ---------------------------------------------------------------- CSV records

NUMERIC = {"preset": "Your own records (CSV)", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3"}
TEXTUAL = {"preset": "Your own records (CSV)", "q": "Li"}
RECORDS = [
    (TEXTUAL, "", "Upload or paste records"), (TEXTUAL, "just one column\n", "two columns"),
    (TEXTUAL, "key,value\n", "The table is empty"), (TEXTUAL, "\n".join(f"k{i},v{i}" for i in range(2001)), "limit is 2,000"),
    (TEXTUAL, "a,b\n" * 120_000, "limit is 2,000"), (TEXTUAL, "a,b\n" * 300_000, "limit is 1024 KiB"),
    (TEXTUAL, '"unclosed,quote\nLi,Mu\n', "Could not read the CSV"),
    (TEXTUAL, "=cmd|' /C calc'!A0,x\nLi,Mu\n", DRAWN), (TEXTUAL, "<img src=x onerror=alert(1)>,<b>v</b>\nLi,Mu\n", DRAWN),
    (TEXTUAL, "Li,Mu\nLi,Mu\nLi,Mo\n", DRAWN), (TEXTUAL, "狗,犬\nLi,Mu\n🐶,dog\n", DRAWN), (TEXTUAL, ",\n,\nLi,Mu\n", DRAWN),
    (TEXTUAL, "Li,\n", "empty value"), (NUMERIC, "1e20,5\n2,6\n", "'1e20' is not a number from -1e15 to 1e15"),
    (NUMERIC, "1,1e308\n2,6\n", "'1e308' is not a number from -1e15 to 1e15"), (NUMERIC, "nan,1\n", "'nan' is not a number"),
    (NUMERIC, "inf,1\n", "'inf' is not a number"), (NUMERIC, "1e15,1e15\n-1e15,-1e15\n0,0\n", DRAWN),
    (NUMERIC, "abc,1\n", "'abc' is not a number"), (NUMERIC, "3,5\n", DRAWN),
]


@pytest.mark.parametrize("params, csv_text, expect", sampled(RECORDS, lambda case: case[2] == DRAWN, keep=4), ids=[f"records{i}" for i in range(len(RECORDS))])
def test_csv_records(params, csv_text, expect):
    at = run_page("kv_database.py", params, setup=lambda at: at.text_area(key="records_paste").input(csv_text).run())
    check(at, expect)


# ---------------------------------------------------------------- extreme controls and settings

CONTROLS = [
    {"temp": "0.01", "hard": "1", "scoring": "dot"}, {"temp": "100", "scoring": "gaussian", "sigma": "0.25"},
    {"proj": "random", "heads": "8", "dk": "128", "bias": "1", "scoring": "additive", "h": "128"},
    {"proj": "random", "heads": "8", "dk": "1", "scoring": "general", "seed": "2147483647"},
    {"mask": "causal", "hard": "1", "temp": "0.01", "proj": "random", "heads": "5", "dk": "3"},
    {"scoring": "cosine", "oov": "random", "text": "qzxjvwk zzqqxx dog", "seed": "2147483647"},
    {"oov": "drop", "text": "qzxjvwk the dog"}, {"text": LONG, "proj": "random", "heads": "8", "dk": "128", "scoring": "gaussian"},
    {"text": LONG, "mask": "causal", "scoring": "additive", "h": "128", "zw": "128", "zr": "99999", "zc": "99999"},
]


@pytest.mark.parametrize("params", sampled([(c,) for c in CONTROLS], lambda case: None, keep=4), ids=[f"controls{i}" for i in range(len(CONTROLS))])
def test_extreme_controls(params):
    check(run_page("self_attention.py", params), DRAWN)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e3", "99999999"])
def test_bad_token_cap_setting_is_named_and_the_page_still_works(monkeypatch, value):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", value)
    at = run_page("self_attention.py")
    check(at, f"ATTNVIZ_MAX_TOKENS='{value}' is not a whole number from 1 to 4,096")
    assert specs(at) or live_scores(at)


def test_a_lower_token_cap_applies_to_a_text_already_computed(monkeypatch):
    at = run_page("self_attention.py", {"text": "the dog ran to the door"})
    check(at, DRAWN)
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "3")
    check(run_page("self_attention.py", {"text": "the dog ran to the door"}), "The text has 6 tokens; the limit is 3")
