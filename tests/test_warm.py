"""The server's warm-up (appkit/warm.py) freezes the long-lived objects even when its first figure fails, as it did
when a session arrived during it and the two threads' imports met half-way."""

import gc

import pytest

from appkit import vectors, warm as _warm


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    _warm.READY.clear()
    _warm.FIRST_RUN.set()  # no page to wait for: the KeyedVectors are built at once
    yield
    gc.unfreeze()  # this test process keeps collecting as usual
    _warm.FIRST_RUN.clear()


def test_a_failed_first_figure_still_freezes_and_sets_ready(unfrozen, monkeypatch):
    calls = []

    def fails(kv):
        calls.append(kv)
        raise AttributeError("partially initialized module 'pandas' has no attribute 'Series'")

    monkeypatch.setattr(_warm, "_first_use", fails)
    monkeypatch.setattr(_warm.time, "sleep", lambda seconds: None)
    _warm._load()
    assert len(calls) == 2  # tried again once
    assert _warm.READY.is_set()
    assert gc.get_freeze_count() > 100_000  # torch, gensim, plotly and GloVe's objects
    assert vectors.KEYED.is_set() and vectors.early_glove() is None  # the KeyedVectors are built whatever happened


def test_a_second_try_that_works_is_enough(unfrozen, monkeypatch):
    calls = []

    def fails_once(kv):
        calls.append(kv)
        if len(calls) == 1:
            raise AttributeError("partially initialized module")

    monkeypatch.setattr(_warm, "_first_use", fails_once)
    monkeypatch.setattr(_warm.time, "sleep", lambda seconds: None)
    _warm._load()
    assert len(calls) == 2 and _warm.READY.is_set() and gc.get_freeze_count() > 100_000


def test_the_collector_frees_reference_cycles_within_its_period():
    """Streamlit's collection after every run is off (it walked every live object: O(sessions) per run); the server's
    collector thread frees what sits in reference cycles instead."""
    import threading
    import tomllib
    import weakref
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False

    class Node:
        pass

    gc.disable()  # only the collector may collect here
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None
        stop = threading.Event()
        collector = threading.Thread(target=_warm._collect, args=(stop, 0.05), daemon=True)
        collector.start()
        for _ in range(100):
            if gone() is None:
                break
            stop.wait(0.02)
        stop.set()
        collector.join(1)
        assert gone() is None and not collector.is_alive()
    finally:
        gc.enable()


def test_sessions_wait_for_the_warm_ups_imports():
    """One thread imports torch, gensim and the engine; a session that arrives meanwhile waits for it (app.py calls
    wait_for_imports before its page runs), and without a warm-up it does not wait at all."""
    import threading
    import time
    from pathlib import Path

    _warm.STARTED.clear()
    _warm.IMPORTED.clear()
    try:
        start = time.perf_counter()
        _warm.wait_for_imports()
        assert time.perf_counter() - start < 0.1  # AppTest, a page run alone: no warm-up to wait for
        _warm.STARTED.set()
        threading.Timer(0.3, _warm.IMPORTED.set).start()
        start = time.perf_counter()
        _warm.wait_for_imports()
        assert time.perf_counter() - start >= 0.25 and _warm.IMPORTED.is_set()
    finally:
        _warm.STARTED.clear()
        _warm.IMPORTED.set()
    app = (Path(__file__).resolve().parents[1] / "app.py").read_text()
    assert app.index("wait_for_imports()") < app.index("navigation.run()")


def test_the_sessions_go_on_once_the_warm_ups_first_figure_is_drawn(unfrozen, monkeypatch):
    """The sessions wait for the warm-up's first figure too: its plotly reads pandas wherever sys.modules holds it, so
    a session importing pandas beside it (a page with a table) would hand it a half-made module."""
    _warm.IMPORTED.clear()
    seen = []
    monkeypatch.setattr(_warm, "_first_use", lambda kv: seen.append(_warm.IMPORTED.is_set()))
    _warm._load()
    assert seen == [False] and _warm.IMPORTED.is_set() and _warm.READY.is_set()


WARM_UP = """
import sys, threading
import numpy as np
from appkit import vectors, warm
from appkit.common import glove
from attnviz.embeddings import GloveMatrix, embed, tokenize

seen = {}
def first_use(kv):
    seen["first"] = type(kv).__name__, "gensim" in sys.modules
warm._first_use = first_use
warm.STARTED.set()
loading = threading.Thread(target=warm._load)
loading.start()
warm.wait_for_imports()  # as a session that arrives during the warm-up does
early = glove()
warm.READY.wait(120)
print(*seen["first"], type(early).__name__, "gensim" in sys.modules)
tokens = tokenize("the dog was happy qzxv")
before = [embed(tokens, early, oov=oov, seed=3).vectors for oov in ("zero", "random", "drop")]
warm.FIRST_RUN.set()  # the first page has run: the KeyedVectors are built behind it
loading.join(120)
late = glove()
after = [embed(tokens, late, oov=oov, seed=3).vectors for oov in ("zero", "random", "drop")]
print(type(late).__name__, vectors.early_glove() is None, all(np.array_equal(a, b) for a, b in zip(before, after)))
"""


@pytest.mark.slow  # a fresh interpreter runs the warm-up whole
def test_the_first_heatmap_is_drawn_from_the_mapped_matrix_and_the_keyed_vectors_come_behind_it():
    """Issue 51 D: the warm-up's first figure, and a page run before the first page has ended, get GloVe's matrix
    memory-mapped, with gensim not yet imported; once a page has run, gensim's KeyedVectors are built and served,
    giving the same vectors. A fresh process: this one has imported gensim long ago."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", WARM_UP], cwd=root, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    first, late = out.stdout.split("\n")[:2]
    assert first.split() == ["GloveMatrix", "False", "GloveMatrix", "False"]
    assert late.split() == ["KeyedVectors", "True", "True"]



FIRST_PAGE = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=120)
at.run()
sent = [json.loads(c.proto.json)[0] for c in at.get("bidi_component")]
print(json.dumps({"errors": len(at.exception), "scores": ["scores" in d for d in sent], "pandas": "pandas" in sys.modules}))
"""


@pytest.mark.slow  # a fresh interpreter runs the warm-up whole
def test_the_first_pages_first_run_needs_no_pandas():
    """Issue 51 D: pandas' import is 0.5 s of a cold start, and the warm-up no longer makes it. The Self-attention
    page's first run draws its heatmap without it: the component's data goes as a list, where a dict would have
    Streamlit look for dataframes among its values, importing pandas. A fresh process, where nothing has imported it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", FIRST_PAGE], cwd=root, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # the sentence box, the heatmap with raw scores, the page's announcer (appkit.present.announce)
    assert found["errors"] == 0 and found["scores"] == [False, True, False]
    assert found["pandas"] is False


def test_the_server_runs_on_httptools_and_uvloop():
    """uvicorn, under Streamlit, takes the C HTTP parser and libuv's event loop where they are installed (requirements):
    with Streamlit's own settings for it, these are what it would use."""
    from streamlit.web.server.starlette.starlette_server import _get_uvicorn_config_kwargs
    from uvicorn.config import Config

    config = Config(lambda scope, receive, send: None, **_get_uvicorn_config_kwargs())
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
    assert config.get_loop_factory().__module__.startswith("uvloop")


def test_the_warm_up_computes_each_first_use_a_model_page_waits_for_unless_told_not_to(monkeypatch):
    """appkit.warm._warm_models: Long text's example scan, waited for, then each of the Lesson's model steps with the
    lesson's first values, in order; nothing with ATTNVIZ_WARM_MODELS=0; a step that fails is left to its page."""
    from appkit import served, warm
    from appkit.lesson import ahead
    from appkit.lesson.common import SCHEMA

    done = []
    scans = iter([None, None, "scan"])  # the job still running twice, then done
    monkeypatch.setattr(served, "example_scan", lambda name: done.append(("scan", name)) or next(scans))
    monkeypatch.setattr(warm.time, "sleep", lambda seconds: None)

    def work(step):
        def run(values):
            assert values == {name: param.default for name, param in SCHEMA.items()}
            done.append(step)
            if step == 16:
                raise RuntimeError("a step that fails")
        return run

    monkeypatch.setattr(ahead, "STEPS", {step: work(step) for step in (14, 16, 20)})
    monkeypatch.setenv(warm.WARM_MODELS, "0")
    warm._warm_models()
    assert done == []
    monkeypatch.setenv(warm.WARM_MODELS, "1")
    warm._warm_models()
    assert done == [("scan", "smollm2")] * 3 + [14, 16, 20]
