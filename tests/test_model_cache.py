"""appkit/model.model: the loaded models are kept together within the memory budget, the least recently used let go
first, and its memory with it (nothing else holds the model); sessions asking at once load a model once."""

import threading
import weakref

import pytest

from appkit import served as _model


@pytest.fixture
def fresh(monkeypatch):
    """The model cache emptied, under a budget that holds SmolLM2 (538 MB of float32) or MiniLM and SmolLM2's
    tokenizer-sized neighbours, but not both with room to spare."""
    monkeypatch.setenv("ATTNVIZ_MODEL_BUDGET", "600MB")
    _model._models.clear()
    yield
    _model._models.clear()


def test_the_least_recently_used_model_goes_when_the_budget_is_passed_and_its_memory_with_it(fresh):
    smollm2 = _model.model("smollm2")
    assert _model.model("smollm2") is smollm2  # loaded once
    watched = weakref.ref(smollm2)
    cache, _, _ = _model._models()
    assert cache.budget == 600 * 10**6 and cache.nbytes == smollm2.nbytes
    del smollm2
    minilm = _model.model("minilm")  # 538 + 90 MB pass 600 MB: SmolLM2, used least recently, goes
    assert "minilm" in cache and "smollm2" not in cache and cache.nbytes == minilm.nbytes
    assert watched() is None  # the cache collected it (nothing else held it): its weights' memory is free


def test_sessions_asking_at_once_load_a_model_once(fresh, monkeypatch):
    loads = []
    real = _model.models.load
    monkeypatch.setattr(_model.models, "load", lambda *a, **k: loads.append(1) or real(*a, **k))
    got = []
    threads = [threading.Thread(target=lambda: got.append(_model.model("minilm"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(got) == 4 and all(m is got[0] for m in got)


def test_a_model_that_cannot_load_is_not_kept(fresh, monkeypatch):
    monkeypatch.setattr(_model, "offered", lambda: {"broken": _model.Offer("broken", "/no/such/folder", None, "")})
    with pytest.raises(_model.models.ModelError, match="No model at"):
        _model.model("broken")
    assert "broken" not in _model._models()[0]
