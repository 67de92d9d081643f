"""The server's warm-up (appkit/warm.py) freezes the long-lived objects even when its first figure fails, as it did
when a session arrived during it and the two threads' imports met half-way."""

import gc

import pytest

from appkit import warm as _warm


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    _warm.READY.clear()
    yield
    gc.unfreeze()  # this test process keeps collecting as usual


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


def test_the_warm_up_sets_imported_before_it_loads_glove(unfrozen, monkeypatch):
    _warm.IMPORTED.clear()
    seen = []
    monkeypatch.setattr(_warm, "_first_use", lambda kv: seen.append(_warm.IMPORTED.is_set()))
    _warm._load()
    assert seen == [True] and _warm.READY.is_set()
