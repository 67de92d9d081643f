"""Two replicas of the app over one real redis-server (ATTNVIZ_CLASS_STORE=redis://…): a presenter on replica A drives
a student whose event stream is on replica B, and the student's answer, posted to B, is counted once on A."""

import json
import threading
import time
import urllib.request

import pytest

from class_support import redis_server
from driver import TEACHER_KEY, start_server
from tests.test_class_http import QUESTION, call


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    redis, url = redis_server(tmp_path_factory.mktemp("redis"))
    servers = [start_server({"ATTNVIZ_CLASS_STORE": url}) for _ in range(2)]
    yield [f"{base}/_attnviz/class" for _, base in servers]
    for process, _ in servers:
        process.terminate()
        process.wait(10)
    redis.terminate()
    redis.wait(10)


def test_a_presenter_on_one_replica_drives_a_student_on_the_other(replicas):
    a, b = replicas
    made = call(a, {"key": TEACHER_KEY})[1]
    code, secret = made["code"], made["secret"]
    student = call(f"{b}/{code}/join", {})[1]["student"]
    heard = []

    def listen():
        with urllib.request.urlopen(f"{b}/{code}/events?student={student}", timeout=20) as stream:
            for raw in stream:
                if raw.startswith(b"data: "):
                    heard.append((time.perf_counter(), json.loads(raw[6:])))
                    if heard[-1][1]["step"] == 12:
                        return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not heard and time.time() < deadline:
        time.sleep(0.02)
    sent = time.perf_counter()
    assert call(f"{a}/{code}/present", {"secret": secret, "step": 12, "question": QUESTION})[0] == 200
    thread.join(10)
    assert heard and heard[-1][1]["step"] == 12 and heard[-1][1]["question"]["id"] == "s7-word"
    assert heard[-1][1]["students"] == 1  # present: its page follows through replica B
    assert heard[-1][0] - sent < 1.0  # through Redis pub/sub, well within a second
    for _ in range(2):  # the same student twice, through replica B: one answer
        assert call(f"{b}/{code}/answer", {"student": student, "question": "s7-word", "value": 1})[0] == 200
    state = call(f"{a}/{code}")[1]
    assert state["answered"] == 1 and "results" not in state  # hidden until the teacher shows them
    assert call(f"{a}/{code}/present", {"secret": secret, "shown": True})[0] == 200
    assert call(f"{b}/{code}")[1]["results"] == [{"answered": 1, "counts": [0, 1, 0]}]
