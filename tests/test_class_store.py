"""The class store's interface, the same tests against SQLite and a real redis-server."""

import threading
import time

import pytest

from attnviz.classroom import store as stores
from attnviz.classroom.questions import Question
from class_support import redis_server

QUESTION = Question("s7-word", 7, "pick", "Which word?", ("a", "b", "c"), 1).full()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    process, url = redis_server(tmp_path_factory.mktemp("redis"))
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(params=["sqlite", "redis"])
def make(request, tmp_path, redis_url_or_none):
    """A function that opens the store under test (a second call: a second process's view of the same data)."""
    if request.param == "sqlite":
        path = tmp_path / "classes.sqlite"
        opened = []
        yield lambda: opened.append(stores.SQLiteStore(path)) or opened[-1]
    else:
        import redis

        url = request.getfixturevalue("redis_url")
        redis.Redis.from_url(url).flushdb()
        opened = []
        yield lambda: opened.append(stores.RedisStore(url)) or opened[-1]
        for s in opened:
            s.close()


@pytest.fixture
def redis_url_or_none():
    return None


def test_a_class_has_a_clear_code_and_a_long_secret(make):
    store = make()
    code, secret = store.create()
    assert len(code) == 6 and set(code) <= set(stores.CODE_ALPHABET) and not set(code) & set("0O1IL2Z5S8B")
    assert len(secret) >= 43  # 32 random bytes, base64: 256 bits
    record = store.get(code.lower())  # a code typed in lower case finds the class
    assert (record.state["step"], record.version, record.students) == (1, 0, 0)


def test_only_the_secret_changes_the_class_and_each_change_counts(make):
    store = make()
    code, secret = store.create()
    with pytest.raises(stores.ClassError) as refused:
        store.act(code, "not the secret", step=5)
    assert refused.value.status == 403 and store.get(code).state["step"] == 1
    assert store.act(code, secret, step=5, view={"temp": 0.5}).version == 1
    record = store.get(code)
    assert record.state["step"] == 5 and record.state["view"] == {"temp": 0.5} and record.version == 1
    with pytest.raises(stores.ClassError, match="Unknown field"):
        store.act(code, secret, votes=1)


def test_unknown_and_expired_codes_are_404(make):
    store = make()
    for code in ("ZZZZZZ", "AAAA", "", None, "ÄÄÄÄÄÄ"):
        with pytest.raises(stores.ClassError) as error:
            store.get(code)
        assert error.value.status == 404
    code, _ = store.create(now=time.time() - stores.LIFETIME - 1)  # started 12 hours ago
    with pytest.raises(stores.ClassError, match="12 hours") as error:
        store.get(code)
    assert error.value.status == 404


def test_answers_count_once_per_student_and_only_while_the_question_is_open(make):
    store = make()
    code, secret = store.create()
    a, b = store.join(code), store.join(code)
    with pytest.raises(stores.ClassError) as closed:
        store.answer(code, a, "s7-word", 1)
    assert closed.value.status == 409
    store.act(code, secret, question=QUESTION)
    store.answer(code, a, "s7-word", 0)
    store.answer(code, a, "s7-word", 1)  # a changed mind replaces the first answer
    store.answer(code, b, "s7-word", 2)
    assert sorted(store.answers(code, "s7-word").values()) == [1, 2]
    with pytest.raises(stores.ClassError) as stranger:
        store.answer(code, "someone else's token", "s7-word", 1)
    assert stranger.value.status == 403
    store.act(code, secret, revealed=True)
    with pytest.raises(stores.ClassError, match="revealed"):
        store.answer(code, b, "s7-word", 1)
    assert sorted(store.answers(code, "s7-word").values()) == [1, 2]
    assert store.get(code).students == 0  # joined, but no page of theirs has opened its stream yet
    store.seen(code, a)
    store.seen(code, b)
    assert store.get(code).students == 2


def test_a_second_process_sees_the_class_and_hears_its_changes(make):
    """What a restarted server (SQLite) or another replica (Redis) finds: every answer kept, every change heard."""
    first, second = make(), make()
    heard = []
    event = threading.Event()
    second.listen(lambda code, version, seq: (heard.append((code, version)), event.set()))
    code, secret = first.create()
    student = first.join(code)
    first.act(code, secret, question=QUESTION)
    first.answer(code, student, "s7-word", 2)
    assert second.answers(code, "s7-word") and second.get(code).state["question"]["id"] == "s7-word"
    if isinstance(second, stores.RedisStore):  # SQLite's listeners are the writing process's own
        assert event.wait(5) and any(c == code for c, _ in heard)
    second.act(code, secret, step=9)
    assert first.get(code).state["step"] == 9


def test_the_caps_hold(make, monkeypatch):
    store = make()
    monkeypatch.setattr(stores, "MAX_CLASSES", 2)
    monkeypatch.setattr(stores, "MAX_STUDENTS", 3)
    code, _ = store.create()
    store.create()
    with pytest.raises(stores.ClassError, match="2 live classes") as many:
        store.create()
    assert many.value.status == 429
    for _ in range(3):
        store.join(code)
    with pytest.raises(stores.ClassError, match="full") as full:
        store.join(code)
    assert full.value.status == 409 and "Tell the teacher" in str(full.value)


def test_the_default_store_is_sqlite_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path))
    monkeypatch.delenv(stores.STORE_SETTING, raising=False)
    store = stores.open_store()
    assert isinstance(store, stores.SQLiteStore) and store.path == tmp_path / "classes.sqlite"
    assert store._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_unreachable_redis_says_which_setting_to_fix():
    from class_support import free_port

    with pytest.raises(stores.ClassError, match="ATTNVIZ_CLASS_STORE=redis://127.0.0.1") as error:
        stores.open_store(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    assert error.value.status == 503


def test_joins_no_page_follows_expire_and_a_closed_page_leaves(make, monkeypatch):
    """A script's joins that never open a stream hold a place for PENDING_S only; a page that closes stops counting
    at once, and one that goes silent after PRESENT_S; the same token comes back as the same student."""
    store = make()
    monkeypatch.setattr(stores, "MAX_STUDENTS", 3)
    code, _ = store.create()
    t0 = time.time()
    for _ in range(3):
        store.join(code, now=t0)  # a flood: three joins, no page
    with pytest.raises(stores.ClassError, match="full"):
        store.join(code, now=t0 + 1)
    real = store.join(code, now=t0 + stores.PENDING_S + 1)  # the flood's places have expired
    assert store.seen(code, real, now=t0 + stores.PENDING_S + 2) == stores.pseudonym(stores.digest(real))
    later = t0 + stores.PENDING_S + 3
    assert store.get(code, now=later).students == 1
    assert [s.id for s in store.roster(code, now=later)] == [stores.pseudonym(stores.digest(real))]
    assert store.get(code, now=later + stores.PRESENT_S + 1).students == 0  # silent for PRESENT_S: not present
    store.seen(code, real, now=later + 1)
    store.seen(code, real, now=later + 2, here=False)  # the browser closed
    assert store.get(code, now=later + 3).students == 0
    store.seen(code, real, now=later + 4)  # a reload: the same token, the same student
    assert store.get(code, now=later + 5).students == 1 and len(store.roster(code, now=later + 5)) == 1


def test_the_teacher_closes_joins_removes_a_student_and_ends_the_class(make):
    store = make()
    code, secret = store.create()
    kept, removed = store.join(code), store.join(code)
    for student in (kept, removed):
        store.seen(code, student)
    store.act(code, secret, joins=False)
    with pytest.raises(stores.ClassError, match="closed it to joins") as closed:
        store.join(code)
    assert closed.value.status == 403
    gone = stores.pseudonym(stores.digest(removed))
    with pytest.raises(stores.ClassError) as wrong:
        store.remove(code, "not the secret", gone)
    assert wrong.value.status == 403
    store.act(code, secret, question=QUESTION)
    store.answer(code, removed, "s7-word", 2)
    store.remove(code, secret, gone)
    assert store.get(code).state["removed"] == [gone] and store.get(code).students == 1
    with pytest.raises(stores.ClassError, match="removed you") as refused:
        store.answer(code, removed, "s7-word", 1)
    assert refused.value.status == 403 and store.answers(code, "s7-word") == {gone: 2}  # the answer given stays
    store.end(code, secret)
    with pytest.raises(stores.ClassError) as ended:
        store.get(code)
    assert ended.value.status == 404


def test_a_second_round_is_kept_apart_and_lock_timer_and_next_close_answers(make):
    store = make()
    code, secret = store.create()
    a, b = store.join(code), store.join(code)
    store.act(code, secret, question=QUESTION)
    t0 = time.time()
    store.answer(code, a, "s7-word", 0, now=t0)
    store.answer(code, b, "s7-word", 0, now=t0)
    store.act(code, secret, locked=True)
    with pytest.raises(stores.ClassError, match="locked") as locked:
        store.answer(code, a, "s7-word", 1)
    assert locked.value.status == 409
    store.act(code, secret, shown=True)
    assert store.get(code).state["shown"] is True
    store.act(code, secret, round=2)  # talk to your neighbour, then vote again: hidden and open again
    state = store.get(code).state
    assert (state["round"], state["shown"], state["locked"]) == (2, False, False)
    store.answer(code, a, "s7-word", 1, now=t0 + 5)
    assert store.answers(code, "s7-word", 1) == {stores.pseudonym(stores.digest(a)): 0,
                                                  stores.pseudonym(stores.digest(b)): 0}
    assert store.answers(code, "s7-word", 2) == {stores.pseudonym(stores.digest(a)): 1}
    rows = store.all_answers(code)
    assert [(r.round, r.value) for r in rows if r.student == stores.pseudonym(stores.digest(a))] == [(1, 0), (2, 1)]
    assert rows[-1].at == pytest.approx(t0 + 5)
    store.act(code, secret, deadline=t0 + 10)
    with pytest.raises(stores.ClassError, match="Time is up"):
        store.answer(code, b, "s7-word", 1, now=t0 + 11)
    store.answer(code, b, "s7-word", 1, now=t0 + 9)
    store.act(code, secret, step=8)  # Next: the question leaves every screen
    state = store.get(code).state
    assert state["question"] is None and state["round"] == 1 and state["deadline"] is None
    assert store.asked(code)["s7-word"]["answer"] == 1  # kept for the record, with its truth
    with pytest.raises(stores.ClassError) as no_round:
        store.act(code, secret, round=2)
    assert no_round.value.status == 409


def test_a_class_asks_nicknames_only_when_the_teacher_wants_them(make):
    store = make()
    code, secret = store.create()
    anonymous = store.join(code, nickname="<b>Ada</b>")
    store.seen(code, anonymous)
    assert store.roster(code)[0].nickname == ""  # off by default: nothing kept
    store.act(code, secret, nicknames=True)
    with pytest.raises(stores.ClassError, match="nickname") as none:
        store.join(code, nickname="  ")
    assert none.value.status == 400
    named = store.join(code, nickname="  Ada\x00  Lovelace " + "x" * 40)
    store.seen(code, named)
    assert [s.nickname for s in store.roster(code)] == ["", ("Ada Lovelace " + "x" * 40)[:stores.NICKNAME_CHARS]]


def test_sqlite_hands_a_finished_threads_connection_to_the_next_thread(tmp_path):
    """A page run is a thread of its own: the next run's thread takes the connection the last one left, instead of
    opening one per run."""
    import gc

    store = stores.SQLiteStore(tmp_path / "classes.sqlite")
    code, _ = store.create()
    used = []

    def run():
        store.get(code)
        used.append(id(store._db()))

    for _ in range(3):
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        del thread
        gc.collect()
    assert len(set(used)) == 1  # one connection, three runs
