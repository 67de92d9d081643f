"""Two replicas of the app over one real redis-server (ATTNVIZ_CLASS_STORE=redis://…): a presenter on replica A drives
a student whose event stream is on replica B, and the student's answer, posted to B, is counted once on A; and a whole
class in Chromium through HAProxy (deploy/haproxy.cfg) over the same kind of store."""

import json
import os
import re
import subprocess
import threading
import time
import urllib.request

import pytest
import redis as redis_client

from attnviz.classroom.store import RedisStore
from class_support import redis_server
from driver import TEACHER_KEY, exceptions, free_port, healthy, start_server, until
from tests.test_class_http import QUESTION, call


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    redis, url = redis_server(tmp_path_factory.mktemp("redis"))
    servers = [start_server({"ATTNVIZ_CLASS_STORE": url}) for _ in range(2)]
    yield [f"{base}/_attnviz/class" for _, base in servers], url
    for process, _ in servers:
        process.terminate()
        process.wait(10)
    redis.terminate()
    redis.wait(10)


def test_a_presenter_on_one_replica_drives_a_student_on_the_other(replicas):
    (a, b), store = replicas
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
    assert call(f"{a}/{code}/present", {"secret": secret, "step": 12, "question": QUESTION})[0] == 200
    thread.join(10)
    assert heard and heard[-1][1]["step"] == 12 and heard[-1][1]["question"]["id"] == "s7-word"
    assert heard[-1][1]["students"] == 1  # present: its page follows through replica B
    # The replica that streams to the student hears the class's changes on Redis's channel (pub/sub), not only by
    # reading the store in turn.
    (_, listeners), = redis_client.Redis.from_url(store).pubsub_numsub(RedisStore.CHANNEL)
    assert listeners >= 1
    for _ in range(2):  # the same student twice, through replica B: one answer
        assert call(f"{b}/{code}/answer", {"student": student, "question": "s7-word", "value": 1})[0] == 200
    state = call(f"{a}/{code}")[1]
    assert state["answered"] == 1 and "results" not in state  # hidden until the teacher shows them
    assert call(f"{a}/{code}/present", {"secret": secret, "shown": True})[0] == 200
    assert call(f"{b}/{code}")[1]["results"] == [{"answered": 1, "counts": [0, 1, 0]}]


@pytest.fixture(scope="module")
def balanced_class(tmp_path_factory):
    """Two replicas over one redis-server behind HAProxy (deploy/haproxy.cfg): (balancer URL, redis URL)."""
    from test_balancer import CONFIG, haproxy_or_skip

    haproxy = haproxy_or_skip()
    redis, store = redis_server(tmp_path_factory.mktemp("redis"))
    servers = [start_server({"ATTNVIZ_CLASS_STORE": store}) for _ in range(2)]
    port = free_port()
    env = {**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{port}", "ATTNVIZ_STATS_BIND": f"127.0.0.1:{free_port()}",
           "ATTNVIZ_APP1": servers[0][1].removeprefix("http://"), "ATTNVIZ_APP2": servers[1][1].removeprefix("http://")}
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(CONFIG)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    assert healthy(url, 30)
    yield url
    proxy.terminate()
    proxy.wait(10)
    for process, _ in servers:
        process.terminate()
        process.wait(10)
    redis.terminate()
    redis.wait(10)


def test_a_class_through_the_balancer_on_redis_in_chromium(browser, balanced_class):
    """The projector and its console on one replica, students spread over both by the balancer: they follow, vote,
    see the results once shown and the reveal, and every answer is counted once."""
    from test_balancer import replica_of
    from test_live_class import PANEL, following, join, open_console, start_class

    url = balanced_class
    teacher = browser.new_context(viewport={"width": 1280, "height": 800})
    students = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(3)]
    try:
        projector = teacher.new_page()
        code = start_class(projector, url, 2)
        console = open_console(teacher, url, code)
        pages = join(students, url, code, 2)
        assert len({replica_of(c) for c in [teacher, *students]}) == 2  # the class spans both replicas
        console.get_by_role("button", name=re.compile("^Ask: Li → Mu is gone")).click()
        for page in pages:
            page.locator(".av-class-option").first.click()
            page.get_by_text("Answer sent").wait_for(timeout=10_000)
        until(projector, PANEL, lambda p: p and p["answered"] == 3 and p["results"] is None)
        console.get_by_role("button", name="Show the results").click()
        shown = until(projector, PANEL, lambda p: p and p["results"])
        assert shown["results"][0]["counts"][0] == 3
        console.get_by_role("button", name="Reveal").click()
        for page in pages:
            page.get_by_text(re.compile("^Answer: ")).first.wait_for(timeout=10_000)
        projector.get_by_role("button", name="Next").click()
        for page in pages:
            following(page, 3)
        for page in [projector, console, *pages]:
            assert exceptions(page) == []
    finally:
        teacher.close()
        for context in students:
            context.close()
