"""appkit/beacon: a heatmap's paused view told to the server without a page run. What is posted is checked as a link's
values are, answered with the link, kept for the session's next run (which takes it into its session state, or into
what another page showed), bounded in memory; a bad or long post gets a clear answer and changes nothing."""

import asyncio
import concurrent.futures
import json

import pytest
from pathlib import Path
from streamlit.testing.v1 import AppTest

from page_support import component_data

from appkit import beacon as _beacon
from attnviz.urlstate import Param, boolean, choice, encode_bool, int_range, nearest

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"text": Param("the dog", str), "temp": Param(1.0, nearest([0.5, 1.0, 2.0])),
          "hard": Param(False, boolean, encode_bool), "mask": Param("none", choice(["none", "causal"])),
          "query": Param(0, int_range(0, 100))}


@pytest.fixture
def beacon():
    """A token registered for SCHEMA, as token_for does for a page's heatmap; removed after."""
    token = "t" * 22
    _beacon._beacons[token] = _beacon.Beacon("page", SCHEMA)
    yield token
    _beacon._beacons.pop(token, None)


def run(coroutine):
    """The coroutine run to its end on a loop of its own, in a thread: a test before may have left a loop running in
    this one (playwright's sync API does)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def post(token, view, search=""):
    return _beacon.receive(json.dumps({"token": token, "view": view, "search": search}).encode())


def test_a_posted_view_is_checked_kept_and_answered_with_the_link(beacon):
    status, answer = post(beacon, {"temp": 0.52, "hard": True, "mask": "diagonal", "query": 3, "evil": "<script>"},
                          "?text=the+cat&temp=2.0&present=1")
    assert status == 200
    # τ goes to the nearest allowed value, an unknown mask to its default (out of the link), other names are dropped
    assert answer["search"] == "?text=the+cat&temp=0.5&present=1&hard=1&query=3"
    assert _beacon._beacons[beacon].views[-1]["temp"] == 0.52  # kept as sent: checked again when a run takes it


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'{"token": 1, "view": {}}', b'{"token": "x"}',
                                  b'{"token": "x", "view": [], "search": ""}', b'{"token": "x", "view": {}, "search": 5}'])
def test_a_malformed_post_gets_400_and_changes_nothing(body, beacon):
    status, answer = _beacon.receive(body)
    assert status == 400 and "expected JSON" in answer["error"]
    assert _beacon._beacons[beacon].views == []


def test_an_unknown_token_gets_404():
    status, answer = post("no-such-token", {"temp": 2.0})
    assert status == 404 and "reruns" in answer["error"]


def test_the_store_is_bounded(monkeypatch):
    monkeypatch.setattr(_beacon, "TOKENS_KEPT", 5)
    monkeypatch.setattr(_beacon, "_beacons", _beacon.OrderedDict())
    monkeypatch.setattr(_beacon.st, "session_state", {})  # one session's state, outside a run
    tokens = [_beacon.token_for(f"key{k}", "page", SCHEMA) for k in range(12)]
    assert len(set(tokens)) == 12 and list(_beacon._beacons) == tokens[-5:]
    assert _beacon.token_for("key11", "page", SCHEMA) == tokens[-1]  # the same heatmap keeps its token
    assert post(tokens[0], {"temp": 2.0})[0] == 404  # evicted: that browser falls back to a rerun


def test_the_middleware_answers_the_post_and_passes_the_rest_on(beacon):
    passed = []

    async def streamlit(scope, receive, send):
        passed.append(scope["path"])

    async def call(path: str, body: bytes, method: str = "POST"):
        chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)] or [b""]
        messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        sent = []

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)
        await _beacon.ViewBeacon(streamlit)({"type": "http", "method": method, "path": path}, receive, send)
        return sent

    good = json.dumps({"token": beacon, "view": {"temp": 2.0}, "search": ""}).encode()
    sent = run(call("/base/_attnviz/view", good))
    assert sent[0]["status"] == 200 and json.loads(sent[1]["body"]) == {"search": "?temp=2.0", "seq": 1}
    too_long = run(call("/_attnviz/view", b" " * (_beacon.BODY_LIMIT + 5000)))
    assert too_long[0]["status"] == 413
    run(call("/_attnviz/view", good, method="GET"))
    run(call("/_stcore/health", b""))
    assert passed == ["/_attnviz/view", "/_stcore/health"]


def live(at) -> dict:
    return next(d for d in (component_data(c) for c in at.get("bidi_component")) if "scores" in d)


def test_the_next_run_takes_the_view_a_pause_posted_on_self_attention(glove):
    at = AppTest.from_file(str(ROOT / "pages" / "self_attention.py"), default_timeout=120)
    at.query_params["text"] = "the dog ran home"
    at.run()
    data = live(at)
    token = data["beacon"]["token"]  # the default page: no server view depends on the heatmap's view
    assert data["beacon"]["url"] == "/_attnviz/view"
    assert data["beacon"]["taken"] == 0
    status, answer = post(token, {**data["view"], "temp": 0.5, "hard": True, "query": 2}, "?text=the+dog+ran+home")
    assert status == 200 and answer["search"] == "?text=the+dog+ran+home&temp=0.5&hard=1&query=2"
    assert answer["seq"] == 1 and post(token, {**data["view"], "temp": 0.5, "hard": True, "query": 2})[1]["seq"] == 2
    assert at.session_state.temp == 1.0  # nothing ran yet
    at.text_area(key="text").set_value("the dog ran home fast").run()  # the next run, for another reason
    assert (at.session_state.temp, at.session_state.hard, at.session_state.query) == (0.5, True, 2)
    assert live(at)["view"]["temp"] == 0.5 and live(at)["view"]["hard"] is True
    assert live(at)["beacon"]["taken"] == 2  # the browser stops keeping its own view: this run has both posts
    posted = {**data["view"], "temp": 0.5, "hard": True, "query": 2}
    assert post(token, posted)[1]["seq"] == 3  # after the run took its views: not in its data
    assert live(at)["beacon"]["taken"] == 2
    at.toggle(key="near").set_value(True).run()  # the nearest words depend on the view: pauses rerun again
    assert "beacon" not in live(at)
    assert "(query #2)" in next(m.value for m in at.markdown if "weighted mix" in m.value)


def test_a_view_posted_before_leaving_a_page_is_what_the_page_shows_on_return(glove):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    token = live(at)["beacon"]["token"]
    assert post(token, {**live(at)["view"], "temp": 2.0})[0] == 200
    at.switch_page("pages/scoring.py").run()  # the other page's run takes the view into what this one showed
    at.switch_page("pages/self_attention.py").run()
    assert at.session_state.temp == 2.0 and live(at)["view"]["temp"] == 2.0
