"""A class's HTTP contract (docs/urls.md), as ASGI middleware in front of the app (app.py), under any base URL path:

    GET  /_attnviz/class/{code}          the state as JSON (live.public_state; `?console=TOKEN`: the console's)
    GET  /_attnviz/class/{code}/events   Server-Sent Events: one JSON `data:` line per change (`?student=TOKEN`: this
                                         student's page, which keeps them present; `?tally=1`: answers and joins too;
                                         `?console=TOKEN`: the teacher's console, with the hidden tallies)
    POST /_attnviz/class                 a new class, with the teacher key: {key} → {code, secret}
    POST /_attnviz/class/{code}/join     a new student: {nickname?} → {student}
    POST /_attnviz/class/{code}/answer   {student, question, value}
    POST /_attnviz/class/{code}/quiz     {student, phase, answers: {item id: option index}}
    POST /_attnviz/class/{code}/present  {secret, step?, params?, view?, question?, round?, shown?, locked?, timer?,
                                         revealed?, quiz?, joins?, nicknames?}: the presenter's change
    POST /_attnviz/class/{code}/console  {secret} → {console}: the console's token, and a cookie that keeps this
                                         browser the presenter across a server restart
    POST /_attnviz/class/{code}/remove   {secret, student}: the teacher removes a student (by pseudonym)
    POST /_attnviz/class/{code}/end      {secret}: the teacher ends the class

Bad input gets a 4xx with {"error": a sentence} and nothing stored: an unknown or expired code (404), a wrong key or
secret (403), an unknown student (403), an answer to a closed question (409), a body over 4 KB (413), more than 5
answers a second from one student, more than JOINS_PER_SECOND joins a second to one class, or more than
MISSES_PER_MINUTE wrong codes, keys or secrets a minute from one client (429). Every change reaches the event streams
through one Broker per process, which hears the store (in this process for SQLite, through Redis pub/sub across
replicas) and sends each class's new state to its streams at most once per COALESCE_S."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import signal
import threading
import time
import urllib.parse
from collections import OrderedDict, deque

from attnviz.asgi import TooLarge, loads, read_body as read_raw, respond
from attnviz.classroom import live, teacher
from attnviz.classroom.questions import Question
from attnviz.classroom.quiz import PHASES, QuizError, load as load_quiz
from attnviz.classroom.store import MAX_STUDENTS, ClassError, ClassStore, shared_store

PATH = "/_attnviz/class"
BODY_LIMIT = 4096  # bytes a POST may carry
ANSWERS_PER_SECOND = 5  # a student's answers (and quiz posts) in any one second
JOINS_PER_SECOND = 20  # joins to one class in any one second: a room of 500 is in within half a minute
MISSES_PER_MINUTE = 12  # wrong codes, keys, secrets or console tokens from one client in any one minute
COALESCE_S = 0.1  # a class's streams get its state at most this often
KEEPALIVE_S = 10.0  # a comment line keeps an idle stream open through proxies, and its student present
POLL_S = 2.0  # the broker also reads each watched class's counters this often (a change another process made)
STREAMS_PER_CLASS = 2 * MAX_STUDENTS  # students, projectors and a margin for reconnects
TIMER_S = (5, 3600)  # a question's timer, in seconds
COOKIE = "attnviz_teach"  # CODE.SECRET: this browser presents that class (HttpOnly; read by appkit/classroom.py)
PROXIES_SETTING = "ATTNVIZ_TRUSTED_PROXIES"  # peers whose X-Forwarded-For names the client (default: loopback)


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
        """A change goes out COALESCE_S after it, with any that follow it meanwhile. The wait is also the presenter's
        head start: sent at once, 30 students' runs started beside the projector's own and took the interpreter from
        it (its run 0.26 s → 0.67 s at p50, bench_room steps 6-13), and their first paint came no sooner."""
        if code in self.streams and code not in self.pending:
            self.pending.add(code)
            self.loop.call_later(COALESCE_S, lambda: self.loop.create_task(self.send(code)))

    async def send(self, code: str) -> None:
        self.pending.discard(code)
        streams = self.streams.get(code)
        if not streams:
            return
        try:
            record, public, console = await asyncio.to_thread(self.states, code, any(s.console for s in streams))
        except ClassError:
            record = public = console = None
        if record is not None and record.seq < self.sent.get(code, -1):
            return  # a later send read a newer state and has sent it: this older one would take the streams back
        self.sent[code] = record.seq if record else -1
        removed = set(record.state.get("removed", ())) if record else set()
        for stream in list(streams):
            if stream.student in removed:
                stream.remove()
            else:
                stream.offer(console if stream.console else public)

    def states(self, code: str, console: bool):
        """(the class, the state every page gets, the console's or None): the class's answers read once for both."""
        record = self.store.get(code)
        answers = self.store.all_answers(record.code)
        public = live.public_state(self.store, record, answers)
        return record, public, live.console_state(self.store, record, answers) if console else None

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

    def open(self, code: str, tally: bool, student: str | None = None, console: bool = False) -> "Stream":
        streams = self.streams.setdefault(code, set())
        if len(streams) >= STREAMS_PER_CLASS:
            raise ClassError(429, "This class has as many open pages as it can hold; close a tab and reload.")
        stream = Stream(tally or console, student, console)
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

    def __init__(self, tally: bool, student: str | None = None, console: bool = False):
        self.tally, self.student, self.console = tally, student, console
        self.version = None
        self.latest = None
        self.ended = False
        self.removed = False
        self.ready = asyncio.Event()

    def end(self) -> None:
        self.ended = True
        self.ready.set()

    def remove(self) -> None:
        self.removed = True
        self.ready.set()

    def offer(self, state: dict | None) -> None:
        if state is not None and not self.tally and state["version"] == self.version:
            return  # a student's page hears of the presenter's changes, not of every answer
        self.version = state["version"] if state else None
        self.latest = state
        self.ready.set()


class Limiter:
    """At most `rate` events per `window` seconds per key, for the most recent `kept` keys."""

    def __init__(self, rate: int, window: float = 1.0, kept: int = 20_000):
        self.rate, self.window, self.kept = rate, window, kept
        self.seen: OrderedDict[str, deque] = OrderedDict()
        self.lock = threading.Lock()

    def _times(self, key: str, now: float) -> deque:
        times = self.seen.pop(key, None) or deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        self.seen[key] = times
        while len(self.seen) > self.kept:
            self.seen.popitem(last=False)
        return times

    def allow(self, key: str, now: float | None = None) -> bool:
        """Whether one more event is allowed now; an allowed event is counted."""
        now = time.monotonic() if now is None else now
        with self.lock:
            times = self._times(key, now)
            if len(times) >= self.rate:
                return False
            times.append(now)
            return True

    def spent(self, key: str, now: float | None = None) -> bool:
        """Whether `key` has used its events, without counting one."""
        now = time.monotonic() if now is None else now
        with self.lock:
            return len(self._times(key, now)) >= self.rate


def trusted_proxies() -> list:
    """The networks whose requests come from a proxy that names the client in X-Forwarded-For (addresses or CIDR)."""
    names = os.environ.get(PROXIES_SETTING, "127.0.0.1,::1")
    networks = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        try:
            networks.append(ipaddress.ip_network(name, strict=False))
        except ValueError:
            continue
    return networks


def trusted(peer: str) -> bool:
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(address in network for network in trusted_proxies() if network.version == address.version)


def client_of(scope) -> str:
    """The client's address: the peer's, or, where the peer is a trusted proxy, the last X-Forwarded-For hop (the
    one that proxy added: earlier hops are the client's own word)."""
    peer = (scope.get("client") or ("unknown", 0))[0]
    if trusted(peer):
        for name, value in scope.get("headers", []):
            if name == b"x-forwarded-for":
                hop = value.decode("latin-1").split(",")[-1].strip()
                try:
                    return str(ipaddress.ip_address(hop))
                except ValueError:
                    break
    return peer


class ClassRoutes:
    """ASGI middleware: answers PATH and below, and passes every other request on."""

    def __init__(self, app, store: ClassStore | None = None):
        self.app = app
        self._store = store
        self._broker: Broker | None = None
        self.limiter = Limiter(ANSWERS_PER_SECOND)
        self.joins = Limiter(JOINS_PER_SECOND)
        self.misses = Limiter(MISSES_PER_MINUTE, 60.0)

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
        client = client_of(scope)
        try:
            if self.misses.spent(client):
                raise ClassError(429, "Too many wrong codes or keys from this device: wait a minute, then check the "
                                      "code on the projector.")
            await self.route(scope, receive, send, parts)
        except ClassError as error:
            if error.status in (403, 404):
                self.misses.allow(client)
            headers = [(b"retry-after", b"60" if self.misses.spent(client) else b"1")] if error.status == 429 else []
            await respond(send, error.status, {"error": str(error)}, headers)

    async def route(self, scope, receive, send, parts: list[str]) -> None:
        method = scope["method"]
        query = query_of(scope)
        if method == "GET" and len(parts) == 1:
            return await respond(send, 200, await asyncio.to_thread(self.state, parts[0], query.get("console")))
        if method == "GET" and len(parts) == 2 and parts[1] == "events":
            return await self.events(scope, receive, send, parts[0], query)
        if method != "POST" or len(parts) > 2:
            raise ClassError(405 if len(parts) <= 2 else 404, "Not a class request: see docs/urls.md.")
        body = await read_body(receive)
        if not parts:
            return await respond(send, 201, await asyncio.to_thread(self.create, body))
        action = parts[1] if len(parts) == 2 else ""
        handlers = {"join": self.join, "answer": self.answer, "quiz": self.quiz, "present": self.present,
                    "console": self.console, "remove": self.remove, "end": self.end}
        if action not in handlers:
            raise ClassError(404, f"Unknown class action {action[:20]!r}: join, answer, quiz, present, console, remove "
                                  "or end.")
        status, answer, *headers = await asyncio.to_thread(handlers[action], parts[0], body)
        await respond(send, status, answer, *headers)

    def state(self, code: str, console: str | None) -> dict:
        if console is not None:
            return live.console_state(self.store, self.store.check_console(code, console))
        return live.public_state(self.store, self.store.get(code))

    def create(self, body: dict) -> dict:
        if not teacher.is_key(body.get("key")):
            raise ClassError(403, "Starting a class takes the teacher key: open the teacher link the server printed "
                                  "when it started, or type the key it showed.")
        code, secret = self.store.create()
        return {"code": code, "secret": secret}

    def limit(self, student: str) -> None:
        """ClassError 429 past ANSWERS_PER_SECOND posts from one student in a second (answers and quiz posts alike)."""
        if not self.limiter.allow(student):
            raise ClassError(429, f"At most {ANSWERS_PER_SECOND} answers a second: wait a moment.")

    def join(self, code: str, body: dict) -> tuple[int, dict]:
        record = self.store.get(code)
        if not self.joins.allow(record.code):
            raise ClassError(429, "Many students are joining at once: your page tries again in a moment.")
        return 201, {"student": self.store.join(record.code, nickname=body.get("nickname"))}

    def answer(self, code: str, body: dict) -> tuple[int, dict]:
        student, question_id, value = body.get("student"), body.get("question"), body.get("value")
        if not isinstance(student, str) or not student:
            raise ClassError(403, "Your page has not joined the class (it may be full, or closed to new students): "
                                  "reload it to join.")
        if not isinstance(question_id, str):
            raise ClassError(400, "An answer names the question it answers: reload the page.")
        self.limit(student)
        record = self.store.get(code)
        question = live.question_of(record)
        if question is None or question.id != question_id:
            raise ClassError(409, "This question is not open: the teacher has not asked it, or has moved on.")
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
        record = self.store.check_secret(code, secret)
        if "extend" in changes:  # more time: from the deadline where one runs, else from now
            now = time.time()
            changes["deadline"] = max(record.state.get("deadline") or now, now) + changes.pop("extend")
        if changes.get("quiz") and not record.state.get("quiz_items"):
            changes["quiz_items"] = load_quiz().to_dict()
        record = self.store.act(code, secret, **changes)
        return 200, {"version": record.version}

    def console(self, code: str, body: dict):
        secret = body.get("secret")
        token = self.store.console_token(code, secret)
        record = self.store.get(code)
        cookie = (f"{COOKIE}={record.code}.{secret}; Path=/; Max-Age={int(record.expires - time.time())}; HttpOnly; "
                  "SameSite=Strict")
        return 200, {"console": token}, [(b"set-cookie", cookie.encode())]

    def remove(self, code: str, body: dict) -> tuple[int, dict]:
        student = body.get("student")
        if not isinstance(student, str):
            raise ClassError(400, "Name the student to remove by the pseudonym the console shows.")
        self.store.remove(code, body.get("secret"), student)
        return 200, {"ok": True}

    def end(self, code: str, body: dict) -> tuple[int, dict]:
        self.store.end(code, body.get("secret"))
        return 200, {"ok": True}

    async def events(self, scope, receive, send, code: str, query: dict) -> None:
        student, console = query.get("student"), query.get("console")
        if console is not None:
            first = await asyncio.to_thread(lambda: live.console_state(self.store, self.store.check_console(code, console)))
        else:
            first = await asyncio.to_thread(lambda: live.public_state(self.store, self.store.get(code)))
        who = None
        if student is not None:
            try:
                who = await asyncio.to_thread(self.store.seen, code, student)
            except ClassError as error:  # said in the stream, where the page's EventSource can read it
                return await refuse(send, "refused", error)
        broker = self.broker()
        stream = broker.open(first["code"], query.get("tally") == "1", who, console is not None)
        stream.offer(first)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"),
                                (b"x-accel-buffering", b"no")]})
        gone = asyncio.ensure_future(disconnected(receive))
        touched = time.monotonic()
        try:
            while not gone.done():
                if student is not None and time.monotonic() - touched >= KEEPALIVE_S:  # busy or idle, still here
                    await asyncio.to_thread(self.store.seen, code, student)
                    touched = time.monotonic()
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
                if stream.removed:
                    return await event_end(send, "removed", "The teacher removed you from this class.")
                state = stream.latest
                if state is None:  # the class ended
                    return await event_end(send, "ended", "This class has ended.")
                line = f"id: {state['version']}.{state['seq']}\ndata: {json.dumps(state, separators=(',', ':'))}\n\n"
                await send({"type": "http.response.body", "body": line.encode(), "more_body": True})
        except (OSError, RuntimeError, ClassError):
            pass  # the page went away mid-write, or the class ended meanwhile
        finally:
            gone.cancel()
            broker.close(first["code"], stream)
            if student is not None and not stream.removed:
                try:
                    await asyncio.to_thread(self.store.seen, code, student, None, False)
                except ClassError:
                    pass


async def refuse(send, event: str, error: ClassError) -> None:
    """A stream that opens only to say why it cannot follow the class (an EventSource cannot read an error's body)."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]})
    await event_end(send, event, str(error))


async def event_end(send, event: str, sentence: str) -> None:
    line = f"event: {event}\ndata: {json.dumps({'error': sentence})}\n\n"
    await send({"type": "http.response.body", "body": line.encode(), "more_body": False})


def query_of(scope) -> dict[str, str]:
    """The request's query parameters (the first of each name)."""
    out: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        out.setdefault(name, value)
    return out


VIEW_FIELDS = {"temp": (int, float), "hard": bool, "mask": str, "query": int, "scale": str, "palette": str,
               "hide": list, "b_temp": (int, float), "b_hard": bool, "b_mask": str}
FLAGS = ("revealed", "shown", "locked", "joins", "nicknames")


def checked_changes(body: dict) -> dict:
    """The presenter's posted change, its fields and types checked (the values are checked again where a page takes
    them, as a link's are). `timer` (seconds from now, or null) becomes the question's `deadline`; `extend` (seconds)
    is added to it by the caller, who reads the deadline that runs."""
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
        elif name in FLAGS:
            if not isinstance(value, bool):
                raise ClassError(400, f"Field {name!r} must be true or false.")
        elif name == "round":
            if value not in (1, 2) or isinstance(value, bool):
                raise ClassError(400, "Field 'round' must be 1 or 2.")
        elif name == "timer":
            if value is not None:
                value = time.time() + seconds(name, value)
            name = "deadline"
        elif name == "extend":
            value = seconds(name, value)
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


def seconds(name: str, value) -> float:
    """A timer's seconds as posted (`timer`, `extend`), or ClassError 400."""
    low, high = TIMER_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise ClassError(400, f"Field {name!r} must be a number of seconds from {low} to {high}"
                              + (", or null." if name == "timer" else "."))
    return float(value)


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
    """The POST's JSON object, or ClassError 413 (too long) or 400 (not a JSON object, or NaN in it)."""
    try:
        body = await read_raw(receive, BODY_LIMIT)
    except TooLarge:
        raise ClassError(413, f"A class request is at most {BODY_LIMIT} bytes.") from None
    if not body:
        return {}
    try:
        data = loads(body)
    except ValueError:
        raise ClassError(400, "The body must be JSON, with finite numbers.") from None
    if not isinstance(data, dict):
        raise ClassError(400, "The body must be a JSON object.")
    return data
