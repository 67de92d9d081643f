"""The models this server offers, each loaded once for every session, their runs in one byte-bounded cache, and the
model picker: the model pages and the lesson share them."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import streamlit as st

import attnviz
from attnviz import effects, heads, models, needle
from attnviz.models import census
from attnviz.cache import ByteBudgetCache, cache_root
from attnviz.models.catalog import Offer, offers
from appkit.common import md_escape

RESULT_CACHE_BYTES = 256 * 2**20  # a 64-piece run of SmolLM2 is ~20 MB; one of 512 pieces (~410 MB) is not kept
MODEL_KEY = "model"


@st.cache_resource
def offered() -> dict[str, Offer]:
    """name → what this server offers: the built-ins and the models it was started with (--model, ATTNVIZ_MODELS)."""
    return offers(sys.argv, dict(os.environ))


@st.cache_resource
def _models() -> tuple[ByteBudgetCache, dict[str, threading.Lock], threading.Lock]:
    """The loaded models, their weights together within the memory budget (models.memory_budget at the server's
    first load: ATTNVIZ_MODEL_BUDGET, else a share of the free memory); one lock a model, so that sessions asking at
    once load it once."""
    budget, _ = models.memory_budget()
    return ByteBudgetCache(budget, lambda loaded: loaded.nbytes, evicted=gc.collect), {}, threading.Lock()


def model(name: str) -> models.Model:
    """The offered model `name`, loaded once for every session and kept while the loaded models fit the memory budget:
    the least recently used goes first, and its memory comes back. A ModelError (not kept) says why it cannot load."""
    cache, locks, guard = _models()
    with guard:
        lock = locks.setdefault(name, threading.Lock())

    def load() -> models.Model:
        source = offered()[name].source
        note = models.first_load_note(source)
        with st.spinner("Loading the model's weights (once for every session)…" + (f" {note}" if note else "")):
            return models.load(source, name=name)

    with lock:
        return cache.get(name, load)


@st.cache_resource
def free_at_start() -> int | None:
    """The bytes this machine had free when the server started (the warm-up asks first), or None where that cannot be
    read: Long text's scan may take half of it (attnviz.models.scan.ScanBound)."""
    return models.free_memory()


@st.cache_resource
def _results() -> ByteBudgetCache:
    """Runs and their word-level weights, both measured by .nbytes."""
    return ByteBudgetCache(RESULT_CACHE_BYTES, lambda value: value.nbytes)


@dataclass
class Job:
    """Work done once for the machine in a thread of its own: how far it has got (and, in words, at what), then its
    result or its error."""

    done: int = 0
    total: int = 0
    result: object | None = None
    error: Exception | None = None
    what: str = ""
    ended: threading.Event = field(default_factory=threading.Event)

    def update(self, done: int, total: int, what: str | None = None) -> None:
        self.done, self.total = done, total
        self.what = self.what if what is None else what

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None


@st.cache_resource
def _jobs() -> tuple[dict[tuple, Job], threading.Lock]:
    return {}, threading.Lock()


def shared_job(key: tuple, work, kept=None) -> Job:
    """The job `key`: `work(progress)` started once for every session (progress(done, total[, what]) as it goes),
    unless `kept()` already has the result (from the disk). Whoever asks while it runs gets the same job."""
    jobs, lock = _jobs()
    with lock:
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = Job(result=kept() if kept else None)
            if job.result is None:
                threading.Thread(target=_work, args=(job, work), daemon=True, name=f"job-{'-'.join(map(str, key))}").start()
            else:
                job.ended.set()
    return job


def job_progress(key: tuple) -> tuple[int, int, bool]:
    """(done, of how many, whether the result or an error is in) of the job `key`; (0, 0, False) before it starts."""
    job = _jobs()[0].get(key)
    return (0, 0, False) if job is None else (job.done, job.total, job.finished)


def _work(job: Job, work) -> None:
    try:
        job.result = work(job.update)
    except Exception as error:  # said on the page that asked (HeadsError, ModelError, a full disk)
        job.error = error
    finally:
        job.ended.set()


@dataclass(frozen=True)
class Work:
    """A step's heavy part as a job of the server's (shared_job): `compute(progress)` once for every session. A page
    asks `ready`, which never waits: while the job runs, its place shows a progress bar saying what it computes; the
    lesson's warm-up and the class's next step ask `result`, which waits."""

    key: tuple
    compute: object  # (progress(done, total, what)) -> the result
    what: str  # what the bar says it computes

    def job(self) -> Job:
        return shared_job(self.key, self.compute)

    def result(self):
        job = self.job()
        job.ended.wait()
        if job.error is not None:
            raise job.error
        return job.result

    def ready(self, where):
        """The result, or None while it is computed: a bar in `where` then tells how far, and the page is drawn again
        when it is done. Raises what the computation raised."""
        job = self.job()
        if job.error is not None:
            raise job.error
        if job.result is None:
            with where:
                _computing(self.key, self.what)
        return job.result


@st.fragment(run_every=1.0)
def _computing(key: tuple, what: str) -> None:
    """A job's progress, checked every second; when it is done, the whole page is drawn again."""
    job = _jobs()[0].get(key)
    if job is None or job.finished:
        st.rerun(scope="app")
    part = f" ({job.what})" if job.what else ""
    st.progress(job.done / job.total if job.total else 0.0,
                text=f"{what}: {job.done:,} of {job.total or '…'}{part}. Computed once for every session.")


def loaded_then(name: str, progress, parts: int, what: str) -> models.Model:
    """The model `name` inside a job, its loading told as the first of `parts` + 1 parts of the progress (the rest
    are `what`)."""
    progress(0, parts + 1, f"loading {name}'s weights")
    chosen = model(name)
    progress(1, parts + 1, what)
    return chosen


def head_types(name: str) -> heads.Measured | None:
    """Every head of the offered model `name` scored over the corpus and the induction probe (attnviz.heads): read
    from the disk, where they are kept by the model's content (`attnviz heads` writes them there too), else measured
    once for the machine in a thread of its own, so that no page waits (about 11 s for SmolLM2 here, 4 s for
    MiniLM). None while they are measured (head_types_progress says how far); raises what the measure raised."""
    chosen = model(name)
    job = shared_job(("heads", name), lambda progress: heads.cached(chosen, progress=progress), lambda: heads.kept(chosen))
    if job.error is not None:
        raise job.error
    return job.result


def head_types_progress(name: str) -> tuple[int, int, bool]:
    """(sequences measured, of how many, whether the scores or an error are in)."""
    return job_progress(("heads", name))


def induction_work(name: str) -> Work:
    """The induction probe alone (a few seconds): duplicate and induction scores, and the shuffled control."""
    def compute(progress):
        chosen = loaded_then(name, progress, 1, f"the {2 * heads.PROBES} probe sequences")
        return heads.probe_scores(chosen, heads.PROBES, heads.PROBE_PIECES, heads.SEED)

    return Work(("induction", name), compute, "Finding the copying head")


def induction(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """induction_work's result, waited for."""
    return induction_work(name).result()


def run(name: str, text: str, target: str | None = None, intervention=None) -> models.Run:
    """The model's run on `text` (an encoder–decoder's: on `text` and `target`, or its own output), shared by sessions;
    with `intervention` (attnviz.effects), the run it changes, kept apart from the model's own."""
    if intervention is None:
        return _results().get((name, text, target, None), lambda: model(name).run(text, target))
    return _results().get((name, text, target, intervention), lambda: model(name).run(text, target, intervention))


@dataclass(frozen=True)
class Kept:
    """A small result in the shared run cache: the value, and the bytes it is counted as."""
    value: object
    nbytes: int


def shared(key: tuple, compute, nbytes: int = 64 * 1024):
    """compute()'s value, once for every session: kept in the run cache, and sessions that ask at once wait for one
    computation (a class reaching a step together computes its numbers once). `key` names the model and inputs."""
    return _results().get(("shared", *key), lambda: Kept(compute(), nbytes)).value


def every_head_of(name: str, text: str, how: str, piece: int | None) -> effects.EveryHead:
    """effects.every_head on `text` (every head removed in turn; `piece` an encoder's), shared by sessions like runs."""
    return _results().get((name, text, "effects", "heads", how, piece),
                          lambda: effects.every_head(model(name), text, how, piece=piece))


def contributions_of(name: str, text: str) -> effects.Contributions:
    """LM-TT's contributions and routes on `text` (effects.contributions_of), shared by sessions like runs."""
    return _results().get((name, text, "effects", "contributions"),
                          lambda: effects.contributions_of(model(name), run(name, text)))


def logit_attribution_of(name: str, text: str) -> effects.LogitAttribution:
    """Direct logit attribution on `text` (effects.logit_attribution_of), shared by sessions like runs."""
    return _results().get((name, text, "effects", "logits"),
                          lambda: effects.logit_attribution_of(model(name), run(name, text)))


def importance_of(name: str, text: str, piece: int | None, progress=None) -> effects.Importance:
    """The six importance measures beside occlusion on `text` (effects.importance; `piece` an encoder's), shared by
    sessions like runs. `progress(done, total, what)` hears of each measure."""
    return _results().get((name, text, "effects", "importance", piece),
                          lambda: effects.importance(model(name), text, piece=piece, progress=progress))


def importance_work(name: str, text: str) -> Work:
    """importance_of at the last piece, as a job (lesson step 18)."""
    def compute(progress):
        loaded_then(name, progress, len(effects.MEASURES), "the measures")
        return importance_of(name, text, None, lambda done, total, what: progress(1 + done, 1 + total, what))

    return Work(("importance", name, text), compute, "Ranking the pieces seven ways")


def probe_run(name: str, length: int, seed: int, shuffled: bool, cut: int,
              intervention=None) -> tuple[heads.Probe, models.Run]:
    """A probe of `length` random pieces repeated twice (seeded), cut short (heads.cut_short), and the model's run on
    it (with `intervention`, attnviz.effects), shared by sessions like any run (lesson steps 16 and 17 draw it on every
    rerun)."""
    chosen = model(name)
    probe = heads.probes(chosen, 1, length, seed)[0]
    pieces = heads.cut_short(chosen, probe, shuffled=shuffled, cut=cut)
    result = _results().get((name, "probe", length, seed, shuffled, cut, intervention),
                            lambda: chosen.run_pieces(pieces, intervention=intervention))
    return probe, result


def generation(name: str, text: str, steps: int, temperature: float, top_k: int, top_p: float, seed: int):
    """model.generate on `text` with these settings (attnviz.models.generate), shared by sessions like runs: the same
    settings, the same pieces, so a link replays it."""
    return _results().get((name, text, "generate", steps, temperature, top_k, top_p, seed),
                          lambda: model(name).generate(text, steps, temperature, top_k, top_p, seed))


def word_weights(name: str, text: str, result: models.Run) -> np.ndarray:
    """(L, H, m, m): every head read as words, computed once per text rather than on every rerun (0.17 s at 512 pieces)."""
    return _results().get((name, text, "words"), lambda: models.merge_pieces(result.weights, result.words.groups))


def one_more(name: str, text: str, token: int) -> str:
    """The text with `token` appended. Its run comes from the K/V cache of `text`'s (one new row per head) where the
    longer text reads as the same pieces plus `token` and the model is computed by attnviz, else from a whole forward
    when it is next drawn."""
    chosen = model(name)
    result = run(name, text)
    grown = chosen.reader.append(result.pieces, token)
    if isinstance(chosen, models.EngineModel) and chosen.tokenizer.encode(grown.text).ids == grown.ids:
        _results().get((name, grown.text, None, None), lambda: chosen.extend(result, token))
    return grown.text


def pick_model(kinds: tuple[str, ...], default: str, *, label: str = "Model") -> str:
    """The model picker over the offered models of `kinds` (session state and URL `model`), in the sidebar. A name
    this server does not offer, or one of another kind, gets a message, and the page shows `default`."""
    offers_ = offered()
    names = [name for name, offer in offers_.items() if offer.kind in kinds or offer.kind is None]
    asked = st.session_state.get(MODEL_KEY, default)
    if asked not in names:
        if asked in offers_:
            kind = offers_[asked].kind
            st.warning(f"{md_escape(asked)} is {models.a_or_an(kind or 'unknown kind of')} model, not one this page draws; "
                       f"showing {default}. " + ("Decoders open on the Decoder page." if kind == "decoder" else
                                                 "Encoders and encoder–decoders open on the Trained model page."))
        else:
            st.warning(f"This server offers no model called “{md_escape(str(asked)[:80])}”, so the page shows {default}. "
                       f"It offers: {', '.join(names)}. A server offers the models it was started with "
                       "(attnviz --model PATH, or ATTNVIZ_MODELS).")
        st.session_state[MODEL_KEY] = default
    return st.sidebar.selectbox(label, names, key=MODEL_KEY, format_func=lambda n: n if offers_[n].builtin else f"{n} (yours)",
                                help="The built-in models, and those this server was started with (attnviz --model "
                                     "PATH, or the ATTNVIZ_MODELS setting). A page cannot open other files.")


def load_or_stop(name: str, stop) -> models.Model:
    """The model `name`, or `stop(message)` where it cannot be loaded (its files, its budget, a package missing)."""
    try:
        return model(name)
    except models.ModelError as error:
        stop(f"The model “{name}” cannot be loaded: {error}")
    except (ImportError, FileNotFoundError) as error:
        stop(f"The model “{name}” is not installed: {error}")


EXAMPLE_PIECES = 600  # the example pass-key document: past the 512 a run reads, scanned in seconds on a laptop's CPU
EXAMPLE_KEY = "48213"


@st.cache_resource(max_entries=4, show_spinner=False)
def example_document(name: str) -> needle.Haystack:
    """The example pass-key document for model `name`: the needle halfway, within the model's context (MiniLM reads
    512 pieces). Long text and the lesson share it."""
    chosen = model(name)
    return needle.haystack(chosen, min(EXAMPLE_PIECES, chosen.context), 0.5, EXAMPLE_KEY)


def example_needle_work(name: str) -> Work:
    """What model `name` writes after the example document's question, and each head's retrieval events while it
    copies: (Written, events (L, H), needle pieces copied). Once for every session."""
    def compute(progress):
        chosen = loaded_then(name, progress, 1, "the document")
        stack = example_document(name)
        written = needle.write(chosen, stack.pieces, len(chosen.reader(f" {EXAMPLE_KEY}.", limit=10**6)) + 2,
                               progress=lambda done, total: progress(1 + done, 1 + total, "the document, layer by layer"))
        return (written, *needle.retrievals(stack.pieces.ids, stack.needle, written.ids, written.rows))

    return Work(("needle", name), compute, "Reading the example pass-key document")


def example_needle(name: str) -> tuple:
    """example_needle_work's result, waited for."""
    return example_needle_work(name).result()


CENSUS_PIECES = 2000  # the lesson's long document: the window of 256 and the 4 sinks are an eighth of it


def census_document_work(name: str) -> Work:
    """The census (attnviz.models.census) of model `name` over a pass-key document of CENSUS_PIECES pieces, with its
    scan's progress: what lesson step 22 draws. The scan is dropped once its census is taken (it keeps about 200 MB;
    the census a few kB), and the census is kept on disk for the model's content and the document's text: once per
    machine, not per server (a restart reads it back)."""
    def compute(progress):
        chosen = loaded_then(name, progress, 1, "the document")
        stack = needle.haystack(chosen, min(CENSUS_PIECES, chosen.context), 0.5, EXAMPLE_KEY)
        path = census_path(chosen, stack.pieces.text)
        kept = census.load(path)
        if kept is not None:
            return kept
        told = [0]

        def scanned(done, total):
            told[0] = total
            progress(1 + done, 2 + total, "the document, block by block")

        scan = chosen.scan(stack.pieces.text, progress=scanned)
        progress(1 + told[0], 2 + told[0], "each head's census")
        found = census.census(scan)
        census.save(found, path)
        return found

    return Work(("census", name), compute, "Reading a long document with every head")


def census_path(chosen, text: str) -> Path:
    """Where the census of model `chosen` over `text` is kept: ATTNVIZ_CACHE (default ~/.cache/attnviz)/census/, by
    the model's content, the text, the census's FORMAT and attnviz's version."""
    said = hashlib.sha256(json.dumps([text, census.FORMAT, attnviz.__version__]).encode()).hexdigest()[:16]
    return cache_root() / "census" / f"{heads.model_key(chosen)}-{said}.npz"


def example_retrieval_scores(name: str) -> np.ndarray:
    """(L, H) each head's retrievals over the needle pieces copied, on the example pass-key document (example_needle):
    the lesson's step 20 draws them, and Long text stars and turns off their strongest."""
    _, events, copied = example_needle(name)
    return events / max(copied, 1)


def example_scan(name: str):
    """The example document's scan (model.scan), computed once for every session in a thread of its own (the server's
    warm-up starts it): it is only read. None while it is computed (example_scan_progress says how far); raises what
    the scan raised."""
    text = example_document(name).pieces.text
    job = shared_job(("scan", name), lambda progress: model(name).scan(text, progress=progress))
    if job.error is not None:
        raise job.error
    return job.result


def example_scan_progress(name: str) -> tuple[int, int, bool]:
    """(blocks scanned, of how many, whether the scan or an error is in)."""
    return job_progress(("scan", name))


TURN_WAIT_S = 1.0  # the longest a run waits for its turn before it goes on anyway
QUIET_S = 0.05  # in a class, bodies start once no run has started for this long: the room's headings go out first
QUIET_WAIT_S = 0.4  # the longest a body waits for that quiet
_turn = threading.Lock()
_started = [0.0]  # when the last run in turn started (time.monotonic)


def run_started() -> None:
    """A run that will take its turn has started (its page calls this before its heading)."""
    _started[0] = time.monotonic()


def _quiet() -> None:
    """Wait until no run has started for QUIET_S (at most QUIET_WAIT_S): while a class's reruns arrive, their
    headings are sent before any body takes the interpreter."""
    deadline = time.monotonic() + QUIET_WAIT_S
    while (left := _started[0] + QUIET_S - time.monotonic()) > 0 and time.monotonic() < deadline:
        time.sleep(min(left, 0.02))


@contextmanager
def in_turn(first: bool = False, room: bool = False):
    """A page's heavy part, run by one session at a time. When a class's 30 students rerun at once, their scripts
    share one interpreter lock: run side by side, every run ends about when the last does, and the loop that sends
    their pages waits behind them, so even a step's heading reached each student only then. In turn, every heading
    is sent at once and the runs end one after another. A run that waits TURN_WAIT_S goes on without its turn, so
    a long computation holds the others back by that much at most. A run that goes `first` (the presenter's: the
    projector is the room's screen) takes no turn and waits behind nobody. In a `room` (a class), a body also waits
    for the reruns to stop arriving (_quiet): measured on bench_room's steps 6-13, two runs each, alternated, the
    heading drawn in Chromium at p95 0.84 and 1.00 s with the wait, 1.11 and 1.12 s without."""
    if room and not first:
        _quiet()
    taken = False if first else _turn.acquire(timeout=TURN_WAIT_S)
    try:
        yield
    finally:
        if taken:
            _turn.release()
