"""Room benchmark: how soon a class moves with its teacher. A presenter walks the Lesson with Next while a class of
students follows: browser-free students (Streamlit's websocket protocol, each with the class's event stream, as the
page's script holds one) and a few Chromium students, on one server, after its warm-up.

Run: python bench/bench_room.py [--students 30] [--browsers 3] [--steps 1-21] [--dwell 3] [--cold]

For each Next, from the presenter's click (its rerun sent, with Next's trigger):
- each browser-free student: the event that names the new step reaching it, its rerun's first element of the new
  step (the step's heading: the first paint) and the run's end (every figure's data sent);
- each Chromium student: the step's heading on the page (first paint) and the step's main figure drawn (test_classroom's
  selectors), read off a MutationObserver's clock (the machine's own, as the benchmark's);
- p50 and p95 of each, over every step and over steps 15–20 (the model steps), and the presenter's own run.

Before the measured walk, one session visits every step once: what a server has computed after its first class (the
warm-up of a server that teaches). `--cold` skips it.

The peer, in the same run: a bare Streamlit app (a heading and a line) on a server of its own with the app's runner
settings (no garbage collection after each run: Streamlit's default spends 25 ms of each run collecting), the same number of
browser-free sessions rerunning it at once for each step. Both sides are timed from the rerun sent to its heading (for
the class: the first paint less the event's arrival), and the ratio says what the Lesson adds to what Streamlit itself
costs a class of that size. Not a test; docs/benchmarks.md records the output with the date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_load import percentile, warm  # noqa: E402
from bench.browser import CHROMIUM, FLAGS, Server  # noqa: E402
from bench.bench_class import request  # noqa: E402
from bench.protocol import Session  # noqa: E402

KEY = "a-teacher-key-for-the-room-benchmark"
MODEL_STEPS = range(15, 21)
# Each step's main figure (tests/e2e/test_classroom.py's LESSON_FIGURES): a Streamlit key or a CSS selector.
FIGURES = {1: "lesson_exact", 2: "lesson_hard", 3: "lesson_soft", 4: "lesson_pooling", 5: "lesson_scores",
           6: ".av-compare .av-figure", 7: "lesson_matrix", 8: ".av-compare .av-figure", 9: "lesson_proj_3",
           10: ".av-compare .av-figure", 11: "lesson_cross", 12: "lesson_bmm", 13: "lesson_head", 14: "lesson_trained",
           15: "lesson_decoder", 16: "lesson_copy", 17: "lesson_off", 18: "lesson_importance", 19: "lesson_write",
           20: "lesson_needle", 21: "lesson_why"}
# In each Chromium student's page: when each step's heading and main figure first showed (Date.now()).
OBSERVER = """(figures) => {
  window.__seen = {};
  const look = () => {
    const heading = document.querySelector('h2');
    const step = heading ? parseInt(heading.innerText, 10) : NaN;
    if (!step) return;
    const seen = (window.__seen[step] = window.__seen[step] || {});
    if (!seen.heading) seen.heading = Date.now();
    const name = figures[step];
    const selector = name.startsWith('.') ? name : `.st-key-${name} .js-plotly-plot`;
    const figure = document.querySelector(selector);
    const drawn = figure && (name.startsWith('.') || (figure._fullData && figure._fullData.length));
    if (drawn && !seen.figure) seen.figure = Date.now();
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
  setInterval(look, 50);
}"""


class Follower:
    """One browser-free student: a Streamlit session on the Lesson, and the class's event stream its page holds."""

    def __init__(self, url: str, code: str):
        self.url, self.code = url, code
        self.state: dict | None = None
        self.changed = asyncio.Event()

    async def start(self) -> None:
        self.session, run = await Session.open(self.url, f"class={self.code}", timeout=600, page="lesson")
        assert run.ok, run.problem
        while True:
            status, made = await request(self.url, "POST", f"/_attnviz/class/{self.code}/join", {})
            if status != 429:
                break
            await asyncio.sleep(0.1)
        self.token = made["student"]
        self.listener = asyncio.create_task(self.listen())

    async def listen(self) -> None:
        host, _, port = self.url.split("://", 1)[-1].partition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /_attnviz/class/{self.code}/events?student={self.token} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        while line := await reader.readline():
            if line.startswith(b"data: "):
                self.state = json.loads(line[6:])
                self.heard_at = time.perf_counter()
                self.changed.set()

    async def follow(self, step: int, clicked: float) -> dict:
        """Wait for the event naming `step`, then what the page's script does with it: one rerun that follows."""
        while not (self.state and self.state["step"] == step):
            self.changed.clear()
            await self.changed.wait()
        heard = self.heard_at
        state = self.state
        run = await self.session.set_component_state(
            "class_follow", {"follow": {"step": state["step"], "params": state["params"], "version": state["version"]}},
            timeout=600)
        heading = next((at for (kind, element), at in zip(self.session.elements, self.session.arrived)
                        if kind == "heading" and element.body.startswith(f"{step}. ")), None)
        return {"ok": run.ok, "problem": run.problem, "event": heard - clicked,
                "paint": None if heading is None else heading - clicked, "done": time.perf_counter() - clicked}


def summary(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"p50 {1000 * statistics.median(values):,.0f} ms, p95 {1000 * percentile(values, 0.95):,.0f} ms (n = {len(values)})"


async def walk(args) -> None:
    from playwright.async_api import async_playwright

    folder = tempfile.mkdtemp(prefix="attnviz-room-")
    os.environ.update(ATTNVIZ_TEACHER_KEY=KEY, ATTNVIZ_CLASS_STORE=str(Path(folder) / "classes.sqlite"))
    server = Server(ROOT / "app.py", root=args.root)
    url = server.url
    first, last = (int(v) for v in args.steps.split("-"))
    try:
        await asyncio.to_thread(warm, url)
        if not args.cold:  # what a server has computed after its first class
            for step in range(first, last + 1):
                session, run = await Session.open(url, f"step={step}", timeout=900, page="lesson")
                assert run.ok, (step, run.problem)
                await session.close()
        presenter, run = await Session.open(url, f"present=1&teacher={KEY}&step={first}", timeout=600,
                                            page="lesson")
        await presenter.press("Start a class")
        join = next(e.body for kind, e in presenter.elements if kind == "markdown" and "Join code" in e.body)
        code = re.search(r"class=([A-Z0-9]{6})", join).group(1)
        followers = [Follower(url, code) for _ in range(args.students)]
        for follower in followers:
            await follower.start()
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            pages = []
            for _ in range(args.browsers):
                page = await (await browser.new_context(viewport={"width": 1280, "height": 800})).new_page()
                await page.goto(f"{url}/lesson?class={code}", timeout=600_000)
                await page.wait_for_selector(".av-class-banner", timeout=600_000)
                await page.evaluate(OBSERVER, FIGURES)
                pages.append(page)
            rows = []
            for step in range(first + 1, last + 1):
                clicked, wall = time.perf_counter(), time.time() * 1000
                followed = asyncio.gather(*(f.follow(step, clicked) for f in followers))
                run = await presenter.press("Next", timeout=900)
                presented = time.perf_counter() - clicked
                results = await followed
                painted = []
                for page in pages:
                    seen = await page.wait_for_function(f"() => window.__seen[{step}] && window.__seen[{step}].figure "
                                                        f"? window.__seen[{step}] : null", timeout=600_000)
                    seen = await seen.json_value()
                    painted.append(((seen["heading"] - wall) / 1000, (seen["figure"] - wall) / 1000))
                rows.append({"step": step, "presenter": presented, "presenter_ok": run.ok, "followers": results,
                             "browsers": painted})
                problems = [r["problem"] for r in results if not r["ok"]]
                print(f"step {step:2d}: presenter {1000 * presented:6,.0f} ms; protocol students: event "
                      f"{summary([r['event'] for r in results])}, first paint {summary([r['paint'] for r in results])}, "
                      f"run done {summary([r['done'] for r in results])}; Chromium: heading "
                      f"{', '.join(f'{1000 * h:,.0f}' for h, _ in painted)} ms, figure "
                      f"{', '.join(f'{1000 * f:,.0f}' for _, f in painted)} ms" + (f"; problems {problems[:2]}" if problems else ""),
                      flush=True)
                await asyncio.sleep(args.dwell)
            await browser.close()
        for follower in followers:
            follower.listener.cancel()
            await follower.session.close()
    finally:
        server.stop()
    report(rows, args, await bare(args.students, first, last))


BARE_APP = """import streamlit as st

step = st.query_params.get("step", "1")
st.header(f"{step}. A step")
st.write("One line of text under it.")
"""


async def bare(students: int, first: int, last: int) -> list[float]:
    """The peer: `students` sessions of a bare app rerunning at once for each step; each rerun's heading, from the
    rerun sent (seconds)."""
    folder = Path(tempfile.mkdtemp(prefix="attnviz-bare-"))
    (folder / "bare.py").write_text(BARE_APP)
    # The runner's settings of ours (.streamlit/config.toml): no collection of all garbage after each run, no watcher.
    server = Server(folder / "bare.py", "--runner.postScriptGC", "false", "--server.fileWatcherType", "none", root=folder)
    try:
        sessions = [(await Session.open(server.url, f"step={first}"))[0] for _ in range(students)]

        async def once(session: Session, step: int) -> float:
            session.query = f"step={step}"
            sent = time.perf_counter()
            run = await session.rerun()
            assert run.ok, run.problem
            return next(at for (kind, element), at in zip(session.elements, session.arrived)
                        if kind == "heading" and element.body.startswith(f"{step}. ")) - sent

        times = []
        for step in range(first + 1, last + 1):
            times += await asyncio.gather(*(once(session, step) for session in sessions))
        for session in sessions:
            await session.close()
        return times
    finally:
        server.stop()


def report(rows: list[dict], args, peer: list[float]) -> None:
    def pick(rows, name):
        return [r[name] for row in rows for r in row["followers"]]

    model = [row for row in rows if row["step"] in MODEL_STEPS]
    print(f"\nbench_room: {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; {args.students} browser-free students, {args.browsers} Chromium; steps "
          f"{args.steps}{', cold' if args.cold else ', after one visit of every step'}; dwell {args.dwell} s")
    for name, chosen in (("every step", rows), ("steps 15–20", model)):
        print(f"{name}:")
        print(f"  the event reaches a student: {summary(pick(chosen, 'event'))}")
        print(f"  a browser-free student's first paint (its run's heading): {summary(pick(chosen, 'paint'))}")
        print(f"  a browser-free student's run done (every figure sent): {summary(pick(chosen, 'done'))}")
        print(f"  Chromium, the step's heading drawn: {summary([h for row in chosen for h, _ in row['browsers']])}")
        print(f"  Chromium, the step's main figure drawn: {summary([f for row in chosen for _, f in row['browsers']])}")
        print(f"  the presenter's own run: {summary([row['presenter'] for row in chosen])}")
    lesson = [r["paint"] - r["event"] for row in rows for r in row["followers"] if r["paint"] is not None]
    print(f"peer, from the rerun sent to its heading, {args.students} sessions at once: the Lesson {summary(lesson)}; "
          f"a bare Streamlit app {summary(peer)}; p95 ratio {percentile(lesson, 0.95) / percentile(peer, 0.95):.1f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30, help="browser-free students")
    parser.add_argument("--browsers", type=int, default=3, help="Chromium students")
    parser.add_argument("--steps", default="1-21", help="the walk: first-last")
    parser.add_argument("--dwell", type=float, default=3.0, help="seconds on each step after everyone has it")
    parser.add_argument("--cold", action="store_true", help="no visit of every step before the walk")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve")
    asyncio.run(walk(parser.parse_args()))


if __name__ == "__main__":
    main()
