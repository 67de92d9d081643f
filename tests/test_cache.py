import threading

import numpy as np

from attnviz.cache import ByteBudgetCache


def sized(n):
    return np.zeros(n, np.uint8)


def test_holds_bytes_not_entries_and_evicts_the_least_recently_used():
    cache = ByteBudgetCache(100, lambda a: a.nbytes)
    cache.get("a", lambda: sized(40))
    cache.get("b", lambda: sized(40))
    cache.get("a", lambda: sized(999))  # a hit: "a" becomes the most recent, nothing is computed
    cache.get("c", lambda: sized(40))  # 120 bytes: "b" goes
    assert cache.nbytes == 80 and len(cache) == 2
    calls = []
    cache.get("b", lambda: calls.append(1) or sized(40))
    assert calls == [1]  # evicted, so computed again
    for i in range(50):
        cache.get(("tiny", i), lambda: sized(1))
    assert cache.nbytes <= 100


def test_a_value_larger_than_the_budget_is_returned_but_not_kept():
    cache = ByteBudgetCache(100, lambda a: a.nbytes)
    cache.get("small", lambda: sized(10))
    assert cache.get("huge", lambda: sized(1000)).nbytes == 1000
    assert cache.nbytes == 10 and len(cache) == 1


def test_threads_never_push_it_past_its_budget():
    cache = ByteBudgetCache(1000, lambda a: a.nbytes)

    def work(offset):
        for i in range(200):
            cache.get((offset + i) % 37, lambda: sized(97))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.nbytes <= 1000 and cache.nbytes == 97 * len(cache)


def test_callers_asking_for_a_key_being_computed_share_one_computation():
    """30 sessions reach the same step at once: one computes, the others wait for its value, even one too large to
    keep; a failed computation lets the next caller compute it itself."""
    cache = ByteBudgetCache(1000, lambda a: a.nbytes)
    started, release, calls = threading.Event(), threading.Event(), []

    def slow(n):
        def compute():
            calls.append(n)
            started.set()
            release.wait(10)
            return sized(n)
        return compute

    got = []
    first = threading.Thread(target=lambda: got.append(cache.get("step", slow(40))))
    first.start()
    started.wait(10)
    others = [threading.Thread(target=lambda: got.append(cache.get("step", slow(41)))) for _ in range(29)]
    for t in others:
        t.start()
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert calls == [40] and len(got) == 30 and {a.nbytes for a in got} == {40}
    assert cache.get("huge", lambda: sized(5000)).nbytes == 5000 and len(cache) == 1  # returned, not kept

    def fails():
        raise RuntimeError("out of memory")

    try:
        cache.get("broken", fails)
    except RuntimeError:
        pass
    assert cache.get("broken", lambda: sized(3)).nbytes == 3  # the next caller computes it
