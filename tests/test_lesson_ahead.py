"""The class's next step computed while the class is on this one (appkit.lesson.ahead): the thread fills the caches
the pages read, so the page's own call finds the run there and computes nothing."""

import threading

from appkit import served
from appkit.lesson import ahead


def test_moving_to_step_13_computes_step_14_ahead_into_the_shared_cache():
    text = "the teacher moved on while the class was still reading"  # a sentence no other test runs
    key = ("minilm", text, None, None)
    assert key not in served._results()
    thread = ahead.ahead(13, {"text": text})
    assert thread is not None
    thread.join(300)
    assert key in served._results()  # the page's run of step 14 reads it from here
    calls = []
    result = served._results().get(key, lambda: calls.append(1))
    assert calls == [] and result.weights.shape[:2] == (6, 12)  # MiniLM's layers and heads, computed once


def test_one_thread_at_a_time_and_none_past_the_last_step():
    assert ahead.ahead(22, {}) is None and ahead.ahead(3, {}) is None  # nothing heavy after 22, nor at step 4
    release = threading.Event()
    ahead.STEPS[99] = lambda values: release.wait(10)
    try:
        first = ahead.ahead(98, {})
        assert first is not None and ahead.ahead(98, {}) is None  # busy: the second is skipped
        release.set()
        first.join(10)
    finally:
        del ahead.STEPS[99]


def test_runs_take_turns_and_one_that_waits_too_long_goes_on(monkeypatch):
    """appkit.served.in_turn: a second run's heavy part starts only once the first has left its turn; and a run whose
    turn does not come within TURN_WAIT_S goes on without it (a long computation never holds the others back)."""
    import threading

    from appkit import served

    order, first_inside, release = [], threading.Event(), threading.Event()

    def first():
        with served.in_turn():
            order.append("first in")
            first_inside.set()
            release.wait(10)
            order.append("first out")

    def second():
        with served.in_turn():
            order.append("second in")

    def both(wait_s: float, second_waits_s: float) -> tuple[threading.Thread, threading.Thread]:
        """The first run inside its turn, then the second started and given `second_waits_s` to get in."""
        order.clear(), first_inside.clear(), release.clear()
        monkeypatch.setattr(served, "TURN_WAIT_S", wait_s)
        a = threading.Thread(target=first)
        a.start()
        assert first_inside.wait(10)
        b = threading.Thread(target=second)
        b.start()
        b.join(second_waits_s)
        return a, b

    a, b = both(30.0, 0.2)
    assert order == ["first in"]  # the second is waiting for its turn, not inside
    release.set()
    a.join(10), b.join(10)
    assert order == ["first in", "first out", "second in"]
    a, b = both(0.05, 10)
    assert order == ["first in", "second in"]  # it went on while the first still held the turn
    release.set()
    a.join(10)
    order.clear(), first_inside.clear(), release.clear()
    monkeypatch.setattr(served, "TURN_WAIT_S", 30.0)
    a = threading.Thread(target=first)
    a.start()
    assert first_inside.wait(10)
    with served.in_turn(first=True):  # the presenter's run: in while a student's run holds the turn
        order.append("presenter in")
    assert order == ["first in", "presenter in"]
    release.set()
    a.join(10)


def test_in_a_class_a_body_waits_for_the_reruns_to_stop_arriving(monkeypatch):
    """appkit.served.in_turn(room=True): a body starts no sooner than QUIET_S after the last run started (its heading
    and the others' are sent meanwhile), and a run that started later pushes it back again."""
    import threading
    import time

    from appkit import served

    monkeypatch.setattr(served, "QUIET_S", 0.3)
    monkeypatch.setattr(served, "QUIET_WAIT_S", 10.0)
    entered = []

    def body():
        with served.in_turn(room=True):
            entered.append(time.monotonic())

    served.run_started()
    first = served._started[0]
    waiting = threading.Thread(target=body)
    waiting.start()
    time.sleep(0.1)
    served.run_started()  # another student's rerun arrives while the first waits
    again = served._started[0]
    waiting.join(10)
    assert entered and entered[0] >= again + 0.3 > first + 0.3
