"""Load benchmark: K concurrent browser sessions, each changing a control every second.

Run: python bench/bench_load.py [--sessions 10,20,40] [--seconds 60]
(needs Chromium as the tests find it, playwright, and Debian's haproxy for the balanced rows)

For each K, on one server and then on two replicas behind HAProxy (deploy/haproxy.cfg itself): K browser
contexts open the self-attention page on a 16-token sentence; once all have drawn it, each clicks the
hard-attention toggle once a second for the given time. An interaction is timed inside its page, from
the DOM click to the first animation frame in which the heatmap's data differ (bench_browser's method).
Reported: p50 and p95 of all interactions, how many there were, and the servers' resident memory (peak
during the run, summed over replicas). Chromium's K tabs, the driver and the servers share this machine's
cores, as a classroom's tabs would not share the server's: the figures are an upper bound on latency.
Not a test; README records the output with the date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_browser import CHROMIUM, DRAWN, FLAGS, WATCH, Server, free_port, sentence  # noqa: E402

TOGGLE = "Hard attention (one-hot argmax)"


class Memory(threading.Thread):
    """Samples the summed resident memory of some processes every 0.2 s; `peak` is the largest sum, in MiB."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids, self.peak, self.running = pids, 0.0, True

    def now(self) -> float:
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
        """User + system CPU time the processes have used so far."""
        ticks = 0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
            except OSError:
                pass
        return ticks / os.sysconf("SC_CLK_TCK")

    def run(self):
        self.cpu_start, self.wall_start = self.cpu_seconds(), time.perf_counter()
        while self.running:
            self.peak = max(self.peak, self.now())
            time.sleep(0.2)
        self.busy = (self.cpu_seconds() - self.cpu_start) / (time.perf_counter() - self.wall_start)


async def session(browser, url: str, k: int, ready: list[int], start: asyncio.Event, seconds: float,
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
            await page.get_by_text(TOGGLE).click()
            await page.wait_for_function("() => window.__changedAt !== null", timeout=60_000)
            latencies.append(await page.evaluate("() => window.__changedAt - window.__clickAt"))
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    except Exception as error:  # a session that breaks is a result to report, not a crash of the benchmark
        errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:100]}")
    finally:
        await context.close()


async def load(url: str, sessions: int, seconds: float, pids: list[int]) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    ready: list[int] = []
    start = asyncio.Event()
    memory = Memory(pids)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        tasks = [asyncio.create_task(session(browser, url, k, ready, start, seconds, latencies, errors)) for k in range(sessions)]
        while len(ready) + len(errors) < sessions:  # every session has drawn its page (or failed): go together
            await asyncio.sleep(0.2)
        memory.start()
        start.set()
        await asyncio.gather(*tasks)
        memory.running = False
        memory.join()
        await browser.close()
    ordered = sorted(latencies)
    return {
        "n": len(ordered), "errors": errors, "peak_mib": memory.peak, "server_cores": memory.busy,
        "p50_ms": statistics.median(ordered) if ordered else float("nan"),
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan"),
    }


def balanced() -> tuple[list[Server], subprocess.Popen, str]:
    """Two replicas and HAProxy with deploy/haproxy.cfg."""
    replicas = [Server(ROOT / "app.py"), Server(ROOT / "app.py")]
    port = free_port()
    env = {**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{port}", "ATTNVIZ_STATS_BIND": f"127.0.0.1:{free_port()}",
           "ATTNVIZ_APP1": f"127.0.0.1:{replicas[0].port}", "ATTNVIZ_APP2": f"127.0.0.1:{replicas[1].port}"}
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    log = open(os.environ.get("ATTNVIZ_HAPROXY_LOG", os.devnull), "w")  # one line per request, to look into failures
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")], env=env, stdout=log, stderr=log)
    time.sleep(1)
    return replicas, proxy, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", default="10,20,40", help="comma-separated K values")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--setups", default="one,balanced", help="one (one server), balanced (two replicas + HAProxy)")
    args = parser.parse_args()
    ks = [int(k) for k in args.sessions.split(",")]
    setups = {"one": "one server", "balanced": "two replicas + HAProxy"}
    rows = []
    for setup in (setups[name] for name in args.setups.split(",")):
        for k in ks:
            if setup == "one server":
                servers, proxy = [Server(ROOT / "app.py")], None
                url = servers[0].url
            else:
                servers, proxy, url = balanced()
            result = asyncio.run(load(url, k, args.seconds, [s.process.pid for s in servers]))
            for s in servers:
                s.stop()
            if proxy:
                proxy.terminate()
                proxy.wait(10)
            rows.append((setup, k, result))
            print(f"  {setup}, K={k}: {result}", file=sys.stderr, flush=True)
    print(f"\nbench_load: {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {args.seconds:.0f} s of one click per second per session\n")
    print("| setup | sessions K | interactions | p50 | p95 | servers' CPU, in cores | servers' peak memory | sessions that failed |"
          "\n|---|---|---|---|---|---|---|---|")
    for setup, k, r in rows:
        failed = f"{len(r['errors'])}: {r['errors'][0]}" if r["errors"] else "0"
        print(f"| {setup} | {k} | {r['n']} | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {r['server_cores']:.2f} | "
              f"{r['peak_mib']:.0f} MiB | {failed} |")


if __name__ == "__main__":
    main()
