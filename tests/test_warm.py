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
