"""Load benchmark: a class of K sessions on the Self-attention page, each interacting once a second.

Run: python bench/bench_load.py [--sessions 10,20,30,60] [--balanced 30,60] [--seconds 60]
     python bench/bench_load.py --solo [--tokens 16,128,512] [--runs 20]      (server CPU per run, one session)
     python bench/bench_load.py --client browser [--sessions 5,10]             (the same load from Chromium tabs)
Add --root DIR to serve an earlier checkout (a git worktree) with the same client.

The protocol client (bench/protocol.py) speaks Streamlit's websocket protocol as a browser does, so the figures are
the server's own: nothing else competes for the cores but one small Python process. Each session opens the page on
its own 16-token sentence; once all have drawn it, each interacts once a second: every 8th second a new sentence of
8-20 words (session k in the seconds s with s mod 8 = k mod 8, so that the class does not type in step), otherwise a
control, for at most the given seconds (behind a saturated server a session makes fewer runs). A new sentence is what
the page's sentence box sends: a POST answered with the heatmap's new raw scores (no run) while nothing else on the
page depends on the sentence, as on the page as it opens; else one run of the page's fragment. The control is what
reaches the server when a student plays with the heatmap: the
browser redraws on its own and sends the view (τ, hard, mask, query) once the student pauses, which reruns the
heatmap's fragment (on a checkout without the browser-side heatmap: a click on the hard-attention toggle). A
session waits for its run to finish before the next, as a browser tab does. Latency = request sent →
`script_finished`. Reported: p50/p95 of all runs and of each kind, runs that failed, the servers' CPU per run and
in cores, their peak resident memory. With --balanced, two replicas behind HAProxy with deploy/haproxy.cfg (which
keeps a session on its replica by cookie; this client, like a browser's first request, has none, so the balancer
spreads the websockets round robin).

--solo: one session, runs one after another with a pause between, each run's server CPU read from /proc (user +
system, all threads): a control, and a new sentence, at each size.

--client browser: K headless Chromium tabs instead, each clicking the heatmap's hard toggle once a second (timed in
the page, from the click to the redrawn heatmap). The tabs share this machine's cores with the server, so this
measures the browsers' share as much as the server's.
Not a test; README records the output with the date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.browser import CHROMIUM, DRAWN, FLAGS, WATCH, Server, free_port, sentence  # noqa: E402
from bench.protocol import Run, Session  # noqa: E402

HARD = "Hard attention (one-hot argmax)"
COMPONENT = "live"  # the Self-attention heatmap's key
BOX = "text_box"  # its sentence box's key
TAUS = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
NEW_SENTENCE_EVERY = 8  # seconds
# Common words GloVe knows: a new sentence is 8-20 of them, drawn at random, so no cache has seen it.
VOCABULARY = ("the dog cat man woman child house tree river city road car book table window door garden school "
              "teacher student friend mother father king queen music film game team water food light night day "
              "morning evening summer winter rain snow sun moon star sea mountain field bird horse fish small big "
              "old new happy sad quick slow red green blue white black warm cold long short good bad first last "
              "saw ran walked ate read wrote sang played opened closed found lost gave took made built liked loved "
              "and but so then when while after before because with without under over near far here there").split()


class Usage(threading.Thread):
    """Samples some processes every 0.2 s: `peak` is their largest summed resident memory (MiB); `cpu_seconds()`
    their user + system CPU time so far."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids, self.peak, self.running = pids, 0.0, True

    def memory(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024

    def cpu_seconds(self) -> float:
        ticks = 0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
            except OSError:
                pass
        return ticks / os.sysconf("SC_CLK_TCK")

    def run(self):
        self.cpu_start, self.wall_start, client_start = self.cpu_seconds(), time.perf_counter(), time.process_time()
        while self.running:
            self.peak = max(self.peak, self.memory())
            time.sleep(0.2)
        self.cpu = self.cpu_seconds() - self.cpu_start
        self.wall = time.perf_counter() - self.wall_start
        self.client_cpu = time.process_time() - client_start  # this process: the load client, on the same cores


async def type_sentence(session: Session, url: str, text: str) -> Run:
    """A new sentence as the page's box sends it (Session.type_sentence): a POST answered with the heatmap's data
    while nothing else on the page depends on the sentence, else a run; on a checkout before the box, its text area."""
    if session.has(BOX):
        return await session.type_sentence(url, BOX, text)
    return await session.change(session.find("Sentence"), string_value=text)


def new_sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(8, 20)))


async def control(session: Session, rng: random.Random, tokens: int, url: str) -> Run:
    """One paused change of the heatmap's view as the browser sends it: where the heatmap's data carries a beacon
    (appkit/beacon), a POST of the view, which runs no page; else its state value, which reruns the heatmap's fragment;
    on a checkout without the browser-side heatmap, a click on the hard-attention toggle."""
    if session.has(COMPONENT):
        view = {"temp": rng.choice(TAUS), "hard": rng.random() < 0.3, "mask": rng.choice(["none", "causal"]), "hide": [],
                "scale": "row", "palette": "viridis", "query": rng.randrange(tokens)}
        beacon = session.data.get(COMPONENT, {}).get("beacon")
        if beacon:
            return await session.post(url, beacon["url"], {"token": beacon["token"], "view": view,
                                                           "search": "?" + session.query})
        return await session.set_component_state(COMPONENT, {"view": view})
    toggle = session.find(HARD)
    return await session.change(toggle, bool_value=not toggle.state.bool_value)


async def student(url: str, k: int, seconds: float, ready: list, start: asyncio.Event, runs: list, failures: list):
    rng = random.Random(k)
    text = sentence(16, k)
    try:
        session, first = await Session.open(url, f"text={text.replace(' ', '+')}")
    except Exception as error:  # a session that cannot connect is a result to report
        failures.append(f"connect: {type(error).__name__}: {error}")
        return
    if not first.ok:
        failures.append(f"first run: {first.problem}")
        await session.close()
        return
    ready.append(k)
    await start.wait()
    await asyncio.sleep(rng.random())  # the class does not click in step
    tokens = len(text.split())
    began = time.perf_counter()
    for second in range(int(seconds)):
        if time.perf_counter() - began >= seconds:  # behind a saturated server: what the minute held is the result
            break
        await asyncio.sleep(max(0.0, began + second - time.perf_counter()))
        if second % NEW_SENTENCE_EVERY == k % NEW_SENTENCE_EVERY:  # each session on its own beat: not all at once
            text = new_sentence(rng)
            tokens = len(text.split())
            run = await type_sentence(session, url, text)
            kind = "sentence"
        else:
            run = await control(session, rng, tokens, url)
            kind = "control"
        runs.append((kind, run))
        if not run.ok:
            failures.append(f"{kind}: {run.problem}")
    await session.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def protocol_load(url: str, sessions: int, seconds: float, pids: list[int], alongside=None) -> dict:
    """K sessions' runs for `seconds`; `alongside(stop_at)`, where given, starts more tasks with them (bench_class's
    class), which the measurement waits for too."""
    runs: list[tuple[str, Run]] = []
    failures: list[str] = []
    ready: list[int] = []
    start = asyncio.Event()
    tasks = [asyncio.create_task(student(url, k, seconds, ready, start, runs, failures)) for k in range(sessions)]
    while len(ready) + len(failures) < sessions and not all(t.done() for t in tasks):
        await asyncio.sleep(0.1)
    usage = Usage(pids)
    usage.start()
    start.set()
    extra = alongside(time.perf_counter() + seconds) if alongside else []
    await asyncio.gather(*tasks, *extra)
    usage.running = False
    usage.join()
    ok = [run.seconds * 1000 for _, run in runs if run.ok]
    result = {"runs": len(runs), "failed": failures, "p50_ms": statistics.median(ok) if ok else float("nan"),
              "p95_ms": percentile(ok, 0.95), "cpu_ms_per_run": 1000 * usage.cpu / max(len(runs), 1),
              "cores": usage.cpu / usage.wall, "client_cores": usage.client_cpu / usage.wall, "peak_mib": usage.peak, "per_second": len(runs) / usage.wall}
    for kind in ("control", "sentence"):
        times = [run.seconds * 1000 for k, run in runs if k == kind and run.ok]
        result[f"{kind}_p50_ms"], result[f"{kind}_p95_ms"] = statistics.median(times) if times else float("nan"), percentile(times, 0.95)
    return result


async def solo(url: str, pid: int, tokens: int, runs: int) -> dict:
    """Server CPU per run for one session alone: `runs` controls and `runs` new sentences of `tokens` words."""
    rng = random.Random(tokens)
    usage = Usage([pid])
    session, first = await Session.open(url, f"text={sentence(tokens).replace(' ', '+')}")
    assert first.ok, first.problem
    cpu = {"control": [], "sentence": []}
    wall = {"control": [], "sentence": []}
    for i in range(2 * runs):
        kind = "sentence" if i % 2 else "control"
        await asyncio.sleep(0.3)  # what the last run left (the URL, the session's bookkeeping) is counted with it
        before = usage.cpu_seconds()
        if kind == "sentence":
            text = " ".join(rng.choice(VOCABULARY) for _ in range(tokens))  # a sentence no cache has seen
            run = await type_sentence(session, url, text)
        else:
            run = await control(session, rng, tokens, url)
        await asyncio.sleep(0.15)
        assert run.ok, run.problem
        cpu[kind].append(1000 * (usage.cpu_seconds() - before))
        wall[kind].append(1000 * run.seconds)
    await session.close()
    return {kind: (statistics.mean(cpu[kind]), statistics.median(wall[kind])) for kind in cpu}


def servers(balanced: bool, root: Path, env: dict) -> tuple[list[Server], subprocess.Popen | None, str]:
    """One server, or two replicas and HAProxy with deploy/haproxy.cfg."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # Server passes the environment on
    try:
        replicas = [Server(root / "app.py", root=root) for _ in range(2 if balanced else 1)]
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    if not balanced:
        return replicas, None, replicas[0].url
    port = free_port()
    proxy_env = {**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{port}", "ATTNVIZ_STATS_BIND": f"127.0.0.1:{free_port()}",
                 "ATTNVIZ_APP1": f"127.0.0.1:{replicas[0].port}", "ATTNVIZ_APP2": f"127.0.0.1:{replicas[1].port}"}
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    log = open(os.environ.get("ATTNVIZ_HAPROXY_LOG", os.devnull), "w")  # one line per request, to look into failures
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")], env=proxy_env, stdout=log, stderr=log)
    time.sleep(1)
    return replicas, proxy, f"http://127.0.0.1:{port}"


def stop(replicas: list[Server], proxy: subprocess.Popen | None) -> None:
    for server in replicas:
        server.stop()
    if proxy:
        proxy.terminate()
        proxy.wait(10)


def warm(url: str) -> None:
    """Sessions run until the server's warm-up has ended (a run draws no "Loading GloVe" chart), so its start is not
    measured: until then each run also pays Streamlit's full garbage collection over the objects the warm-up freezes
    at its end (appkit/warm.py), about 150 ms of CPU per run on our 2-core machine."""
    async def once() -> bool:
        session, run = await Session.open(url, "text=the+dog+was+happy")
        await session.close()
        return run.ok and not any(kind == "plotly_chart" and "Loading GloVe" in element.spec for kind, element in session.elements)

    while not asyncio.run(once()):
        time.sleep(0.5)


def settle(pids: list[int], idle_cores: float = 0.05, longest: float = 90.0) -> None:
    """Wait until the servers are idle (under `idle_cores` over a second): the warm-up goes on building GloVe's
    KeyedVectors after the first page has drawn, and that CPU is not a run's."""
    usage, began = Usage(pids), time.perf_counter()
    while time.perf_counter() - began < longest:
        before = usage.cpu_seconds()
        time.sleep(1.0)
        if usage.cpu_seconds() - before < idle_cores:
            return


def header(what: str, args) -> str:
    return (f"\nbench_load ({what}): {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, server at {args.root}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", default="10,20,30,60", help="K values on one server (comma-separated; empty: none)")
    parser.add_argument("--balanced", default="30,60", help="K values through two replicas and HAProxy")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--client", choices=["protocol", "browser"], default="protocol")
    parser.add_argument("--solo", action="store_true", help="server CPU per run, one session")
    parser.add_argument("--tokens", default="16,128,512", help="--solo: sentence sizes")
    parser.add_argument("--runs", type=int, default=20, help="--solo: runs of each kind per size")
    parser.add_argument("--env", action="append", default=[],
                        help="--solo: also a server with these variables, e.g. OMP_NUM_THREADS=1 or \"A=1 B=2\" (repeatable)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve")
    args = parser.parse_args()
    if args.solo:
        return main_solo(args)
    plan = [(False, int(k)) for k in args.sessions.split(",") if k] + [(True, int(k)) for k in args.balanced.split(",") if k]
    rows = []
    for balanced, k in plan:
        replicas, proxy, url = servers(balanced, args.root, {})
        try:
            for server in replicas if not balanced else []:
                warm(server.url)
            if balanced:
                for _ in range(4):  # round robin: every replica has served a session
                    warm(url)
            pids = [s.process.pid for s in replicas]
            settle(pids)
            if args.client == "browser":
                result = asyncio.run(browser_load(url, k, args.seconds, pids))
            else:
                result = asyncio.run(protocol_load(url, k, args.seconds, pids))
        finally:
            stop(replicas, proxy)
        setup = "two replicas + HAProxy" if balanced else "one server"
        rows.append((setup, k, result))
        print(f"  {setup}, K={k}: {result}", file=sys.stderr, flush=True)
    print(header(f"{args.client} client, {args.seconds:.0f} s, one interaction a second per session", args))
    if args.client == "browser":
        print("| setup | sessions K | clicks | p50 | p95 | servers' CPU, in cores | servers' peak memory | sessions that failed |"
              "\n|---|---|---|---|---|---|---|---|")
        for setup, k, r in rows:
            failed = f"{len(r['errors'])}: {r['errors'][0]}" if r["errors"] else "0"
            print(f"| {setup} | {k} | {r['n']} | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {r['server_cores']:.2f} | "
                  f"{r['peak_mib']:,.0f} MiB | {failed} |")
        return
    print("| setup | sessions K | runs (a second) | p50 | p95 | control p50 / p95 | new sentence p50 / p95 | failed | server CPU "
          "per run | servers' CPU, in cores | servers' peak memory |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for setup, k, r in rows:
        failed = f"{len(r['failed'])}: {r['failed'][0]}" if r["failed"] else "0"
        print(f"| {setup} | {k} | {r['runs']} ({r['per_second']:.1f}) | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms | "
              f"{r['control_p50_ms']:.0f} / {r['control_p95_ms']:.0f} ms | {r['sentence_p50_ms']:.0f} / {r['sentence_p95_ms']:.0f} ms | "
              f"{failed} | {r['cpu_ms_per_run']:.0f} ms | {r['cores']:.2f} | {r['peak_mib']:,.0f} MiB |")


def main_solo(args) -> None:
    sizes = [int(n) for n in args.tokens.split(",")]
    settings = [("as configured", {})] + [(names, dict(pair.split("=", 1) for pair in names.split())) for names in args.env]
    rows = []
    for name, env in settings:
        replicas, _, url = servers(False, args.root, env)
        try:
            warm(url)
            settle([replicas[0].process.pid])
            for n in sizes:
                result = asyncio.run(solo(url, replicas[0].process.pid, n, args.runs))
                rows.append((name, n, result))
                print(f"  {name}, {n} tokens: {result}", file=sys.stderr, flush=True)
        finally:
            stop(replicas, None)
    print(header(f"one session, {args.runs} runs of each kind, mean server CPU per run", args))
    print("| server environment | tokens | control: server CPU | control: wall (median) | new sentence: server CPU | new sentence: wall (median) |"
          "\n|---|---|---|---|---|---|")
    for name, n, r in rows:
        print(f"| {name} | {n} | {r['control'][0]:.0f} ms | {r['control'][1]:.0f} ms | {r['sentence'][0]:.0f} ms | {r['sentence'][1]:.0f} ms |")


# ------------------------------------------------------------------------------------------------ browser client

async def browser_session(browser, url: str, k: int, ready: list[int], start: asyncio.Event, seconds: float,
                          latencies: list[float], errors: list[str]):
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    try:
        await page.goto(f"{url}/?text={sentence(16, k).replace(' ', '+')}", timeout=300_000)
        await page.wait_for_function(DRAWN, timeout=300_000)
        ready.append(k)
        await start.wait()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            tick = time.perf_counter()
            await page.evaluate(WATCH, DRAWN)
            await page.get_by_text(HARD, exact=True).click()
            await page.wait_for_function("() => window.__changedAt !== null", timeout=60_000)
            latencies.append(await page.evaluate("() => window.__changedAt - window.__clickAt"))
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    except Exception as error:  # a session that breaks is a result to report, not a crash of the benchmark
        errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:100]}")
    finally:
        await context.close()


async def browser_load(url: str, sessions: int, seconds: float, pids: list[int]) -> dict:
    from playwright.async_api import async_playwright

    latencies: list[float] = []
    errors: list[str] = []
    ready: list[int] = []
    start = asyncio.Event()
    usage = Usage(pids)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        tasks = [asyncio.create_task(browser_session(browser, url, k, ready, start, seconds, latencies, errors))
                 for k in range(sessions)]
        while len(ready) + len(errors) < sessions:  # every session has drawn its page (or failed): go together
            await asyncio.sleep(0.2)
        usage.start()
        start.set()
        await asyncio.gather(*tasks)
        usage.running = False
        usage.join()
        await browser.close()
    return {"n": len(latencies), "errors": errors, "peak_mib": usage.peak, "server_cores": usage.cpu / usage.wall,
            "p50_ms": statistics.median(latencies) if latencies else float("nan"), "p95_ms": percentile(latencies, 0.95)}


if __name__ == "__main__":
    main()
