"""The class's HTTP contract (attnviz.classroom.http) on a real uvicorn server: its bad inputs each get a clear 4xx
with nothing stored, a change reaches an open event stream, and a curious student's floods are refused with nothing
lost: classes need the teacher key, joins are limited per class, guessed codes get 429."""

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
KEY = "a-teacher-key-for-tests"


async def nothing(scope, receive, send):
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTNVIZ_TEACHER_KEY", KEY)
        store = stores.SQLiteStore(tmp_path_factory.mktemp("class") / "classes.sqlite")
        yield http.ClassRoutes(nothing, store)


@pytest.fixture(autouse=True)
def fresh_limits(request):
    """Each test starts with this client's misses and the classes' joins uncounted (they share one server)."""
    if "served" in request.fixturenames:
        routes = request.getfixturevalue("routes")
        routes.misses, routes.joins = http.Limiter(http.MISSES_PER_MINUTE, 60.0), http.Limiter(http.JOINS_PER_SECOND)


@pytest.fixture(scope="module")
def served(routes):
    store = routes.store
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(routes, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}{http.PATH}", store
    server.should_exit = True
    thread.join(10)


def call(url, body=None, raw: bytes | None = None, headers: dict | None = None):
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if data is not None or body is not None else "GET",
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_bad_requests_get_a_clear_4xx_and_store_nothing(served):
    base, store = served
    status, made = call(base, {"key": KEY})
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
                {"student": student}):
        assert call(f"{base}/{code}/answer", bad)[0] == 400
    assert call(f"{base}/{code}/answer", {})[0] == 403  # no student: the page is told to join
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


def test_a_class_starts_only_with_the_teacher_key(served):
    base, _ = served
    for body in ({}, {"key": "a guess"}, {"key": None}, {"key": 12}):
        status, answer = call(base, body)
        assert status == 403 and "teacher key" in answer["error"]
    assert call(base, {"key": KEY})[0] == 201


def test_nan_and_infinity_get_a_sentence(served):
    base, store = served
    code, secret = store.create()
    student = call(f"{base}/{code}/join", {})[1]["student"]
    store.act(code, secret, question=QUESTION)
    for raw in (b'{"student": "%s", "question": "s7-word", "value": NaN}', b'{"student": "%s", "question": "s7-word", "value": Infinity}'):
        status, answer = call(f"{base}/{code}/answer", raw=raw.replace(b"%s", student.encode()))
        assert status == 400 and answer["error"] == "The body must be JSON, with finite numbers."
    assert store.answers(code, "s7-word") == {}


def test_a_page_that_never_joined_is_told_so(served):
    base, store = served
    code, secret = store.create()
    store.act(code, secret, question=QUESTION)
    status, answer = call(f"{base}/{code}/answer", {"student": None, "question": "s7-word", "value": 1})
    assert status == 403 and "reload it to join" in answer["error"]


def test_a_join_flood_is_refused_and_a_real_student_still_joins_and_answers(served):
    """500 joins as fast as one client sends them: at most JOINS_PER_SECOND a second get in, the rest a 429 with a
    sentence, none fills the class (no page follows them); a real student then joins, is present and answers."""
    base, store = served
    code, secret = store.create()
    started = time.perf_counter()
    statuses = [call(f"{base}/{code}/join", {}) for _ in range(500)]
    seconds = time.perf_counter() - started
    joined = sum(status == 201 for status, _ in statuses)
    refused = [answer["error"] for status, answer in statuses if status == 429]
    assert joined + len(refused) == 500 and joined <= http.JOINS_PER_SECOND * (seconds + 1)
    assert refused and refused[0] == "Many students are joining at once: your page tries again in a moment."
    time.sleep(1.05)
    status, made = call(f"{base}/{code}/join", {})
    assert status == 201
    with urllib.request.urlopen(f"{base}/{code}/events?student={made['student']}", timeout=10) as stream:
        assert stream.readline().startswith(b"id: ")  # the page follows the class
        assert store.get(code).students == 1  # the flood's joins are not students
        store.act(code, secret, question=QUESTION)
        assert call(f"{base}/{code}/answer", {"student": made["student"], "question": "s7-word", "value": 1})[0] == 200
    assert list(store.answers(code, "s7-word").values()) == [1]
    deadline = time.time() + 5
    while store.get(code).students and time.time() < deadline:
        time.sleep(0.05)
    assert store.get(code).students == 0  # the page closed: no longer present
    assert call(base, {"key": KEY})[0] == 201  # the teacher still starts a class


def test_guessed_codes_are_answered_429_after_a_few(served):
    base, store = served
    code, _ = store.create()
    statuses = [call(f"{base}/{guess}")[0] for guess in ("ACDEFH", "ACDEFJ", "ACDEFK") * 100 if guess != code]
    assert statuses[:http.MISSES_PER_MINUTE] == [404] * http.MISSES_PER_MINUTE
    assert set(statuses[http.MISSES_PER_MINUTE:]) == {429}
    status, answer = call(f"{base}/{code}")  # this device waits a minute, even for the right code
    assert status == 429 and "wait a minute" in answer["error"]
    other = {"X-Forwarded-For": "10.1.2.3"}  # another student's device, behind the same local proxy
    assert call(f"{base}/{code}", headers=other)[0] == 200


def read_events(url, heard: list, count: int, events: list | None = None) -> None:
    """Read `count` data lines (or one named event) of a stream into `heard`."""
    with urllib.request.urlopen(url, timeout=10) as stream:
        name = None
        for raw in stream:
            if raw.startswith(b"event: "):
                name = raw[7:].strip().decode()
            elif raw.startswith(b"data: "):
                if name is not None and events is not None:
                    events.append((name, json.loads(raw[6:])))
                    return
                heard.append(json.loads(raw[6:]))
                if len(heard) >= count:
                    return


def test_results_stay_hidden_until_shown_and_the_console_sees_them_with_the_key(served):
    base, store = served
    code, secret = store.create()
    students = [call(f"{base}/{code}/join", {})[1]["student"] for _ in range(3)]
    assert call(f"{base}/{code}/present", {"secret": secret, "question": QUESTION})[0] == 200
    for student, value in zip(students, (0, 1, 1)):
        assert call(f"{base}/{code}/answer", {"student": student, "question": "s7-word", "value": value})[0] == 200
    public = call(f"{base}/{code}")[1]
    assert public["answered"] == 3 and "results" not in public and "key" not in public and "truth" not in public
    assert public["tally"] == {"answered": 3}  # how many, not what
    status, made = call(f"{base}/{code}/console", {"secret": "wrong"})
    assert status == 403
    request = urllib.request.Request(f"{base}/{code}/console", data=json.dumps({"secret": secret}).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        token = json.load(answer)["console"]
        cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{http.COOKIE}={code}.") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    console = call(f"{base}/{code}?console={token}")[1]
    assert console["results"] == [{"answered": 3, "counts": [1, 2, 0]}] and console["key"]["answer"] == 1
    assert console["key"]["right"] == 2 and secret not in json.dumps(console)
    assert call(f"{base}/{code}?console=guess")[0] == 403
    assert call(f"{base}/{code}/present", {"secret": secret, "shown": True})[0] == 200
    assert call(f"{base}/{code}")[1]["results"] == [{"answered": 3, "counts": [1, 2, 0]}]
    assert call(f"{base}/{code}/present", {"secret": secret, "round": 2})[0] == 200
    public = call(f"{base}/{code}")[1]
    assert public["round"] == 2 and public["answered"] == 0 and "results" not in public
    assert call(f"{base}/{code}/answer", {"student": students[0], "question": "s7-word", "value": 1})[0] == 200
    assert call(f"{base}/{code}/present", {"secret": secret, "revealed": True})[0] == 200
    public = call(f"{base}/{code}")[1]
    assert public["results"][1] == {"answered": 1, "counts": [0, 1, 0]}
    assert [r["right"] for r in public["truth"]["rounds"]] == [2, 1]
    assert [r["share"] for r in public["truth"]["rounds"]] == [pytest.approx(2 / 3), 1.0]
    assert (public["truth"]["right"], public["truth"]["share"]) == (1, 1.0)  # the last round, as before rounds
    assert public["tally"] == public["results"][1]
    for bad in ({"timer": 0}, {"timer": 1e9}, {"timer": True}, {"round": 3}, {"shown": "yes"}):
        assert call(f"{base}/{code}/present", {"secret": secret, **bad})[0] == 400


def test_a_removed_student_is_told_and_an_ended_class_closes_every_stream(served):
    base, store = served
    code, secret = store.create()
    student = call(f"{base}/{code}/join", {})[1]["student"]
    heard, events = [], []
    thread = threading.Thread(target=read_events, args=(f"{base}/{code}/events?student={student}", heard, 99, events))
    thread.start()
    deadline = time.time() + 5
    while not heard and time.time() < deadline:
        time.sleep(0.02)
    pseudonym = store.roster(code)[0].id
    assert call(f"{base}/{code}/remove", {"secret": secret, "student": pseudonym})[0] == 200
    thread.join(5)
    assert events == [("removed", {"error": "The teacher removed you from this class."})]
    heard, events = [], []
    listener = threading.Thread(target=read_events, args=(f"{base}/{code}/events", heard, 99, events))
    listener.start()
    while not heard and time.time() < deadline + 5:
        time.sleep(0.02)
    assert call(f"{base}/{code}/end", {"secret": "wrong"})[0] == 403
    assert call(f"{base}/{code}/end", {"secret": secret})[0] == 200
    listener.join(5)
    assert events == [("ended", {"error": "This class has ended."})]
    assert call(f"{base}/{code}")[0] == 404


def test_the_client_is_the_peer_unless_a_trusted_proxy_names_it(monkeypatch):
    def scope(peer, forwarded=None):
        headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
        return {"client": (peer, 5000), "headers": headers}

    assert http.client_of(scope("127.0.0.1", "198.51.100.7")) == "198.51.100.7"  # loopback: trusted by default
    assert http.client_of(scope("127.0.0.1", "1.2.3.4, 198.51.100.7")) == "198.51.100.7"  # the hop the proxy added
    assert http.client_of(scope("203.0.113.5", "198.51.100.7")) == "203.0.113.5"  # anyone else cannot pick a name
    assert http.client_of(scope("127.0.0.1", "not an address")) == "127.0.0.1"
    monkeypatch.setenv(http.PROXIES_SETTING, "172.28.0.0/24, nonsense")
    assert http.client_of(scope("172.28.0.10", "198.51.100.7")) == "198.51.100.7"
    assert http.client_of(scope("127.0.0.1", "198.51.100.7")) == "127.0.0.1"


def test_a_timer_closes_answers_and_more_time_extends_it(served):
    base, store = served
    code, secret = store.create()
    student = call(f"{base}/{code}/join", {})[1]["student"]
    before = time.time()
    assert call(f"{base}/{code}/present", {"secret": secret, "question": QUESTION, "timer": 60})[0] == 200
    deadline = call(f"{base}/{code}")[1]["deadline"]
    assert before + 60 <= deadline <= time.time() + 60
    assert call(f"{base}/{code}/present", {"secret": secret, "extend": 30})[0] == 200
    assert call(f"{base}/{code}")[1]["deadline"] == pytest.approx(deadline + 30)
    assert call(f"{base}/{code}/answer", {"student": student, "question": "s7-word", "value": 1})[0] == 200
    store.act(code, secret, deadline=time.time() - 1)  # time is up
    status, answer = call(f"{base}/{code}/answer", {"student": student, "question": "s7-word", "value": 2})
    assert status == 409 and "Time is up" in answer["error"]
    assert call(f"{base}/{code}/present", {"secret": secret, "timer": None})[0] == 200
    assert call(f"{base}/{code}")[1]["deadline"] is None
    assert list(store.answers(code, "s7-word").values()) == [1]


def test_the_compose_file_runs_two_replicas_over_one_redis_with_one_teacher_key():
    from pathlib import Path

    import yaml

    compose = yaml.safe_load((Path(__file__).parents[1] / "deploy" / "compose.yaml").read_text())
    services = compose["services"]
    assert "redis-server" in services["redis"]["command"]
    for name in ("app1", "app2"):
        env = services[name]["environment"]
        assert env["ATTNVIZ_CLASS_STORE"] == "redis://redis:6379/0" and "ATTNVIZ_TEACHER_KEY" in env
        assert env["ATTNVIZ_TRUSTED_PROXIES"] == services["balancer"]["networks"]["room"]["ipv4_address"]


def test_a_student_whose_stream_is_busy_stays_present(served, monkeypatch):
    """A page that keeps receiving events (the presenter moving the heatmap more often than the keep-alive) is still
    heard from: its presence is refreshed whatever the stream carries."""
    base, store = served
    monkeypatch.setattr(http, "KEEPALIVE_S", 0.3)
    monkeypatch.setattr(stores, "PRESENT_S", 1.0)
    code, secret = store.create()
    student = call(f"{base}/{code}/join", {})[1]["student"]
    with urllib.request.urlopen(f"{base}/{code}/events?student={student}", timeout=10) as stream:
        assert stream.readline().startswith(b"id: ")
        deadline = time.time() + 2.5  # 2.5 × PRESENT_S of changes every 0.1 s: no keep-alive is ever due
        while time.time() < deadline:
            store.act(code, secret, view={"temp": round(time.time() % 1, 3)})
            time.sleep(0.1)
        assert store.get(code).students == 1
