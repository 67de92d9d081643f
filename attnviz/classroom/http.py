"""A class's HTTP contract (docs/urls.md), as ASGI middleware in front of the app (app.py), under any base URL path:

    GET  /_attnviz/class/{code}          the state as JSON (live.public_state)
    GET  /_attnviz/class/{code}/events   Server-Sent Events: one JSON `data:` line per change (`?tally=1`: answers and
                                         joins too, for the projector; else the presenter's changes only)
    POST /_attnviz/class                 a new class: {code, secret}
    POST /_attnviz/class/{code}/join     a new student: {student}
    POST /_attnviz/class/{code}/answer   {student, question, value}
    POST /_attnviz/class/{code}/quiz     {student, phase, answers: {item id: option index}}
    POST /_attnviz/class/{code}/present  {secret, step?, params?, view?, revealed?, quiz?}: the presenter's change

Bad input gets a 4xx with {"error": a sentence} and nothing stored: an unknown or expired code (404), a wrong secret
(403), an unknown student (403), an answer to a closed question (409), a body over 4 KB (413), more than 5 answers a
second from one student (429). Every change reaches the event streams through one Broker per process, which hears the
store (in this process for SQLite, through Redis pub/sub across replicas) and sends each class's new state to its
streams at most once per COALESCE_S."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import OrderedDict, deque

from attnviz.classroom import live
from attnviz.classroom.questions import Question
from attnviz.classroom.quiz import PHASES, QuizError, load as load_quiz
from attnviz.classroom.store import MAX_STUDENTS, ClassError, ClassStore, shared_store

PATH = "/_attnviz/class"
BODY_LIMIT = 4096  # bytes a POST may carry
ANSWERS_PER_SECOND = 5  # a student's answers (and quiz posts) in any one second
COALESCE_S = 0.1  # a class's streams get its state at most this often
KEEPALIVE_S = 15.0  # a comment line keeps an idle stream open through proxies
POLL_S = 2.0  # the broker also reads each watched class's counters this often (a change another process made)
STREAMS_PER_CLASS = 2 * MAX_STUDENTS  # students, projectors and a margin for reconnects


class Broker:
    """One per process: the event streams of each class, and the fan-out of its changes to them."""

    def __init__(self, store: ClassStore, loop: asyncio.AbstractEventLoop):
        self.store, self.loop = store, loop
        self.streams: dict[str, set[Stream]] = {}
        self.pending: set[str] = set()
        self.sent: dict[str, int] = {}  # code → the seq last sent
        store.listen(self.heard)
        self.poller = loop.create_task(self.poll())

    def heard(self, code: str, version: int, seq: int) -> None:
        """A change (any thread): the class's streams get its state within COALESCE_S."""
        self.loop.call_soon_threadsafe(self.due, code)

    def due(self, code: str) -> None:
        if code in self.streams and code not in self.pending:
            self.pending.add(code)
            self.loop.call_later(COALESCE_S, lambda: self.loop.create_task(self.send(code)))

    async def send(self, code: str) -> None:
        self.pending.discard(code)
        streams = self.streams.get(code)
        if not streams:
            return
        try:
            state = await asyncio.to_thread(self.state, code)
        except ClassError:
            state = None
        self.sent[code] = state["seq"] if state else -1
        for stream in list(streams):
            stream.offer(state)

    def state(self, code: str) -> dict:
        return live.public_state(self.store, self.store.get(code))

    async def poll(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(POLL_S / 4)
            if server_exiting():  # end every stream, or the server would wait for them before it stops
                for streams in self.streams.values():
                    for stream in streams:
                        stream.end()
            ticks += 1
            if ticks % 4:
                continue
            for code in list(self.streams):
                try:
                    record = await asyncio.to_thread(self.store.get, code)
                except ClassError:
                    record = None
                if record is None or record.seq != self.sent.get(code):
                    self.due(code)

    def open(self, code: str, tally: bool) -> "Stream":
        streams = self.streams.setdefault(code, set())
        if len(streams) >= STREAMS_PER_CLASS:
            raise ClassError(429, "This class has as many open pages as it can hold; close a tab and reload.")
        stream = Stream(tally)
        streams.add(stream)
        return stream

    def close(self, code: str, stream: "Stream") -> None:
        streams = self.streams.get(code, set())
        streams.discard(stream)
        if not streams:
            self.streams.pop(code, None)
            self.sent.pop(code, None)


class Stream:
    """One page's event stream: it keeps only the latest state not yet written (a slow page skips to the newest)."""

    def __init__(self, tally: bool):
        self.tally = tally
        self.version = None
        self.latest = None
        self.ended = False
        self.ready = asyncio.Event()

    def end(self) -> None:
        self.ended = True
        self.ready.set()

    def offer(self, state: dict | None) -> None:
        if state is not None and not self.tally and state["version"] == self.version:
            return  # a student's page hears of the presenter's changes, not of every answer
        self.version = state["version"] if state else None
        self.latest = state
        self.ready.set()


class Limiter:
    """At most `rate` events a second per key, for the most recent `kept` keys."""

    def __init__(self, rate: int, kept: int = 20_000):
        self.rate, self.kept = rate, kept
        self.seen: OrderedDict[str, deque] = OrderedDict()
        self.lock = threading.Lock()

    def allow(self, key: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self.lock:
            times = self.seen.pop(key, None) or deque()
            while times and now - times[0] >= 1.0:
                times.popleft()
            self.seen[key] = times
            while len(self.seen) > self.kept:
                self.seen.popitem(last=False)
            if len(times) >= self.rate:
                return False
            times.append(now)
            return True


class ClassRoutes:
    """ASGI middleware: answers PATH and below, and passes every other request on."""

    def __init__(self, app, store: ClassStore | None = None):
        self.app = app
        self._store = store
        self._broker: Broker | None = None
        self.limiter = Limiter(ANSWERS_PER_SECOND)

    @property
    def store(self) -> ClassStore:
        if self._store is None:
            self._store = shared_store()
        return self._store

    def broker(self) -> Broker:
        if self._broker is None:
            self._broker = Broker(self.store, asyncio.get_running_loop())
        return self._broker

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        at = path.find(PATH)
        if at < 0 or not (path[at + len(PATH):] == "" or path[at + len(PATH)] == "/"):
            return await self.app(scope, receive, send)
        parts = [p for p in path[at + len(PATH):].split("/") if p]
        try:
            await self.route(scope, receive, send, parts)
        except ClassError as error:
            await respond(send, error.status, {"error": str(error)})

    async def route(self, scope, receive, send, parts: list[str]) -> None:
        method = scope["method"]
        if method == "GET" and len(parts) == 1:
            state = await asyncio.to_thread(lambda: live.public_state(self.store, self.store.get(parts[0])))
            return await respond(send, 200, state)
        if method == "GET" and len(parts) == 2 and parts[1] == "events":
            return await self.events(scope, receive, send, parts[0])
        if method != "POST" or len(parts) > 2:
            raise ClassError(405 if len(parts) <= 2 else 404, "Not a class request: see docs/urls.md.")
        body = await read_body(receive)
        if not parts:
            code, secret = await asyncio.to_thread(self.store.create)
            return await respond(send, 201, {"code": code, "secret": secret})
        action = parts[1] if len(parts) == 2 else ""
        handlers = {"join": self.join, "answer": self.answer, "quiz": self.quiz, "present": self.present}
        if action not in handlers:
            raise ClassError(404, f"Unknown class action {action[:20]!r}: join, answer, quiz or present.")
        status, answer = await asyncio.to_thread(handlers[action], parts[0], body)
        await respond(send, status, answer)

    def limit(self, student: str) -> None:
        """ClassError 429 past ANSWERS_PER_SECOND posts from one student in a second (answers and quiz posts alike)."""
        if not self.limiter.allow(student):
            raise ClassError(429, f"At most {ANSWERS_PER_SECOND} answers a second: wait a moment.")

    def join(self, code: str, body: dict) -> tuple[int, dict]:
        return 201, {"student": self.store.join(code)}

    def answer(self, code: str, body: dict) -> tuple[int, dict]:
        student, question_id, value = body.get("student"), body.get("question"), body.get("value")
        if not isinstance(student, str) or not isinstance(question_id, str):
            raise ClassError(400, "Expected JSON {student, question, value}.")
        self.limit(student)
        record = self.store.get(code)
        question = live.question_of(record)
        if question is None or question.id != question_id:
            raise ClassError(409, "This question is not open: the presenter has not asked it, or has moved on.")
        try:
            value = question.check(value)
        except ValueError as error:
            raise ClassError(400, str(error)) from None
        self.store.answer(code, student, question_id, value)
        return 200, {"ok": True}

    def quiz(self, code: str, body: dict) -> tuple[int, dict]:
        student, phase, answers = body.get("student"), body.get("phase"), body.get("answers")
        if not isinstance(student, str) or phase not in PHASES:
            raise ClassError(400, "Expected JSON {student, phase: 'pre' or 'post', answers: {item id: option index}}.")
        self.limit(student)
        record = self.store.get(code)
        quiz = live.quiz_of(record)
        if quiz is None:
            raise ClassError(409, f"The {phase}-test is not open.")
        try:
            checked = quiz.check(answers)
        except QuizError as error:
            raise ClassError(400, str(error)) from None
        self.store.quiz_answers(code, student, phase, checked)
        return 200, {"ok": True}

    def present(self, code: str, body: dict) -> tuple[int, dict]:
        secret = body.pop("secret", None)
        changes = checked_changes(body)
        self.store.check_secret(code, secret)
        if changes.get("quiz") and not self.store.get(code).state.get("quiz_items"):
            changes["quiz_items"] = load_quiz().to_dict()
        record = self.store.act(code, secret, **changes)
        return 200, {"version": record.version}

    async def events(self, scope, receive, send, code: str) -> None:
        tally = b"tally=1" in scope.get("query_string", b"").split(b"&")
        first = await asyncio.to_thread(lambda: live.public_state(self.store, self.store.get(code)))
        broker = self.broker()
        stream = broker.open(first["code"], tally)
        stream.offer(first)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"),
                                (b"x-accel-buffering", b"no")]})
        gone = asyncio.ensure_future(disconnected(receive))
        try:
            while not gone.done():
                waiting = asyncio.ensure_future(stream.ready.wait())
                done, _ = await asyncio.wait({waiting, gone}, timeout=KEEPALIVE_S, return_when=asyncio.FIRST_COMPLETED)
                if gone in done:
                    waiting.cancel()
                    break
                if waiting not in done:
                    waiting.cancel()
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                    continue
                stream.ready.clear()
                if stream.ended:  # the server is stopping: the page's EventSource reconnects to the next one
                    await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": False})
                    return
                state = stream.latest
                if state is None:  # the class ended
                    await send({"type": "http.response.body", "body": b"event: ended\ndata: {}\n\n", "more_body": False})
                    return
                line = f"id: {state['version']}.{state['seq']}\ndata: {json.dumps(state, separators=(',', ':'))}\n\n"
                await send({"type": "http.response.body", "body": line.encode(), "more_body": True})
        except (OSError, RuntimeError):
            pass  # the page went away mid-write
        finally:
            gone.cancel()
            broker.close(first["code"], stream)


VIEW_FIELDS = {"temp": (int, float), "hard": bool, "mask": str, "query": int, "scale": str, "palette": str,
               "hide": list, "b_temp": (int, float), "b_hard": bool, "b_mask": str}


def checked_changes(body: dict) -> dict:
    """The presenter's posted change, its fields and types checked (the values are checked again where a page takes
    them, as a link's are)."""
    changes = {}
    for name, value in body.items():
        if name == "step":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 99:
                raise ClassError(400, "Field 'step' must be a lesson step's number.")
        elif name in ("params", "view"):
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ClassError(400, f"Field {name!r} must be an object.")
            if name == "view":
                value = {k: v for k, v in value.items() if k in VIEW_FIELDS and isinstance(v, VIEW_FIELDS[k])}
        elif name == "revealed":
            if not isinstance(value, bool):
                raise ClassError(400, "Field 'revealed' must be true or false.")
        elif name == "quiz":
            if value is not None and value not in PHASES:
                raise ClassError(400, "Field 'quiz' must be 'pre', 'post' or null.")
        elif name == "question":
            try:
                value = None if value is None else Question.from_dict(value).full()
            except (TypeError, ValueError):
                raise ClassError(400, "Field 'question' must be a question (attnviz.classroom.questions).") from None
        else:
            raise ClassError(400, f"Unknown field {name[:20]!r}.")
        changes[name] = value
    return changes


def server_exiting() -> bool:
    """Whether the server that runs this app was told to stop: uvicorn's signal handler belongs to its Server, whose
    should_exit turns true, while it waits for open responses (these streams) to end before it stops."""
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return bool(getattr(server, "should_exit", False))


async def disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def read_body(receive) -> dict:
    body, more = b"", True
    while more and len(body) <= BODY_LIMIT:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if len(body) > BODY_LIMIT:
        raise ClassError(413, f"A class request is at most {BODY_LIMIT} bytes.")
    if not body:
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        raise ClassError(400, "The body must be JSON.") from None
    if not isinstance(data, dict):
        raise ClassError(400, "The body must be a JSON object.")
    return data


async def respond(send, status: int, answer: dict) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
