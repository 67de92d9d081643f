"""Server start: app.py's st.App lifespan loads what the first page needs before the first browser asks for it.
Light on purpose (app.py imports it): the heavy imports happen in the warm-up thread."""

from __future__ import annotations

import gc
import logging
import threading
import time
from contextlib import asynccontextmanager, contextmanager

import streamlit as st

from appkit import vectors
from attnviz.cache import return_large_blocks

_LOGGER = logging.getLogger(__name__)
COLLECT_SECONDS = 60.0  # the server's garbage collection: one full collection this often (see _collect)
READY = threading.Event()  # set once the warm-up has ended (loaded; or failed, and the pages load GloVe themselves)
IMPORTED = threading.Event()  # set once the warm-up thread has imported torch and the engine and mapped GloVe (or failed to)
STARTED = threading.Event()  # set when the lifespan starts the warm-up (never under AppTest, or a page run alone)
FIRST_RUN = threading.Event()  # set when a session's first page run has ended
FIRST_RUN_WAIT_SECONDS = 30.0  # with no browser by then, the KeyedVectors are built anyway
IMPORT_WAIT_SECONDS = 120.0


@asynccontextmanager
async def lifespan(_app):
    """Starts the warm-up in a thread, so the server answers the first browser meanwhile."""
    from streamlit.runtime.pages_manager import PagesManager

    # Else the server's first session runs in Streamlit's legacy pages/ mode: a link straight to /kv_database would
    # run that page without app.py (no menu, no page config) until some run called st.navigation.
    PagesManager.uses_pages_directory = False
    STARTED.set()
    print_teacher_link()
    threading.Thread(target=_load, name="attnviz-warm-up", daemon=True).start()
    threading.Thread(target=_collect, name="attnviz-collector", daemon=True).start()
    yield


def print_teacher_link() -> None:
    """The teacher link, as Jupyter prints its token: the Lesson in presenter mode with the key that starts a class
    (attnviz.classroom.teacher). Said on stderr, with the server's own lines."""
    import sys

    from attnviz.classroom import teacher

    address = st.get_option("browser.serverAddress") or "localhost"
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    origin = f"http://{address}:{st.get_option('server.port')}" + (f"/{base}" if base else "")
    try:
        print(f"attnviz: to teach a class, open {teacher.link(origin)}", file=sys.stderr, flush=True)
    except (OSError, ValueError) as error:
        print(f"attnviz: classes cannot be started on this server: {error}", file=sys.stderr, flush=True)


def _collect(stop: threading.Event | None = None, seconds: float = COLLECT_SECONDS) -> None:
    """A full garbage collection every `seconds`, in place of Streamlit's after every run (runner.postScriptGC, off in
    .streamlit/config.toml and in the attnviz command). Streamlit's walked every live object after every run: with 30
    sessions open, 11 ms a run held under the GIL, growing with the sessions (bench_load). Reference counting still
    frees most of a run's objects as it ends; what sits in reference cycles is freed within `seconds` (Python's own
    collections free most of it sooner). Once a minute, not every 10 s: with 200 to 300 sessions open a full
    collection holds the GIL for 250 to 400 ms, and every request waits behind it (bench_class)."""
    stop = stop or threading.Event()
    while not stop.wait(seconds):
        gc.collect()


def wait_for_imports() -> None:
    """A session's script waits here until the warm-up thread has imported torch and the engine, mapped GloVe's
    matrix and drawn its first figure (a run that went on without it would build the KeyedVectors itself). Two threads
    importing the same modules at once can hand one of them a module the other has only half made ("partially
    initialized module 'pandas' has no attribute 'Series'"); one thread imports them, the others wait. Without a
    warm-up (AppTest, a page run alone) it returns at once."""
    if STARTED.is_set():
        IMPORTED.wait(IMPORT_WAIT_SECONDS)


def _load() -> None:
    return_large_blocks()  # a request's freed memory goes back to the system (attnviz.cache)
    try:
        try:
            # Not pandas (0.5 s): the first page's first run needs none (its heatmap's data goes to the browser as a
            # list, appkit.interactive), nor does anything here; a page that does imports it when it first needs it.
            import torch  # noqa: F401  most of the work
            import attnviz.figures  # noqa: F401  plotly
            import attnviz.models  # noqa: F401  the model pages' engine, and transformers' tokenizers

            vectors.map_early()
            _one_blas_thread()
            from appkit.served import free_at_start

            free_at_start()  # the machine's free memory as the server starts, before any page takes some
            _first_figure()
        finally:
            # On failure too: the sessions then import and load for themselves. Only after the first figure: plotly
            # reads pandas wherever sys.modules holds it, and a session importing pandas meanwhile (a page with a
            # table) handed the figure a half-made module.
            IMPORTED.set()
    finally:
        # Streamlit collects garbage after every run (runner.postScriptGC). With torch, plotly and GloVe
        # loaded, a full collection walks ~300,000 objects that live as long as the server: about 150 ms of CPU held
        # under the GIL after each run, in which the server sends nothing. Frozen, they are no longer walked (a
        # collection then takes about 10 ms); they are still freed by reference counting if ever dropped. Frozen
        # whatever happened above: a failed warm-up once left every later run paying the full collection.
        gc.freeze()
        READY.set()
    _build_keyed()


def _first_figure() -> None:
    for attempt in (1, 2):
        try:
            _first_use(vectors.glove())  # the mapped matrix; where it could not be mapped, the KeyedVectors
            return
        except Exception:  # noqa: BLE001  the warm-up only saves time: a failure must not stop the freeze after it
            _LOGGER.warning("The warm-up's first figure failed (attempt %d)", attempt, exc_info=True)
            time.sleep(1)


WARM_MODELS = "ATTNVIZ_WARM_MODELS"  # "0": the models' first uses are computed when a page first asks for them


def _warm_models() -> None:
    """What a first visit would wait for a minute and more on a laptop's CPU, computed once GloVe is in: Long text's
    example scan (its own job: a page that asks meanwhile shows its progress) and the Lesson's model steps with their
    first values (appkit.lesson.ahead), one after another in this thread. Best effort: a model that is not installed,
    or a step that fails, is left to its page, which says why."""
    import os

    if os.environ.get(WARM_MODELS, "1") == "0":
        return
    from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

    from appkit import served
    from appkit.lesson import ahead
    from appkit.lesson.common import SCHEMA

    offered = served.offered()
    values = {name: param.default for name, param in SCHEMA.items()}
    works = [lambda: _waited(lambda: served.example_scan("smollm2"))] if "smollm2" in offered else []
    works += [lambda step=step: ahead.STEPS[step](values) for step in sorted(ahead.STEPS)]
    for work in works:
        try:
            work()
        except (Exception, ScriptControlException):  # noqa: BLE001  a model not installed stops its page, not this
            _LOGGER.info("The warm-up left one of the models' first uses to its page", exc_info=True)


def _waited(job) -> None:
    """A job's result waited for (one model's work at a time on the warm-up's side of the CPU)."""
    while job() is None:
        time.sleep(1.0)


def _build_keyed() -> None:
    """gensim's KeyedVectors of GloVe (about 1.5 s: gensim's import, then the vectors added), built once the first
    page has run, so that its heatmap does not wait for them nor share the CPU with them."""
    try:
        FIRST_RUN.wait(FIRST_RUN_WAIT_SECONDS)
        vectors.keyed_glove()
    except Exception:  # noqa: BLE001  the pages then build them themselves
        _LOGGER.warning("The warm-up could not build GloVe's KeyedVectors", exc_info=True)
    finally:
        vectors.keyed_built()
        # gensim's and the vectors' objects live as long as the server: frozen, like the warm-up's (see _load). The
        # garbage of the first page's run is collected first, so that only what still lives is frozen.
        gc.collect()
        gc.freeze()
    _warm_models()


def _one_blas_thread() -> None:
    """numpy's and scipy's OpenBLAS on one thread, in this server only. Its idle threads spin-wait after each call
    (gensim's nearest words is one 400,000 × 50 product per run): on our 2-core machine that was about 110 ms of CPU
    per run for no gain in time (bench_load --solo, README). torch's own threads are set per computation
    (attnviz.functional.cpu_threads)."""
    from threadpoolctl import ThreadpoolController

    ThreadpoolController().select(internal_api="openblas").limit(limits=1)


def _first_use(kv) -> None:
    """One small self-attention drawn as a figure: the first page's run then finds torch's and plotly's one-time
    set-up done."""
    from attnviz import figures
    from attnviz.embeddings import embed
    from attnviz.sentence import Config, run

    tokens = ["the", "dog", "was", "happy"]
    view = run(embed(tokens, kv).vectors, Config())
    figures.attention_heatmap(view.weights[0], tokens, scores=view.scores[0], clickable=True).to_plotly_json()


@contextmanager
def while_loading():
    """Until the warm-up is done, a line that says what the page waits for. Text, not the empty plotly chart it once
    was: that made the browser compile plotly.js (4.7 MB) while the first page's own heatmap, which needs none, was
    being drawn (the cold start's first heatmap came 0.4-0.8 s later with it). The slot is made on every run, empty
    once the warm-up is done, so the page's elements keep their places: one that moved would be mounted anew, and a
    heatmap's change not yet sent would be lost with it. Cleared once the page has run, which also lets the warm-up
    build GloVe's KeyedVectors (FIRST_RUN)."""
    slot = st.empty()
    if not READY.is_set():
        slot.caption("Loading GloVe and the attention engine…")
    try:
        yield
    finally:
        slot.empty()
        FIRST_RUN.set()
