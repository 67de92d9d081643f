"""A class's state and answers, in one store interface with two implementations: SQLite (the standard library's, WAL)
in attnviz's cache folder on one server, and Redis (hashes, and pub/sub for the change stream) across replicas. No
streamlit here; the same tests run against both (tests/test_class_store.py).

A class has a join code (6 characters with no easily confused ones), a presenter's secret (256 bits, kept only as its
SHA-256), its state (the lesson's step and view, the open question, the quiz's phase) with a `version` that counts the
presenter's changes and a `seq` that counts every change (answers and joins too), its students (each an anonymous
random token, held server-side as its SHA-256, so no student can answer as another) and their answers (one per
student and question, changeable until the reveal). A class lives 12 hours.

Every change calls the listeners (`listen`) with (code, version, seq): in this process for SQLite, and in every
process subscribed to the Redis channel for Redis, which is how a presenter on one replica drives students on another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
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
MAX_STUDENTS = 500  # students a class holds
STORE_SETTING = "ATTNVIZ_CLASS_STORE"  # "redis://host:port/0", or a SQLite file's path; unset: cache_root()/classes.sqlite
PRESENTER_FIELDS = ("step", "params", "view", "question", "revealed", "quiz", "quiz_items")  # what only the secret changes


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
    state: dict  # step, params, view, question (with its truth), revealed, quiz
    version: int
    seq: int
    students: int

    @property
    def expires(self) -> float:
        return self.created + LIFETIME


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def clean_code(code) -> str:
    """The code as stored (upper case), or ClassError 404 for anything that cannot be one."""
    if not isinstance(code, str) or len(code) != CODE_LENGTH or not all(c in CODE_ALPHABET for c in code.upper()):
        raise ClassError(404, "No class has this code. Check the code on the projector (6 letters and digits).")
    return code.upper()


def initial_state() -> dict:
    return {"step": 1, "params": {}, "view": {}, "question": None, "revealed": False, "quiz": None}


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
                                  "hours after it starts; try again later or use another server.")
        secret = secrets.token_urlsafe(SECRET_BYTES)
        for _ in range(20):
            code = new_code()
            if self._insert(code, digest(secret), now, initial_state()):
                return code, secret
        raise ClassError(503, "No free class code was found; try again.")

    def get(self, code: str, now: float | None = None) -> Record:
        """The class, or ClassError 404 for an unknown or expired code."""
        code = clean_code(code)
        record = self._read(code)
        if record is None or (time.time() if now is None else now) > record.expires:
            raise ClassError(404, f"No class {code} is running: the code is unknown or the class ended (a class lives "
                                  "12 hours).")
        return record

    def check_secret(self, code: str, secret) -> Record:
        record = self.get(code)
        if not isinstance(secret, str) or not hmac.compare_digest(self._secret_digest(record.code), digest(secret)):
            raise ClassError(403, "Only the presenter can change the class: the presenter's secret is wrong.")
        return record

    def act(self, code: str, secret, **changes) -> Record:
        """The presenter's change (PRESENTER_FIELDS): the state updated, the version counted, the class told."""
        unknown = set(changes) - set(PRESENTER_FIELDS)
        if unknown:
            raise ClassError(400, f"Unknown field {sorted(unknown)[0]!r}: a presenter may set {', '.join(PRESENTER_FIELDS)}.")
        record = self.check_secret(code, secret)
        if "question" in changes:  # a new question starts unrevealed; its answers are kept apart by its id
            changes.setdefault("revealed", False)
        record = self._update(record.code, changes)
        self._told(record)
        return record

    def join(self, code: str, now: float | None = None) -> str:
        """A new student's anonymous token. ClassError 409 past MAX_STUDENTS."""
        record = self.get(code, now)
        if record.students >= MAX_STUDENTS:
            raise ClassError(409, f"This class is full ({MAX_STUDENTS} students).")
        token = secrets.token_urlsafe(STUDENT_BYTES)
        record = self._add_student(record.code, digest(token), time.time() if now is None else now)
        self._told(record)
        return token

    def answer(self, code: str, student, question: str, value) -> Record:
        """A student's answer to the open question `question`, replacing their earlier one. `value` is checked by the
        caller against the question (classroom.questions.Question.check)."""
        record = self.get(code)
        who = self._student(record.code, student)
        open_question = record.state.get("question")
        if not open_question or open_question.get("id") != question:
            raise ClassError(409, "This question is not open: the presenter has not asked it, or has moved on.")
        if record.state.get("revealed"):
            raise ClassError(409, "The answer was revealed: answers to this question are closed.")
        record = self._put_answer(record.code, question, who, value)
        self._told(record)
        return record

    def quiz_answers(self, code: str, student, phase: str, answers: dict) -> Record:
        """A student's concept-quiz answers ({item id: option index}) in the open phase ("pre" or "post")."""
        record = self.get(code)
        who = self._student(record.code, student)
        if record.state.get("quiz") != phase:
            raise ClassError(409, f"The {phase}-test is not open.")
        for item, value in answers.items():
            self._put_answer(record.code, f"quiz:{phase}:{item}", who, value)
        record = self._bump(record.code)
        self._told(record)
        return record

    def answers(self, code: str, question: str) -> dict[str, object]:
        """{student's anonymous id: answer} to `question`."""
        return self._answers(self.get(code).code, question)

    def all_answers(self, code: str) -> list[tuple[str, str, object]]:
        """(question, student's anonymous id, answer) of every answer in the class, questions and quiz alike."""
        return self._all_answers(self.get(code).code)

    def listen(self, callback: Callable[[str, int, int], None]) -> None:
        """Call `callback(code, version, seq)` after every change (from any thread)."""
        self._listeners.append(callback)

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ shared steps

    def _student(self, code: str, student) -> str:
        """The student's anonymous id (their token's digest), or ClassError 403."""
        if not isinstance(student, str) or not self._is_student(code, digest(student)):
            raise ClassError(403, "Unknown student: join the class from its link first.")
        return digest(student)

    def _told(self, record: Record) -> None:
        self._notify(record.code, record.version, record.seq)

    def _notify(self, code: str, version: int, seq: int) -> None:
        for callback in list(self._listeners):
            callback(code, version, seq)


class SQLiteStore(ClassStore):
    """The embedded default: one SQLite file (WAL), one connection per thread. A restarted server reopens the same
    file, so a class resumes with every answer kept."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS classes (code TEXT PRIMARY KEY, secret TEXT NOT NULL, created REAL NOT NULL,
        state TEXT NOT NULL, version INTEGER NOT NULL, seq INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS students (code TEXT NOT NULL, student TEXT NOT NULL, joined REAL NOT NULL,
        PRIMARY KEY (code, student));
    CREATE TABLE IF NOT EXISTS answers (code TEXT NOT NULL, question TEXT NOT NULL, student TEXT NOT NULL,
        value TEXT NOT NULL, PRIMARY KEY (code, question, student));
    """

    def __init__(self, path: str | os.PathLike | None = None):
        super().__init__()
        self.path = Path(path) if path else cache_root() / "classes.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._db() as db:
            db.executescript(self.SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def _live_classes(self, now: float) -> int:
        return self._db().execute("SELECT COUNT(*) FROM classes WHERE created > ?", (now - LIFETIME,)).fetchone()[0]

    def _insert(self, code, secret_digest, now, state) -> bool:
        db = self._db()
        db.execute("DELETE FROM classes WHERE created <= ?", (now - LIFETIME,))  # expired classes go, with their rows
        db.execute("DELETE FROM students WHERE code NOT IN (SELECT code FROM classes)")
        db.execute("DELETE FROM answers WHERE code NOT IN (SELECT code FROM classes)")
        try:
            db.execute("INSERT INTO classes VALUES (?, ?, ?, ?, 0, 0)", (code, secret_digest, now, json.dumps(state)))
            return True
        except sqlite3.IntegrityError:
            return False

    def _read(self, code) -> Record | None:
        row = self._db().execute("SELECT created, state, version, seq, (SELECT COUNT(*) FROM students WHERE code = ?) "
                                 "FROM classes WHERE code = ?", (code, code)).fetchone()
        return None if row is None else Record(code, row[0], json.loads(row[1]), row[2], row[3], row[4])

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
        return self._read(code)

    def _bump(self, code) -> Record:
        self._db().execute("UPDATE classes SET seq = seq + 1 WHERE code = ?", (code,))
        return self._read(code)

    def _add_student(self, code, student, now) -> Record:
        self._db().execute("INSERT INTO students VALUES (?, ?, ?)", (code, student, now))
        return self._bump(code)

    def _is_student(self, code, student) -> bool:
        return self._db().execute("SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)).fetchone() is not None

    def _put_answer(self, code, question, student, value) -> Record:
        self._db().execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)", (code, question, student, json.dumps(value)))
        return self._bump(code)

    def _answers(self, code, question) -> dict:
        rows = self._db().execute("SELECT student, value FROM answers WHERE code = ? AND question = ?", (code, question))
        return {student[:12]: json.loads(value) for student, value in rows}

    def _all_answers(self, code) -> list:
        rows = self._db().execute("SELECT question, student, value FROM answers WHERE code = ? ORDER BY question, student",
                                  (code,))
        return [(question, student[:12], json.loads(value)) for question, student, value in rows]


class RedisStore(ClassStore):
    """Across replicas: each class is a hash (state, version, seq, secret, created) with its students and answers in
    hashes beside it, all expiring with the class; every change is published on one channel, which a thread in each
    process hears and passes to its listeners."""

    CHANNEL = "attnviz:class-changes"

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
        ttl = int(LIFETIME) + 60
        with self.redis.pipeline() as pipe:
            pipe.hset(key, mapping={"created": repr(now), "state": json.dumps(state), "version": 0, "seq": 0})
            pipe.expire(key, ttl)
            pipe.zadd("attnviz:classes", {code: now})
            pipe.execute()
        return True

    def _read(self, code) -> Record | None:
        with self.redis.pipeline() as pipe:
            pipe.hmget(self._key(code), "created", "state", "version", "seq")
            pipe.hlen(self._key(code, ":students"))
            (created, state, version, seq), students = pipe.execute()
        if created is None or state is None:
            return None
        return Record(code, float(created), json.loads(state), int(version), int(seq), students)

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
        return self._read(code)

    def _bump(self, code) -> Record:
        self.redis.hincrby(self._key(code), "seq", 1)
        return self._read(code)

    def _add_student(self, code, student, now) -> Record:
        key = self._key(code, ":students")
        with self.redis.pipeline() as pipe:
            pipe.hset(key, student, repr(now))
            pipe.expire(key, int(LIFETIME) + 60)
            pipe.execute()
        return self._bump(code)

    def _is_student(self, code, student) -> bool:
        return bool(self.redis.hexists(self._key(code, ":students"), student))

    def _put_answer(self, code, question, student, value) -> Record:
        key = self._key(code, ":answers")
        with self.redis.pipeline() as pipe:
            pipe.hset(key, f"{question}\x1f{student}", json.dumps(value))
            pipe.expire(key, int(LIFETIME) + 60)
            pipe.execute()
        return self._bump(code)

    def _answers(self, code, question) -> dict:
        return {student: value for q, student, value in self._all_answers(code) if q == question}

    def _all_answers(self, code) -> list:
        rows = []
        for field, value in self.redis.hscan_iter(self._key(code, ":answers"), count=1000):
            question, student = field.split("\x1f", 1)
            rows.append((question, student[:12], json.loads(value)))
        return sorted(rows, key=lambda row: (row[0], row[1]))

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
