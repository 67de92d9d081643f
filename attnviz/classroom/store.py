"""A class's state and answers, in one store interface with two implementations: SQLite (the standard library's, WAL)
in attnviz's cache folder on one server, and Redis (hashes, and pub/sub for the change stream) across replicas. No
streamlit here; the same tests run against both (tests/test_class_store.py).

A class has a join code (6 characters with no easily confused ones), a presenter's secret (256 bits, kept only as its
SHA-256), its state (the lesson's step and view, the open question with its round, whether its results are shown,
locked or revealed, the quiz's phase, whether the class takes new students) with a `version` that counts the
presenter's changes and a `seq` that counts every change (answers and joins too), its students (each an anonymous
random token, held server-side as its SHA-256, so no student can answer as another) and their answers (one per
student, question and round, changeable until the round is locked or revealed, each with its time). A class lives
12 hours.

A student is present while their page's event stream is open (it says so every KEEPALIVE; a closed browser drops out
of `students` within PRESENT_S); a join whose page never opens its stream is forgotten after PENDING_S, so joins
that no browser follows cannot fill a class.

Every change calls the listeners (`listen`) with (code, version, seq): in this process for SQLite, and in every
process subscribed to the Redis channel for Redis, which is how a presenter on one replica drives students on another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import queue
import secrets
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attnviz.cache import cache_root

CODE_ALPHABET = "ACDEFHJKMNPRTUVWXY34679"  # no 0/O, 1/I/L, 2/Z, 5/S, 8/B, G/6 confusion
CODE_LENGTH = 6
SECRET_BYTES = 32  # the presenter's secret: 256 bits
STUDENT_BYTES = 16  # a student's anonymous token: 128 bits
LIFETIME = 12 * 3600.0  # seconds a class lives
MAX_CLASSES = 50  # live classes a server holds
MAX_STUDENTS = 500  # students a class holds: those present, and joins not yet followed by their page
PENDING_S = 60.0  # a join whose page has not opened its event stream by then is forgotten
PRESENT_S = 30.0  # a student not heard from for this long is no longer present
NICKNAME_CHARS = 24
STORE_SETTING = "ATTNVIZ_CLASS_STORE"  # "redis://host:port/0", or a SQLite file's path; unset: cache_root()/classes.sqlite
PRESENTER_FIELDS = ("step", "params", "view", "question", "revealed", "quiz", "quiz_items", "round", "shown",
                    "locked", "deadline", "joins", "nicknames")  # what only the secret changes


class ClassError(Exception):
    """A request the store refuses, with the HTTP status that says why and a message a person can act on."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Record:
    """What a store holds of one class."""
    code: str
    created: float
    state: dict  # step, params, view, question (with its truth), round, shown, locked, revealed, quiz, joins, …
    version: int
    seq: int
    students: int  # present now

    @property
    def expires(self) -> float:
        return self.created + LIFETIME


@dataclass(frozen=True)
class Student:
    """One student as the teacher's console lists them: a pseudonym (never the token), and whether they are here."""
    id: str  # the pseudonym: the first 12 hex digits of the token's digest
    nickname: str
    joined: float
    seen: float  # 0: their page never opened its stream

    def present(self, now: float) -> bool:
        return self.seen > now - PRESENT_S

    def pending(self, now: float) -> bool:
        return self.seen == 0 and self.joined > now - PENDING_S


@dataclass(frozen=True)
class Answer:
    question: str  # the question's id, or "quiz:{phase}:{item}"
    round: int  # 1 or 2 (Peer Instruction's vote after discussion); 1 for the quiz
    student: str  # pseudonym
    value: object
    at: float  # when it was given (the latest change)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pseudonym(student_digest: str) -> str:
    return student_digest[:12]


def console_token(code: str, secret_digest: str) -> str:
    """A read-only credential for the teacher's console stream (hidden tallies, the key, who is here), derived from
    the secret's digest: it shows what the console shows, and changes nothing."""
    return hmac.new(secret_digest.encode(), f"console:{code}".encode(), hashlib.sha256).hexdigest()[:32]


def clean_code(code) -> str:
    """The code as stored (upper case), or ClassError 404 for anything that cannot be one."""
    if not isinstance(code, str) or len(code) != CODE_LENGTH or not all(c in CODE_ALPHABET for c in code.upper()):
        raise ClassError(404, "No class has this code. Check the code on the projector (6 letters and digits).")
    return code.upper()


def clean_nickname(name) -> str:
    """A nickname as kept: printable characters, spaces folded, at most NICKNAME_CHARS; ClassError 400 for none."""
    if not isinstance(name, str):
        raise ClassError(400, "A nickname is text.")
    name = " ".join("".join(c for c in name if c.isprintable()).split())[:NICKNAME_CHARS]
    if not name:
        raise ClassError(400, "This class asks for a nickname: type one (it is shown to the teacher only).")
    return name


def initial_state() -> dict:
    return {"step": 1, "params": {}, "view": {}, "question": None, "revealed": False, "quiz": None, "round": 1,
            "shown": False, "locked": False, "deadline": None, "joins": True, "nicknames": False}


def answer_key(question: str, round_: int) -> str:
    """Where a round's answers are kept: round 1 under the question's id (as before rounds), round 2 apart."""
    return question if round_ == 1 else f"{question}#r{round_}"


def split_key(key: str) -> tuple[str, int]:
    question, _, round_ = key.partition("#r")
    return question, int(round_) if round_.isdigit() else 1


def moved(state: dict, changes: dict) -> dict:
    """The presenter's changes with what follows from them: a new question starts at round 1, hidden and unlocked; a
    second round hides the first's results and unlocks; a new step closes the open question on every screen."""
    changes = dict(changes)
    if "question" in changes:
        changes.update({k: v for k, v in (("revealed", False), ("round", 1), ("shown", False), ("locked", False),
                                          ("deadline", None)) if k not in changes})
    if "step" in changes and changes["step"] != state.get("step") and "question" not in changes:
        changes.update(question=None, revealed=False, round=1, shown=False, locked=False, deadline=None)
    if changes.get("round") == 2 and state.get("round") != 2:
        if not state.get("question") or state.get("revealed"):
            raise ClassError(409, "A second round needs an open question that is not yet revealed.")
        changes.setdefault("shown", False)
        changes.setdefault("locked", False)
        changes.setdefault("deadline", None)
    return changes


class ClassStore:
    """The interface. Subclasses implement the _-prefixed storage steps; the checks live here, once."""

    def __init__(self):
        self._listeners: list[Callable[[str, int, int], None]] = []

    # ------------------------------------------------------------ the interface

    def create(self, now: float | None = None) -> tuple[str, str]:
        """A new class: (code, presenter's secret). ClassError 429 past MAX_CLASSES live classes."""
        now = time.time() if now is None else now
        if self._live_classes(now) >= MAX_CLASSES:
            raise ClassError(429, f"This server already holds {MAX_CLASSES} live classes, its limit. A class ends 12 "
                                  "hours after it starts, or when its teacher ends it; try again later.")
        secret = secrets.token_urlsafe(SECRET_BYTES)
        for _ in range(20):
            code = new_code()
            if self._insert(code, digest(secret), now, initial_state()):
                return code, secret
        raise ClassError(503, "No free class code was found; try again.")

    def get(self, code: str, now: float | None = None) -> Record:
        """The class, or ClassError 404 for an unknown, ended or expired code."""
        code = clean_code(code)
        now = time.time() if now is None else now
        record = self._read(code, now)
        if record is None or now > record.expires:
            raise ClassError(404, f"No class {code} is running: the code is unknown or the class ended (a class lives "
                                  "12 hours).")
        return record

    def check_secret(self, code: str, secret) -> Record:
        record = self.get(code)
        if not isinstance(secret, str) or not hmac.compare_digest(self._secret_digest(record.code), digest(secret)):
            raise ClassError(403, "Only the presenter can change the class: the presenter's secret is wrong.")
        return record

    def console_token(self, code: str, secret) -> str:
        record = self.check_secret(code, secret)
        return console_token(record.code, self._secret_digest(record.code))

    def check_console(self, code: str, token) -> Record:
        record = self.get(code)
        if not isinstance(token, str) or not hmac.compare_digest(console_token(record.code, self._secret_digest(record.code)), token):
            raise ClassError(403, "This console link is not valid for this class: open it from the presenter's page.")
        return record

    def act(self, code: str, secret, **changes) -> Record:
        """The presenter's change (PRESENTER_FIELDS): the state updated, the version counted, the class told."""
        unknown = set(changes) - set(PRESENTER_FIELDS)
        if unknown:
            raise ClassError(400, f"Unknown field {sorted(unknown)[0]!r}: a presenter may set {', '.join(PRESENTER_FIELDS)}.")
        record = self.check_secret(code, secret)
        changes = moved(record.state, changes)
        if changes.get("question"):
            self._put_asked(record.code, changes["question"])
        record = self._update(record.code, changes)
        self._told(record)
        return record

    def join(self, code: str, now: float | None = None, nickname=None) -> str:
        """A new student's anonymous token. ClassError 403 while the class takes no new students, 409 when full."""
        now = time.time() if now is None else now
        record = self.get(code, now)
        if not record.state.get("joins", True):
            raise ClassError(403, f"Class {record.code} takes no new students now: the teacher closed it to joins. Ask "
                                  "the teacher to open it.")
        name = clean_nickname(nickname) if record.state.get("nicknames") else ""
        self._forget_pending(record.code, now)
        held = sum(s.present(now) or s.pending(now) for s in self._roster(record.code))
        if held >= MAX_STUDENTS:
            raise ClassError(409, f"Class {record.code} is full: it holds {MAX_STUDENTS} students, its limit. Tell the "
                                  "teacher; a place frees when someone leaves.")
        token = secrets.token_urlsafe(STUDENT_BYTES)
        record = self._add_student(record.code, digest(token), now, name)
        self._told(record)
        return token

    def seen(self, code: str, student, now: float | None = None, here: bool = True) -> str:
        """The student's page is open (`here`), or just closed: their presence, told to the class if it changed.
        Returns the pseudonym; ClassError 403 for a token the class does not hold (never joined, or removed)."""
        now = time.time() if now is None else now
        record = self.get(code, now)
        who = self._student(record.code, student)
        before = self._seen_of(record.code, who)  # when the page was last heard from (0: never)
        self._set_seen(record.code, who, now if here else min(before, now - PRESENT_S))
        if (before > now - PRESENT_S) != here:
            self._told(self._bump(record.code))
        return pseudonym(who)

    def roster(self, code: str, now: float | None = None) -> list[Student]:
        """Every student the class holds (present or not, pending joins aside), in the order they joined."""
        now = time.time() if now is None else now
        record = self.get(code, now)
        return sorted((s for s in self._roster(record.code) if not s.pending(now) and s.seen),
                      key=lambda s: s.joined)

    def remove(self, code: str, secret, student_id: str) -> Record:
        """The teacher removes a student (by pseudonym): their token stops working; their answers stay."""
        record = self.check_secret(code, secret)
        found = [s for s in self._student_digests(record.code) if pseudonym(s) == student_id]
        if not found:
            raise ClassError(404, "No such student in this class.")
        self._remove_student(record.code, found[0], tell=False)
        removed = [*record.state.get("removed", [])[-199:], student_id]  # its page is told, and stops following
        record = self._update(record.code, {"removed": removed})
        self._told(record)
        return record

    def end(self, code: str, secret) -> None:
        """The teacher ends the class: its code stops working at once, and its pages are told."""
        record = self.check_secret(code, secret)
        self._delete(record.code)
        self._told(Record(record.code, record.created, record.state, record.version + 1, record.seq + 1, 0))

    def answer(self, code: str, student, question: str, value, now: float | None = None) -> Record:
        """A student's answer to the open question `question` in its current round, replacing their earlier one.
        `value` is checked by the caller against the question (classroom.questions.Question.check)."""
        now = time.time() if now is None else now
        record = self.get(code, now)
        who = self._student(record.code, student)
        state = record.state
        open_question = state.get("question")
        if not open_question or open_question.get("id") != question:
            raise ClassError(409, "This question is not open: the teacher has not asked it, or has moved on.")
        if state.get("revealed"):
            raise ClassError(409, "The answer was revealed: answers to this question are closed.")
        if state.get("locked"):
            raise ClassError(409, "Answers are locked for now: the teacher is looking at them with the class.")
        if state.get("deadline") and now > state["deadline"]:
            raise ClassError(409, "Time is up for this question: the teacher may give more time.")
        record = self._put_answer(record.code, answer_key(question, state.get("round", 1)), who, value, now)
        self._told(record)
        return record

    def quiz_answers(self, code: str, student, phase: str, answers: dict, now: float | None = None) -> Record:
        """A student's concept-quiz answers ({item id: the option's index in the quiz file}) in the open phase."""
        now = time.time() if now is None else now
        record = self.get(code, now)
        who = self._student(record.code, student)
        if record.state.get("quiz") != phase:
            raise ClassError(409, f"The {phase}-test is not open.")
        for item, value in answers.items():
            self._put_answer(record.code, f"quiz:{phase}:{item}", who, value, now)
        record = self._bump(record.code)
        self._told(record)
        return record

    def answers(self, code: str, question: str, round_: int = 1) -> dict[str, object]:
        """{student's pseudonym: answer} to `question` in `round_`."""
        key = answer_key(question, round_)
        return {a.student: a.value for a in self._all_answers(self.get(code).code) if answer_key(a.question, a.round) == key}

    def all_answers(self, code: str) -> list[Answer]:
        """Every answer in the class, questions (each round) and quiz alike, by question, round and student."""
        return self._all_answers(self.get(code).code)

    def asked(self, code: str) -> dict[str, dict]:
        """{question id: the question as asked, with its truth}: every question the class was asked."""
        return self._asked(self.get(code).code)

    def listen(self, callback: Callable[[str, int, int], None]) -> None:
        """Call `callback(code, version, seq)` after every change (from any thread)."""
        self._listeners.append(callback)

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ shared steps

    def _student(self, code: str, student) -> str:
        """The student's token's digest, or ClassError 403."""
        if not isinstance(student, str) or not self._is_student(code, digest(student)):
            raise ClassError(403, "You are not in this class (never joined, or the teacher removed you): reload the "
                                  "page to join again.")
        return digest(student)

    def _forget_pending(self, code: str, now: float) -> None:
        for student in self._roster_digests(code):
            if student[1].seen == 0 and student[1].joined <= now - PENDING_S:
                self._remove_student(code, student[0], tell=False)

    def _roster(self, code: str) -> list[Student]:
        return [s for _, s in self._roster_digests(code)]

    def _student_digests(self, code: str) -> list[str]:
        return [d for d, _ in self._roster_digests(code)]

    def _told(self, record: Record) -> None:
        self._notify(record.code, record.version, record.seq)

    def _notify(self, code: str, version: int, seq: int) -> None:
        for callback in list(self._listeners):
            callback(code, version, seq)


class SQLiteStore(ClassStore):
    """The embedded default: one SQLite file (WAL), a connection per thread, handed on to the next thread when its
    thread ends (Streamlit runs each page run in a thread of its own: opening a connection for each cost a class of 30
    several percent of the server's time). A restarted server reopens the same file, so a class resumes with every
    answer kept."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS classes (code TEXT PRIMARY KEY, secret TEXT NOT NULL, created REAL NOT NULL,
        state TEXT NOT NULL, version INTEGER NOT NULL, seq INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS students (code TEXT NOT NULL, student TEXT NOT NULL, joined REAL NOT NULL,
        PRIMARY KEY (code, student));
    CREATE TABLE IF NOT EXISTS answers (code TEXT NOT NULL, question TEXT NOT NULL, student TEXT NOT NULL,
        value TEXT NOT NULL, PRIMARY KEY (code, question, student));
    CREATE TABLE IF NOT EXISTS asked (code TEXT NOT NULL, question TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (code, question));
    """
    ADDED = {"students": {"seen": "REAL NOT NULL DEFAULT 0", "nickname": "TEXT NOT NULL DEFAULT ''"},
             "answers": {"at": "REAL NOT NULL DEFAULT 0"}}  # columns a store file from an earlier version lacks

    def __init__(self, path: str | os.PathLike | None = None):
        super().__init__()
        self.path = Path(path) if path else cache_root() / "classes.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._free: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()  # of threads that have ended
        db = self._db()
        db.executescript(self.SCHEMA)
        for table, columns in self.ADDED.items():
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns.items():
                if name not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = self._free.get_nowait()
            except queue.Empty:
                db = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            weakref.finalize(threading.current_thread(), self._free.put, db)  # one thread at a time uses it
        return db

    def _live_classes(self, now: float) -> int:
        return self._db().execute("SELECT COUNT(*) FROM classes WHERE created > ?", (now - LIFETIME,)).fetchone()[0]

    def _insert(self, code, secret_digest, now, state) -> bool:
        db = self._db()
        db.execute("DELETE FROM classes WHERE created <= ?", (now - LIFETIME,))  # expired classes go, with their rows
        self._orphans()
        try:
            db.execute("INSERT INTO classes VALUES (?, ?, ?, ?, 0, 0)", (code, secret_digest, now, json.dumps(state)))
            return True
        except sqlite3.IntegrityError:
            return False

    def _orphans(self) -> None:
        for table in ("students", "answers", "asked"):
            self._db().execute(f"DELETE FROM {table} WHERE code NOT IN (SELECT code FROM classes)")

    def _read(self, code, now) -> Record | None:
        row = self._db().execute(
            "SELECT created, state, version, seq, (SELECT COUNT(*) FROM students WHERE code = ? AND seen > ?) "
            "FROM classes WHERE code = ?", (code, now - PRESENT_S, code)).fetchone()
        if row is None:
            return None
        return Record(code, row[0], {**initial_state(), **json.loads(row[1])}, row[2], row[3], row[4])

    def _secret_digest(self, code) -> str:
        return self._db().execute("SELECT secret FROM classes WHERE code = ?", (code,)).fetchone()[0]

    def _update(self, code, changes) -> Record:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            state = json.loads(db.execute("SELECT state FROM classes WHERE code = ?", (code,)).fetchone()[0])
            state.update(changes)
            db.execute("UPDATE classes SET state = ?, version = version + 1, seq = seq + 1 WHERE code = ?",
                       (json.dumps(state), code))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self._read(code, time.time())

    def _bump(self, code) -> Record:
        self._db().execute("UPDATE classes SET seq = seq + 1 WHERE code = ?", (code,))
        return self._read(code, time.time())

    def _delete(self, code) -> None:
        self._db().execute("DELETE FROM classes WHERE code = ?", (code,))
        self._orphans()

    def _add_student(self, code, student, now, nickname) -> Record:
        self._db().execute("INSERT INTO students (code, student, joined, seen, nickname) VALUES (?, ?, ?, 0, ?)",
                           (code, student, now, nickname))
        return self._bump(code)

    def _remove_student(self, code, student, tell: bool = True) -> Record | None:
        self._db().execute("DELETE FROM students WHERE code = ? AND student = ?", (code, student))
        return self._bump(code) if tell else None

    def _set_seen(self, code, student, when) -> None:
        self._db().execute("UPDATE students SET seen = ? WHERE code = ? AND student = ?", (when, code, student))

    def _seen_of(self, code, student) -> float:
        row = self._db().execute("SELECT seen FROM students WHERE code = ? AND student = ?", (code, student)).fetchone()
        return row[0] if row else 0.0

    def _roster_digests(self, code) -> list[tuple[str, Student]]:
        rows = self._db().execute("SELECT student, nickname, joined, seen FROM students WHERE code = ?", (code,))
        return [(s, Student(pseudonym(s), name, joined, seen)) for s, name, joined, seen in rows]

    def _is_student(self, code, student) -> bool:
        return self._db().execute("SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)).fetchone() is not None

    def _put_answer(self, code, question, student, value, now) -> Record:
        self._db().execute("INSERT OR REPLACE INTO answers (code, question, student, value, at) VALUES (?, ?, ?, ?, ?)",
                           (code, question, student, json.dumps(value), now))
        return self._bump(code)

    def _all_answers(self, code) -> list[Answer]:
        rows = self._db().execute("SELECT question, student, value, at FROM answers WHERE code = ?", (code,))
        return sorted_answers((key, student, json.loads(value), at) for key, student, value, at in rows)

    def _put_asked(self, code, question: dict) -> None:
        self._db().execute("INSERT OR REPLACE INTO asked VALUES (?, ?, ?)", (code, question["id"], json.dumps(question)))

    def _asked(self, code) -> dict:
        rows = self._db().execute("SELECT question, data FROM asked WHERE code = ?", (code,))
        return {question: json.loads(data) for question, data in rows}


def sorted_answers(rows) -> list[Answer]:
    """Answers from (stored key, student digest, value, time) rows, by question, round and student."""
    answers = []
    for key, student, value, at in rows:
        question, round_ = split_key(key)
        answers.append(Answer(question, round_, pseudonym(student), value, at))
    return sorted(answers, key=lambda a: (a.question, a.round, a.student))


class RedisStore(ClassStore):
    """Across replicas: each class is a hash (state, version, seq, secret, created) with its students, answers and
    asked questions in hashes beside it, all expiring with the class; every change is published on one channel,
    which a thread in each process hears and passes to its listeners."""

    CHANNEL = "attnviz:class-changes"
    PARTS = (":students", ":answers", ":asked")

    def __init__(self, url: str):
        import redis  # only a server with ATTNVIZ_CLASS_STORE=redis://… needs the client

        super().__init__()
        try:
            self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
            self.redis.ping()
        except (redis.exceptions.RedisError, ValueError) as error:
            raise ClassError(503, f"The class store {STORE_SETTING}={url} cannot be reached ({error}): classes need it "
                                  "running, or the setting unset for SQLite on this server.") from None
        self._pubsub = None
        self._thread = None

    def _key(self, code, part="") -> str:
        return f"attnviz:class:{code}{part}"

    def _live_classes(self, now: float) -> int:
        self.redis.zremrangebyscore("attnviz:classes", "-inf", now - LIFETIME)
        return self.redis.zcard("attnviz:classes")

    def _insert(self, code, secret_digest, now, state) -> bool:
        key = self._key(code)
        if not self.redis.hsetnx(key, "secret", secret_digest):
            return False
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={"created": repr(now), "state": json.dumps(state), "version": 0, "seq": 0})
            pipe.expire(key, int(LIFETIME) + 60)
            pipe.zadd("attnviz:classes", {code: now})
            pipe.execute()
        return True

    def _read(self, code, now) -> Record | None:
        created, state, version, seq = self.redis.hmget(self._key(code), "created", "state", "version", "seq")
        if created is None or state is None:
            return None
        present = sum(s.present(now) for s in self._roster(code))
        return Record(code, float(created), {**initial_state(), **json.loads(state)}, int(version), int(seq), present)

    def _secret_digest(self, code) -> str:
        return self.redis.hget(self._key(code), "secret") or ""

    def _update(self, code, changes) -> Record:
        import redis

        key = self._key(code)
        with self.redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)
                    state = json.loads(pipe.hget(key, "state"))
                    state.update(changes)
                    pipe.multi()
                    pipe.hset(key, "state", json.dumps(state))
                    pipe.hincrby(key, "version", 1)
                    pipe.hincrby(key, "seq", 1)
                    pipe.execute()
                    break
                except redis.WatchError:  # another replica changed it meanwhile: read it again
                    continue
        return self._read(code, time.time())

    def _bump(self, code) -> Record:
        self.redis.hincrby(self._key(code), "seq", 1)
        return self._read(code, time.time())

    def _delete(self, code) -> None:
        self.redis.delete(self._key(code), *(self._key(code, part) for part in self.PARTS))
        self.redis.zrem("attnviz:classes", code)

    def _hash_set(self, code, part, field, value) -> None:
        key = self._key(code, part)
        with self.redis.pipeline() as pipe:
            pipe.hset(key, field, value)
            pipe.expire(key, int(LIFETIME) + 60)
            pipe.execute()

    def _add_student(self, code, student, now, nickname) -> Record:
        self._hash_set(code, ":students", student, json.dumps({"joined": now, "seen": 0.0, "nickname": nickname}))
        return self._bump(code)

    def _remove_student(self, code, student, tell: bool = True) -> Record | None:
        self.redis.hdel(self._key(code, ":students"), student)
        return self._bump(code) if tell else None

    def _seen_of(self, code, student) -> float:
        held = self.redis.hget(self._key(code, ":students"), student)
        return json.loads(held)["seen"] if held else 0.0

    def _set_seen(self, code, student, when) -> None:
        key = self._key(code, ":students")
        held = self.redis.hget(key, student)
        if held is not None:
            self.redis.hset(key, student, json.dumps({**json.loads(held), "seen": when}))

    def _roster_digests(self, code) -> list[tuple[str, Student]]:
        out = []
        for student, held in self.redis.hscan_iter(self._key(code, ":students"), count=1000):
            data = json.loads(held)
            out.append((student, Student(pseudonym(student), data.get("nickname", ""), data["joined"], data["seen"])))
        return out

    def _is_student(self, code, student) -> bool:
        return bool(self.redis.hexists(self._key(code, ":students"), student))

    def _put_answer(self, code, question, student, value, now) -> Record:
        self._hash_set(code, ":answers", f"{question}\x1f{student}", json.dumps([value, now]))
        return self._bump(code)

    def _all_answers(self, code) -> list[Answer]:
        rows = []
        for field, held in self.redis.hscan_iter(self._key(code, ":answers"), count=1000):
            question, student = field.split("\x1f", 1)
            value, at = json.loads(held)
            rows.append((question, student, value, at))
        return sorted_answers(rows)

    def _put_asked(self, code, question: dict) -> None:
        self._hash_set(code, ":asked", question["id"], json.dumps(question))

    def _asked(self, code) -> dict:
        return {q: json.loads(data) for q, data in self.redis.hgetall(self._key(code, ":asked")).items()}

    def _told(self, record: Record) -> None:
        self.redis.publish(self.CHANNEL, json.dumps([record.code, record.version, record.seq]))

    def listen(self, callback) -> None:
        super().listen(callback)
        if self._thread is None:
            self._pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            self._pubsub.subscribe(**{self.CHANNEL: self._heard})
            self._thread = self._pubsub.run_in_thread(sleep_time=0.5, daemon=True)

    def _heard(self, message) -> None:
        try:
            code, version, seq = json.loads(message["data"])
        except (ValueError, TypeError):
            return
        self._notify(code, version, seq)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread.join(2)
            self._pubsub.close()
        self.redis.close()


_shared: ClassStore | None = None
_shared_lock = threading.Lock()


def shared_store() -> ClassStore:
    """This process's one store (open_store()), for the app's pages and its HTTP routes alike: a change a page makes
    reaches the event streams through the same listeners."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = open_store()
        return _shared


def open_store(setting: str | None = None) -> ClassStore:
    """The store `setting` (default: ATTNVIZ_CLASS_STORE) names: redis://… for Redis, else a SQLite file's path, or
    classes.sqlite in attnviz's cache folder."""
    setting = os.environ.get(STORE_SETTING, "") if setting is None else setting
    if setting.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(setting)
    return SQLiteStore(setting or None)
