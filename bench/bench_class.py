"""Class benchmark: a live class of K students on one server, each with today's load on top of the class.

Run: python bench/bench_class.py [--students 100,300] [--seconds 60] [--replicas]

--replicas: the same load through two replicas behind HAProxy (deploy/haproxy.cfg) on the same machine, the class in
a real redis-server (ATTNVIZ_CLASS_STORE=redis://…): Streamlit runs a session's scripts under one process's GIL, so a
second process is how one 2-core machine gives a class both its cores.

Each student is what a student's browser sends: a Streamlit session on the Self-attention page with today's mix
(bench_load's student: a view flipped each second, posted to the view beacon, and a new sentence every 8 s), plus the
class's event stream (one long GET, Server-Sent Events, as EventSource reads it), a join, and an answer to each
question. The presenter, over the HTTP contract, changes the heatmap view every 3 s and asks a question every 15 s,
which each student answers within 5 s (a random delay) and half of them change once. A projector reads the
`?tally=1` stream. Measured, browser-free (every figure is the server's: the client is one Python process):

- today's mix: p50/p95 of the sessions' runs, as bench_load measures them, beside the same mix without the class;
- follow latency: from the presenter's POST to each student's event with that version received;
- answers: from each answer's POST to the projector's event whose count includes it; answers lost (posted with a
  200, missing from the class's final count);
- the server's peak resident memory, with and without the class.
Not a test; docs/benchmarks.md records the output with the date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.protocol import dechunk  # noqa: E402
from bench.bench_load import percentile, protocol_load, servers, settle, stop, warm  # noqa: E402

PRESENTER_EVERY = 3.0  # seconds between the presenter's view changes
QUESTION_EVERY = 15.0
ANSWER_WITHIN = 5.0


async def request(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """One HTTP request on its own connection, as a page's fetch() sends it: (status, JSON answer)."""
    host, _, port = url.split("://", 1)[-1].partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode() if body is not None else b""
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        payload = dechunk(payload)
    return status, json.loads(payload or b"{}")


async def events(url: str, path: str, heard, stop_at: float) -> None:
    """Read an event stream until `stop_at`, calling heard(time received, state) for each `data:` line."""
    host, _, port = url.split("://", 1)[-1].partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    try:
        while time.perf_counter() < stop_at:
            try:
                line = await asyncio.wait_for(reader.readline(), timeout=max(0.1, stop_at - time.perf_counter()))
            except asyncio.TimeoutError:
                break
            if not line:
                break
            at = line.find(b"data: ")
            if at >= 0:  # a chunk's size line may sit before it in the same read: find the prefix
                heard(time.perf_counter(), json.loads(line[at + 6:]))
    finally:
        writer.close()


class Class:
    def __init__(self):
        self.sent: dict[int, float] = {}  # version → when the presenter's POST was sent
        self.follow: list[float] = []  # seconds, per student per change
        self.answers: dict[str, list[float]] = {}  # question → each accepted answer's POST start
        self.first: dict[str, dict[str, float]] = {}  # question → student → their first accepted answer's POST start
        self.answer_latency: list[float] = []
        self.projector: list[tuple[float, str, int]] = []  # (time, question id, answered)
        self.posted: dict[str, set[str]] = {}  # question → students whose answer got a 200
        self.refused: list[str] = []

    def student_heard(self, seen: set):
        def heard(at: float, state: dict) -> None:
            version = state["version"]
            if version in self.sent and version not in seen:
                seen.add(version)
                self.follow.append(at - self.sent[version])
        return heard

    def projector_heard(self, at: float, state: dict) -> None:
        if state.get("question"):
            self.projector.append((at, state["question"]["id"], state["answered"]))


async def presenter(url: str, code: str, secret: str, klass: Class, stop_at: float, asked: list) -> None:
    rng = random.Random(0)
    base = f"/_attnviz/class/{code}"
    last_question = -QUESTION_EVERY
    began = time.perf_counter()
    while time.perf_counter() < stop_at - ANSWER_WITHIN - 2:
        body = {"secret": secret, "view": {"temp": rng.choice([0.1, 0.5, 1.0, 2.0]), "query": rng.randrange(16)}}
        if time.perf_counter() - began - last_question >= QUESTION_EVERY:
            last_question = time.perf_counter() - began
            qid = f"q{len(asked)}"
            body["question"] = {"id": qid, "step": 7, "kind": "pick", "prompt": "Which word?",
                                "options": ["a", "b", "c", "d"], "answer": 1}
        sent = time.perf_counter()
        status, answer = await request(url, "POST", f"{base}/present", body)
        assert status == 200, answer
        klass.sent[answer["version"]] = sent
        if "question" in body:
            asked.append((body["question"]["id"], sent))
        await asyncio.sleep(PRESENTER_EVERY)


async def class_student(url: str, code: str, k: int, klass: Class, stop_at: float, asked: list, token: str) -> None:
    rng = random.Random(1000 + k)
    base = f"/_attnviz/class/{code}"
    answered = set()
    while time.perf_counter() < stop_at:
        await asyncio.sleep(0.2)
        for qid, at in list(asked):
            if qid in answered:
                continue
            answered.add(qid)
            await asyncio.sleep(max(0.0, at + rng.random() * ANSWER_WITHIN - time.perf_counter()))
            for choice in ([rng.randrange(4)] + ([rng.randrange(4)] if rng.random() < 0.5 else [])):
                started = time.perf_counter()
                status, answer = await request(url, "POST", f"{base}/answer",
                                               {"student": token, "question": qid, "value": choice})
                if status == 200:
                    klass.first.setdefault(qid, {}).setdefault(token, started)
                    klass.posted.setdefault(qid, set()).add(token)
                    klass.answers.setdefault(qid, []).append(started)
                else:
                    klass.refused.append(f"{status}: {answer.get('error')}")
                await asyncio.sleep(0.3)


def answer_latencies(klass: Class) -> list[float]:
    """Each question's n-th student to answer against the first projector event that counts n students."""
    out = []
    for qid, firsts in klass.first.items():
        shown = [(at, n) for at, q, n in klass.projector if q == qid]
        for n, started in enumerate(sorted(firsts.values()), 1):
            seen = next((at for at, count in shown if count >= n), None)
            if seen is not None:
                out.append(seen - started)
    return out


async def run_class(url: str, k: int, seconds: float, pids: list[int], with_class: bool) -> dict:
    klass, asked, tokens = Class(), [], []
    if with_class:
        from attnviz.classroom.teacher import teacher_key

        made = (await request(url, "POST", "/_attnviz/class", {"key": teacher_key()}))[1]
        code, secret = made["code"], made["secret"]
        while len(tokens) < k:  # joins are limited per class (JOINS_PER_SECOND): a refused one waits its second
            status, joined = await request(url, "POST", f"/_attnviz/class/{code}/join", {})
            if status == 429:
                await asyncio.sleep(0.1)
            else:
                tokens.append(joined["student"])

    def alongside(stop_at: float) -> list:
        """Each student's event stream and answers, the projector's stream, and the presenter (a second later)."""
        if not with_class:
            return []
        tasks = [asyncio.create_task(events(url, f"/_attnviz/class/{code}/events?tally=1", klass.projector_heard, stop_at))]
        for i, token in enumerate(tokens):
            tasks.append(asyncio.create_task(events(url, f"/_attnviz/class/{code}/events?student={token}",
                                                    klass.student_heard(set()), stop_at)))
            tasks.append(asyncio.create_task(class_student(url, code, i, klass, stop_at, asked, token)))
        tasks.append(asyncio.create_task(later(1.0, presenter(url, code, secret, klass, stop_at, asked))))
        return tasks

    result = await protocol_load(url, k, seconds, pids, alongside)
    if with_class:
        final = (await request(url, "GET", f"/_attnviz/class/{code}"))[1]
        last = asked[-1][0] if asked else None
        lost = len(klass.posted.get(last, ())) - (final["answered"] if final.get("question") else 0) if last else 0
        latencies = answer_latencies(klass)
        result.update(follow_p50_ms=1000 * statistics.median(klass.follow) if klass.follow else float("nan"),
                      follow_p95_ms=1000 * percentile(klass.follow, 0.95), follow_events=len(klass.follow),
                      expected_follow=len(klass.sent) * k,
                      answer_p95_ms=1000 * percentile(latencies, 0.95), answers=sum(len(v) for v in klass.answers.values()),
                      lost=lost, refused=klass.refused[:3], questions=len(asked))
    return result


async def later(seconds: float, work) -> None:
    """`work` after `seconds`: every stream is open before the presenter's first change."""
    await asyncio.sleep(seconds)
    await work


def redis_server():
    """(process, URL) of a redis-server on a free local port that keeps nothing on disk."""
    import shutil
    import subprocess
    import tempfile

    from bench.browser import free_port

    port = free_port()
    process = subprocess.Popen([shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port), "--bind",
                                "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tempfile.gettempdir()],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return process, f"redis://127.0.0.1:{port}/0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", default="100,300")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--replicas", action="store_true", help="two replicas and HAProxy, the class in Redis")
    args = parser.parse_args()
    rows = []
    redis = None
    if args.replicas:
        redis, store = redis_server()
    else:
        store = str(Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-class-{os.getpid()}.sqlite")
    for k in (int(v) for v in args.students.split(",")):
        for with_class in (False, True):
            replicas, proxy, url = servers(args.replicas, ROOT, {"ATTNVIZ_CLASS_STORE": store})
            try:
                for server in replicas:
                    warm(server.url)
                settle([r.process.pid for r in replicas])
                pids = [r.process.pid for r in replicas] + ([redis.pid] if redis else [])
                result = asyncio.run(run_class(url, k, args.seconds, pids, with_class))
            finally:
                stop(replicas, proxy)
            rows.append((k, with_class, result))
            print(f"  K={k}, class={with_class}: {result}", file=sys.stderr, flush=True)
    if redis:
        redis.terminate()
    setup = "two replicas + HAProxy + Redis" if args.replicas else "one server, SQLite"
    print(f"\nbench_class ({setup}): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, {args.seconds:.0f} s\n")
    print("| students K | class | today's mix p50 / p95 | follow p50 / p95 (events / expected) | answers counted p95 | "
          "answers (lost) | server CPU, in cores | the client's CPU, in cores | peak memory |\n|---|---|---|---|---|---|---|---|---|")
    for k, with_class, r in rows:
        if with_class:
            follow = f"{r['follow_p50_ms']:.0f} / {r['follow_p95_ms']:.0f} ms ({r['follow_events']} / {r['expected_follow']})"
            answers = f"{r['answer_p95_ms']:.0f} ms"
            count = f"{r['answers']} ({r['lost']})"
        else:
            follow = answers = count = "—"
        failed = f", {len(r['failed'])} failed" if r["failed"] else ""
        print(f"| {k} | {'yes' if with_class else 'no'} | {r['p50_ms']:.0f} / {r['p95_ms']:.0f} ms{failed} | {follow} | "
              f"{answers} | {count} | {r['cores']:.2f} | {r['client_cores']:.2f} | {r['peak_mib']:,.0f} MiB |")


if __name__ == "__main__":
    main()
