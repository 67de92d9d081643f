"""The class's next step, computed while the class is on this one: when the presenter moves to step n, a thread
computes step n + 1's model runs into the caches every session shares (appkit.served), so the room's next Next finds
them ready. The steps before 14 take milliseconds and are left to the pages. Best effort: a failure here only means
the page computes it itself, and says why."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from appkit import served
from appkit.lesson.common import DOG
from appkit.lesson.experiments import DOG_PREFIX, head_off_of, writings
from appkit.lesson.models import DECODER_PROMPT, copying_head, repeats_of
from appkit.lesson.why import score_parts_for

_LOGGER = logging.getLogger(__name__)
_busy = threading.Lock()

# step → what computes its heavy part from the lesson's values (the names of appkit.lesson.common.SCHEMA)
STEPS: dict[int, Callable[[dict], object]] = {
    14: lambda values: served.run("minilm", values.get("text", DOG)),
    15: lambda values: served.run("smollm2", DECODER_PROMPT),
    16: lambda values: copy_numbers(values.get("copyseed", 0), values.get("copyshuffle", False)),
    17: lambda values: head_off_of(values.get("copyseed", 0)),
    18: lambda values: served.importance_work("smollm2", DOG_PREFIX).result(),
    19: lambda values: writings(values.get("writeseed", 0)),
    20: lambda values: served.example_needle("smollm2"),
    21: lambda values: why_numbers(values.get("copyseed", 0)),
    22: lambda values: served.census_document_work("smollm2").result(),
}


def copy_numbers(seed: int, shuffled: bool):
    model, _, _, probe, result = copying_head(seed, shuffled)
    return repeats_of(model, probe, result, seed, shuffled)


def why_numbers(seed: int):
    model, _, (layer, head), _, result = copying_head(seed)
    return score_parts_for(model, result, seed, layer, head)


def prepare(step: int, values: dict) -> None:
    """Compute `step`'s heavy part now (in this thread)."""
    work = STEPS.get(step)
    if work is None:
        return
    try:
        work(values)
    except Exception:  # noqa: BLE001  the page computes it itself, and says what failed
        _LOGGER.warning("Computing lesson step %d ahead failed", step, exc_info=True)


def ahead(step: int, values: dict) -> threading.Thread | None:
    """Compute step `step` + 1 in a thread of its own, unless one is already at work (a presenter clicking through
    several steps gets the last one's next when that thread is free). Returns the thread, or None."""
    if step + 1 not in STEPS or not _busy.acquire(blocking=False):
        return None

    def work() -> None:
        try:
            prepare(step + 1, values)
        finally:
            _busy.release()

    thread = threading.Thread(target=work, name=f"attnviz-lesson-ahead-{step + 1}", daemon=True)
    thread.start()
    return thread
