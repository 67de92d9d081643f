"""A heatmap's paused view, told to the server without a page run.

The browser redraws τ, hard, the masks, the colour scale and the query on its own. Where no server-side view on the page
depends on them, the pause need not rerun the page: the browser posts the view to POST …/_attnviz/view (one small
HTTP request, about a millisecond of the server's time, against a rerun's 20 ms), the answer is the page's link with the
view in it, which the browser puts in its address bar, and the view is kept until the session's next run takes it into
its session state (load_url_state), so the next sentence, a page switch or a reload keeps it. Where a server-side view
does depend on it (Self-attention's nearest words, Inside a score, the step walk), the heatmap reruns the page as
before (appkit/interactive.interactive_heatmap's `beacon`).

A new sentence is told the same way where nothing the server drew depends on the sentence either (the page registers
a `sentence` function with the token): the sentence box posts the text to POST …/_attnviz/sentence, the answer is the
heatmap's data for it (its raw scores: a few milliseconds of the server's time, against a run's 17 ms) and the link,
and the text is kept as a posted view is. Where the function says the page must run (an unknown word, a long text),
the answer says so and the box asks for the run.

What is posted is checked as a link's values are (attnviz.urlstate.coerce) against the page's URL schema, registered
with the token the page sent the browser; the store is bounded (TOKENS_KEPT), so memory does not grow with sessions."""

from __future__ import annotations

import asyncio
import secrets
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from attnviz.asgi import TooLarge, loads, read_body, respond
from attnviz.urlstate import Param, coerce, encode_params

PATH = "/_attnviz/view"
SENTENCE_PATH = "/_attnviz/sentence"
BODY_LIMIT = 16_384  # bytes: a view is a few hundred; a longer body is refused unread
TOKENS_KEPT = 20_000  # the tokens remembered (a session has one per heatmap it showed): the oldest go first
SESSION_TOKENS = "_beacon_tokens"  # session key: {token: page id} of the heatmaps this session was sent


@dataclass
class Beacon:
    page: str  # the page's id (its schema's names), as load_url_state keys what a page showed
    schema: dict[str, Param]
    views: list[dict] = field(default_factory=list)  # posted, not yet taken by a run (the last one counts)
    posted: int = 0  # views posted so far: each answer gives the browser its number
    taken: int = 0  # the number of the last view a run took: the browser keeps a later one it posted (see taken())
    # text → the heatmap's data for that sentence, or None where the page must run for it; None: every sentence runs
    sentence: Callable[[str], dict | None] | None = None


_beacons: OrderedDict[str, Beacon] = OrderedDict()
_lock = threading.Lock()


def token_for(key: str, page: str, schema: dict[str, Param],
              sentence: Callable[[str], dict | None] | None = None) -> str:
    """This session's token for the heatmap `key` on `page` (made once, and registered for the handler), with what a
    posted sentence gets (None: the page runs for every sentence) as of this run."""
    token = registered(key, page, sentence)
    if token:
        return token
    token = secrets.token_urlsafe(16)
    st.session_state.setdefault(SESSION_TOKENS, {})[token] = (page, key)
    with _lock:
        _beacons[token] = Beacon(page, schema, sentence=sentence)
        while len(_beacons) > TOKENS_KEPT:
            _beacons.popitem(last=False)
    return token


def registered(key: str, page: str, sentence: Callable[[str], dict | None] | None = None) -> str | None:
    """This session's token for the heatmap `key` on `page` where it has one (it then gets `sentence`), else None."""
    for token, (where, name) in st.session_state.get(SESSION_TOKENS, {}).items():
        if where == page and name == key:
            with _lock:
                if token in _beacons:
                    _beacons.move_to_end(token)
                    _beacons[token].sentence = sentence
                    return token
    return None


def take() -> dict[str, dict]:
    """Views posted for this session's heatmaps since its last run, checked: {page id: values}, the latest last."""
    taken: dict[str, dict] = {}
    for token, (where, _) in st.session_state.get(SESSION_TOKENS, {}).items():
        with _lock:
            beacon = _beacons.get(token)
            views, schema = (beacon.views, beacon.schema) if beacon else ([], None)
            if beacon:
                beacon.views, beacon.taken = [], beacon.posted
        for view in views:
            taken.setdefault(where, {}).update(coerce(view, schema))
    return taken


def waiting() -> bool:
    """Whether this session's heatmaps posted a view (or a sentence) that no run has taken yet: a fragment that reruns
    alone on its arguments from the last run (a nested one) would draw the view before it."""
    with _lock:
        return any(_beacons[token].views for token in st.session_state.get(SESSION_TOKENS, {}) if token in _beacons)


def taken(token: str) -> int:
    """The number of the last view of `token` that a run took. The browser gets it with the heatmap's data: a view it
    posted with a later number went to the server after this run had begun, so the run's view lacks it, and the
    browser keeps its own (streamlit.mjs)."""
    with _lock:
        beacon = _beacons.get(token)
        return beacon.taken if beacon else 0


def posted(body: bytes, name: str, kind: type) -> tuple[str, object, str] | None:
    """(token, the body's `name`, search) of a posted JSON {"token", name, "search"}; None where it is not that."""
    try:
        sent = loads(body)
        token, value, search = sent["token"], sent[name], sent.get("search", "")
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if isinstance(token, str) and isinstance(value, kind) and isinstance(search, str):
        return token, value, search
    return None


def receive(body: bytes) -> tuple[int, dict]:
    """(HTTP status, answer) for a posted {"token", "view", "search"}: the view kept for the session's next run, and
    the page's link (`search`, the address's query) with it, and the view's number (`seq`)."""
    sent = posted(body, "view", dict)
    if sent is None:
        return 400, {"error": "expected JSON {token, view, search}"}
    token, view, search = sent
    with _lock:
        beacon = _beacons.get(token)
        if beacon is None:
            return 404, {"error": "unknown token: the page reruns to tell the server instead"}
        return 200, keep(beacon, view, search)


def keep(beacon: Beacon, view: dict, search: str) -> dict:
    """Keep `view` for the session's next run (the lock held): the answer, with the link and the view's number."""
    beacon.views = [*beacon.views[-7:], view]
    beacon.posted += 1
    return {"search": link(search, coerce(view, beacon.schema), beacon.schema), "seq": beacon.posted}


def receive_sentence(body: bytes) -> tuple[int, dict]:
    """(HTTP status, answer) for a posted {"token", "text", "search"}: the heatmap's data for the new sentence (`data`),
    with the text kept as a posted view and the link; or, where the page must run for it, `run` saying why."""
    sent = posted(body, "text", str)
    if sent is None:
        return 400, {"error": "expected JSON {token, text, search}"}
    token, text, search = sent
    with _lock:
        beacon = _beacons.get(token)
        make = beacon.sentence if beacon else None
    if beacon is None:
        return 404, {"error": "unknown token: the page reruns to tell the server instead"}
    data = make(text) if make else None  # outside the lock: the scores take a few milliseconds
    if data is None:
        return 200, {"run": "the page draws more from this sentence than the heatmap"}
    with _lock:
        return 200, {"data": data, **keep(beacon, {"text": text}, search)}


def link(search: str, values: dict, schema: dict[str, Param]) -> str:
    """The query string `search` with `values` put in, as save_url_state writes them (defaults left out)."""
    params = dict(urllib.parse.parse_qsl(search.lstrip("?"), keep_blank_values=True))
    shown = {name: param for name, param in schema.items() if name in values}
    encoded = encode_params(values, shown)
    for name in shown:  # in the schema's order, as save_url_state writes them; a default leaves the link
        if name in encoded:
            params[name] = encoded[name]
        else:
            params.pop(name, None)
    return "?" + urllib.parse.urlencode(params) if params else ""


class ViewBeacon:
    """ASGI middleware (st.App's `middleware`, in app.py) that answers POST …/_attnviz/view and …/_attnviz/sentence,
    under any base URL path, and passes every other request on to Streamlit."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive_message, send):
        path = scope["path"] if scope["type"] == "http" and scope["method"] == "POST" else ""
        if not path.endswith((PATH, SENTENCE_PATH)):
            return await self.app(scope, receive_message, send)
        try:
            body = await read_body(receive_message, BODY_LIMIT)
        except TooLarge:
            return await respond(send, 413, {"error": "too long"})
        if path.endswith(SENTENCE_PATH):  # the scores in a worker thread: the loop goes on serving the sockets
            status, answer = await asyncio.to_thread(receive_sentence, body)
        else:
            status, answer = receive(body)
        await respond(send, status, answer)


def url(path: str = PATH) -> str:
    """Where the browser posts (a view, or with SENTENCE_PATH a sentence): under the server's base URL path."""
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return (f"/{base}" if base else "") + path
