"""Server start: app.py's st.App lifespan loads what the first page needs before the first browser asks for it.
Light on purpose (app.py imports it): the heavy imports happen in the warm-up thread."""

from __future__ import annotations

import gc
import logging
import threading
import time
from contextlib import asynccontextmanager

import streamlit as st

_LOGGER = logging.getLogger(__name__)
COLLECT_SECONDS = 10.0  # the server's garbage collection: one full collection this often (see _collect)
READY = threading.Event()  # set once the warm-up has ended (loaded; or failed, and the pages load GloVe themselves)
IMPORTED = threading.Event()  # set once the warm-up thread has imported torch, gensim and the engine (or failed to)
STARTED = threading.Event()  # set when the lifespan starts the warm-up (never under AppTest, or a page run alone)
IMPORT_WAIT_SECONDS = 120.0


@asynccontextmanager
async def lifespan(_app):
    """Starts the warm-up in a thread, so the server answers the first browser meanwhile."""
    from streamlit.runtime.pages_manager import PagesManager

    # Else the server's first session runs in Streamlit's legacy pages/ mode: a link straight to /kv_database would
    # run that page without app.py (no menu, no page config) until some run called st.navigation.
    PagesManager.uses_pages_directory = False
    import pandas  # noqa: F401  before any session: plotly and Streamlit import it lazily, from any thread
    import plotly.io  # noqa: F401

    STARTED.set()
    threading.Thread(target=_load, name="attnviz-warm-up", daemon=True).start()
    threading.Thread(target=_collect, name="attnviz-collector", daemon=True).start()
    yield


def _collect(stop: threading.Event | None = None, seconds: float = COLLECT_SECONDS) -> None:
    """A full garbage collection every `seconds`, in place of Streamlit's after every run (runner.postScriptGC, off in
    .streamlit/config.toml and in the attnviz command). Streamlit's walked every live object after every run: with 30
    sessions open, 11 ms a run held under the GIL, growing with the sessions (bench_load). Reference counting still
    frees most of a run's objects as it ends; what sits in reference cycles is freed within `seconds`."""
    stop = stop or threading.Event()
    while not stop.wait(seconds):
        gc.collect()


def wait_for_imports() -> None:
    """A session's script waits here until the warm-up thread has imported torch, gensim and the engine. Two threads
    importing the same modules at once can hand one of them a module the other has only half made ("partially
    initialized module 'pandas' has no attribute 'Series'"); one thread imports them, the others wait. Without a
    warm-up (AppTest, a page run alone) it returns at once."""
    if STARTED.is_set():
        IMPORTED.wait(IMPORT_WAIT_SECONDS)


def _load() -> None:
    try:
        try:
            from appkit.common import glove  # the torch and gensim imports are most of the work
            import attnviz.models  # noqa: F401  the model pages' engine, and transformers' tokenizers
        finally:
            IMPORTED.set()  # on failure too: the sessions then import for themselves
        kv = glove()
        _one_blas_thread()
        for attempt in (1, 2):
            try:
                _first_use(kv)
                break
            except Exception:  # noqa: BLE001  the warm-up only saves time: a failure must not stop the freeze below
                # Sessions that arrived during the warm-up once imported pandas and plotly beside it and handed it a
                # half-made module; they now wait for its imports (wait_for_imports). A second try stays, for safety.
                _LOGGER.warning("The warm-up's first figure failed (attempt %d)", attempt, exc_info=True)
                time.sleep(1)
    finally:
        # Streamlit collects garbage after every run (runner.postScriptGC). With torch, gensim, plotly and GloVe
        # loaded, a full collection walks ~300,000 objects that live as long as the server: about 150 ms of CPU held
        # under the GIL after each run, in which the server sends nothing. Frozen, they are no longer walked (a
        # collection then takes about 10 ms); they are still freed by reference counting if ever dropped. Frozen
        # whatever happened above: a failed warm-up once left every later run paying the full collection.
        gc.freeze()
        READY.set()


def _one_blas_thread() -> None:
    """numpy's and scipy's OpenBLAS on one thread, in this server only. Its idle threads spin-wait after each call
    (gensim's nearest words is one 400,000 × 50 product per run): on our 2-core machine that was about 110 ms of CPU
    per run for no gain in time (bench_load --solo, README). torch's own threads are set per computation
    (attnviz.attention.cpu_threads)."""
    from threadpoolctl import ThreadpoolController

    ThreadpoolController().select(internal_api="openblas").limit(limits=1)


def _first_use(kv) -> None:
    """One small self-attention drawn as a figure: the first page's run then finds torch's and plotly's one-time
    set-up done."""
    from attnviz import figures
    from attnviz.embeddings import embed
    from attnviz.selfattention import Config, run

    tokens = ["the", "dog", "was", "happy"]
    view = run(embed(tokens, kv).vectors, Config())
    figures.attention_heatmap(view.weights[0], tokens, scores=view.scores[0], clickable=True).to_plotly_json()


def while_loading():
    """Until the warm-up is done, an empty chart with a loading title: the browser fetches and compiles plotly.js
    (4.7 MB) while the page waits for torch, gensim and GloVe, rather than after. Returns its slot, to clear once
    the page has run. The slot is made on every run, empty once the warm-up is done, so the page's elements keep
    their places: one that moved would be mounted anew, and a heatmap's change not yet sent would be lost with it."""
    slot = st.empty()
    if READY.is_set():
        return slot
    slot.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}],
                       "layout": {"title": {"text": "Loading GloVe and the attention engine…"}, "height": 80,
                                  "xaxis": {"visible": False}, "yaxis": {"visible": False}}},
                      config={"staticPlot": True})
    return slot
