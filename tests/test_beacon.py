"""appkit/beacon: a heatmap's paused view told to the server without a page run. What is posted is checked as a link's
values are, answered with the link, kept for the session's next run (which takes it into its session state, or into
what another page showed), bounded in memory; a bad or long post gets a clear answer and changes nothing."""

import asyncio
import concurrent.futures
import json

import base64

import numpy as np
import pytest
from pathlib import Path
from streamlit.testing.v1 import AppTest

from page_support import component_data, glove_scores, type_sentence

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
    words = run(call("/_attnviz/sentence", json.dumps({"token": beacon, "text": "a cat", "search": ""}).encode()))
    assert words[0]["status"] == 200 and "run" in json.loads(words[1]["body"])  # a schema with no sentence function
    too_long = run(call("/_attnviz/view", b" " * (_beacon.BODY_LIMIT + 5000)))
    assert too_long[0]["status"] == 413
    run(call("/_attnviz/view", good, method="GET"))
    run(call("/_attnviz/sentence", good, method="GET"))
    run(call("/_stcore/health", b""))
    assert passed == ["/_attnviz/view", "/_attnviz/sentence", "/_stcore/health"]


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
    type_sentence(at, "the dog ran home fast")  # the next run, for another reason
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


def say(token, text, search=""):
    return _beacon.receive_sentence(json.dumps({"token": token, "text": text, "search": search}).encode())


def box(at) -> dict:
    return next(d for d in (component_data(c) for c in at.get("bidi_component")) if "max_chars" in d)


def test_a_new_sentence_posted_by_the_box_is_answered_with_its_scores_and_taken_by_the_next_run(glove):
    """The page as it opens draws nothing else from the sentence: the box posts to the sentence endpoint with the
    heatmap's token, the answer holds the new sentence's raw scores (the scaled-dot formula written out) and the link,
    nothing runs, and the next run has the sentence, drawn as the answer drew it."""
    at = AppTest.from_file(str(ROOT / "pages" / "self_attention.py"), default_timeout=120)
    at.query_params["text"] = "the dog ran home"
    at.run()
    token = live(at)["beacon"]["token"]
    assert box(at)["post"] == {"url": "/_attnviz/sentence", "token": token} and box(at)["text"] == "the dog ran home"
    status, answer = say(token, "a cat sat on the mat", "?text=the+dog+ran+home&temp=2.0")
    assert status == 200 and answer["search"] == "?text=a+cat+sat+on+the+mat&temp=2.0" and answer["seq"] == 1
    data = answer["data"]
    scores = np.frombuffer(base64.b64decode(data["scores"]), "<f4").reshape(data["n"], data["m"])
    np.testing.assert_allclose(scores, glove_scores(glove, "a cat sat on the mat"), rtol=1e-5, atol=1e-5)
    assert at.session_state.text == "the dog ran home"  # nothing ran
    at.run()  # the next run, for another reason
    assert at.session_state.text == "a cat sat on the mat" and box(at)["text"] == "a cat sat on the mat"
    assert live(at)["version"] == data["version"] and live(at)["beacon"]["taken"] == 1


@pytest.mark.parametrize("text, why", [("a qzxjvwk sat", "an unknown word draws a warning"), ("   ", "no words"),
                                       (" ".join(["dog"] * 70), "over the walk's 64 tokens")])
def test_a_sentence_that_draws_more_than_the_heatmap_is_answered_with_a_run_and_kept_nowhere(glove, text, why):
    at = AppTest.from_file(str(ROOT / "pages" / "self_attention.py"), default_timeout=120)
    at.query_params["text"] = "the dog ran home"
    at.run()
    status, answer = say(live(at)["beacon"]["token"], text)
    assert status == 200 and "run" in answer and "data" not in answer, why
    at.run()
    assert at.session_state.text == "the dog ran home"


def test_a_page_that_draws_from_the_sentence_runs_for_each_one(glove):
    """A page showing an unknown word's warning, or a server view below the heatmap, gets a run for every sentence:
    the box of the second has no endpoint, and the token's answer says so."""
    at = AppTest.from_file(str(ROOT / "pages" / "self_attention.py"), default_timeout=120)
    at.query_params["text"] = "the qzxjvwk ran"
    at.run()
    assert say(live(at)["beacon"]["token"], "a cat sat")[1].keys() == {"run"}  # the warning would stay on screen
    type_sentence(at, "the dog ran")
    token = live(at)["beacon"]["token"]
    assert "data" in say(token, "a cat sat")[1]
    at.run()
    at.toggle(key="near").set_value(True).run()  # the nearest words depend on the sentence
    assert "post" not in box(at) and "beacon" not in live(at)
    assert say(token, "a dog sat")[1].keys() == {"run"}


@pytest.mark.parametrize("body", [b"{}", b'{"token": 5, "text": "a"}', b'{"token": "x", "text": ["a"]}', b"nope"])
def test_a_malformed_sentence_post_gets_400(body):
    status, answer = _beacon.receive_sentence(body)
    assert status == 400 and "expected JSON" in answer["error"]


def test_a_sentence_for_an_unknown_token_gets_404():
    assert say("no-such-token", "a cat")[0] == 404


def test_the_sentence_function_holds_the_vectors_weakly(glove):
    """The beacon keeps a page's sentence function until its token is evicted, long after the session: the vectors
    it reads (an uploaded file's) must go when the session lets go of them; then the page runs for the sentence."""
    import gc

    from gensim.models import KeyedVectors

    from appkit.explorer import Request, browser_sentence
    from attnviz.sentence import Config

    uploaded = KeyedVectors(50)
    uploaded.add_vectors(["a", "cat", "sat"], glove[["a", "cat", "sat"]])
    raw = Request("upload:test", "a cat", False, "zero", Config(), 1000)
    drawn = browser_sentence(uploaded, raw, lambda computed, text: {"tokens": computed.embedded.tokens, "text": text})
    assert drawn("a cat sat") == {"tokens": ["a", "cat", "sat"], "text": "a cat sat"}
    assert drawn(" ") is None and drawn(" ".join(["cat"] * 65)) is None  # no words; more than the walk draws
    del uploaded
    gc.collect()
    assert drawn("a sat cat") is None
