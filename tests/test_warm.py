"""The server's warm-up (pages/_warm.py) freezes the long-lived objects even when its first figure fails, as it did
when a session arrived during it and the two threads' imports met half-way."""

import gc

import pytest

from pages import _warm


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
