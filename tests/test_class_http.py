"""The class's HTTP contract (attnviz.classroom.http) on a real uvicorn server: its bad inputs each get a clear 4xx
with nothing stored, and a change reaches an open event stream."""

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
import uvicorn

from attnviz.classroom import http, store as stores
from attnviz.classroom.questions import Question
from class_support import free_port

QUESTION = Question("s7-word", 7, "pick", "Which word?", ("a", "b", "<b>c</b>"), 1).full()


async def nothing(scope, receive, send):
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = stores.SQLiteStore(tmp_path_factory.mktemp("class") / "classes.sqlite")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(http.ClassRoutes(nothing, store), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}{http.PATH}", store
    server.should_exit = True
    thread.join(10)


def call(url, body=None, raw: bytes | None = None):
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if data is not None or body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_bad_requests_get_a_clear_4xx_and_store_nothing(served):
    base, store = served
    status, made = call(base, {})
    assert status == 201
    code, secret = made["code"], made["secret"]
    student = call(f"{base}/{code}/join", {})[1]["student"]
    assert call(f"{base}/ZZZZZZ")[0] == 404 and call(f"{base}/bad!")[0] == 404
    assert call(f"{base}/{code}/present", {"secret": "wrong", "step": 3})[0] == 403
    assert call(f"{base}/{code}/answer", {"student": student, "question": "s7-word", "value": 1})[0] == 409  # not asked
    assert call(f"{base}/{code}/present", {"secret": secret, "question": QUESTION})[0] == 200
    for bad in ({"student": student, "question": "s7-word", "value": 7},  # no such option
                {"student": student, "question": "s7-word", "value": "1"},
                {"student": student, "question": "s7-word", "value": None},
                {"student": student}, {}):
        assert call(f"{base}/{code}/answer", bad)[0] == 400
    assert call(f"{base}/{code}/answer", {"student": "not a student", "question": "s7-word", "value": 1})[0] == 403
    assert call(f"{base}/{code}/answer", {"student": student, "question": "other", "value": 1})[0] == 409
    status, error = call(f"{base}/{code}/answer", raw=b'{"student": "' + b"x" * 5000 + b'"}')
    assert status == 413 and "4096 bytes" in error["error"]
    assert call(f"{base}/{code}/answer", raw=b"not json")[0] == 400
    assert call(f"{base}/{code}/present", {"secret": secret, "step": "seven"})[0] == 400
    assert call(f"{base}/{code}/present", {"secret": secret, "colour": 1})[0] == 400
    assert store.answers(code, "s7-word") == {}  # nothing stored by any of them
    time.sleep(1.1)  # the refused posts above counted against this student's second
    answers = [call(f"{base}/{code}/answer", {"student": student, "question": "s7-word", "value": 2})[0] for _ in range(8)]
    assert answers[:5] == [200] * 5 and 429 in answers[5:]  # at most 5 a second
    assert list(store.answers(code, "s7-word").values()) == [2]
    status, state = call(f"{base}/{code}")
    assert status == 200 and state["question"]["options"][2] == "<b>c</b>" and "answer" not in state["question"]
    assert "secret" not in json.dumps(state) and secret not in json.dumps(state)


def test_a_change_reaches_an_open_event_stream_within_a_second(served):
    base, store = served
    code, secret = store.create()
    lines = []

    def listen():
        with urllib.request.urlopen(f"{base}/{code}/events", timeout=10) as stream:
            for raw in stream:
                if raw.startswith(b"data: "):
                    lines.append((time.perf_counter(), json.loads(raw[6:])))
                    if len(lines) == 2:
                        return

    thread = threading.Thread(target=listen)
    thread.start()
    while not lines:
        time.sleep(0.01)
    assert lines[0][1]["step"] == 1  # the state at once, for a late joiner
    sent = time.perf_counter()
    store.act(code, secret, step=12, view={"temp": 0.5})
    thread.join(5)
    assert lines[1][1]["step"] == 12 and lines[1][1]["view"] == {"temp": 0.5}
    assert lines[1][0] - sent < 1.0


def test_the_limiter_allows_five_a_second():
    limiter = http.Limiter(5)
    assert [limiter.allow("a", now=t / 10) for t in range(7)] == [True] * 5 + [False] * 2
    assert limiter.allow("a", now=1.05) and limiter.allow("b", now=0.0)
