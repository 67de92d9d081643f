"""Benchmark: the decoder (SmolLM2-135M from its GGUF file) through attnviz's engine, and its page in the real server.

Run: python bench/bench_decoder.py [--browser]
Prints medians: the model ready in a fresh process once the float weights are cached (imports apart), the forward at
64 and 512 pieces on the CPU (and on CUDA, with the GPU's name, where torch sees one); with --browser, headless
Chromium on the real server: a "Next word (greedy)" click at 64 pieces until what it adds is drawn (the new piece's
bars and attention row) and until the whole page is, and the server's resident memory with the Trained model and the
Decoder both loaded. Not a test; README records its output with the date and machine.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOAD_ONE = """
import json, time, torch
import gguf, safetensors.torch, tokenizers  # imports are not part of the load
from attnviz import decoder
start = time.perf_counter()
decoder.load_model(device="cpu")
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def load_time() -> float:
    """Each load in a fresh process, after a first load has written the cache."""
    from attnviz import decoder
    from bench.bench_trained import load_time as fresh_loads

    decoder.load_model(device="cpu")  # writes the cache if there is none
    return fresh_loads(LOAD_ONE)


def forward_time(model, pieces: int) -> float:
    from attnviz import decoder
    from bench.bench_trained import median_time

    ids = list(range(1000, 1000 + pieces))
    return median_time(lambda: decoder.forward(model, ids), model.device)


def shaped_model(device: str):
    """SmolLM2-135M's shapes with random weights (no tokenizer): the forward's work, where the model file is not at
    hand (the lent GPU machine takes at most 64 MiB of files; the GGUF is 98 MB)."""
    import torch

    from attnviz import decoder

    c = decoder.Config(layers=30, heads=9, kv_heads=3, head_dim=64, d_model=576, d_ff=1536, vocab=49152,
                       rope_base=100_000.0, eps=1e-5)
    g = torch.Generator().manual_seed(0)
    w = lambda *shape: (torch.randn(*shape, generator=g) * 0.05).to(device)  # noqa: E731
    layers = [decoder.Layer(torch.ones(576, device=device), w(576, 576), w(576, 192), w(576, 192), w(576, 576),
                            torch.ones(576, device=device), w(576, 1536), w(576, 1536), w(1536, 576)) for _ in range(30)]
    return decoder.Model(None, c, w(49152, 576), layers, torch.ones(576, device=device), torch.device(device))


def sixty_four_pieces(model) -> str:
    from attnviz import decoder

    words = ("when he saw his owner at the door the dog was so happy that he ran in circles and wagged his tail while "
             "the cat watched from the top of the old red sofa by the big bright window").split()
    text = ""
    for word in words * 4:
        if len(decoder.tokenize(model, (text + " " + word).strip()).ids) > 64:
            return text
        text = (text + " " + word).strip()
    return text


# What the click adds is drawn: the chart of the last piece's attention names the new piece's position (#n).
LOOKS_BACK = """() => { const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
  .find(g => String((g.layout.title || {}).text || '').includes(') looks back'));
  return gd ? String(gd.layout.title.text) : null; }"""
# The page is drawn again: that, and the script run has ended (the page's last element sent and drawn).
PAGE_DRAWN = """() => document.querySelector('[data-testid="stApp"]').dataset.testScriptState === 'notRunning'"""
# Each returns the milliseconds since the click's pointer press in the page, once it holds.
SINCE_PRESS = """([previous, whole]) => {{ const title = ({looks})();
  const done = title && title !== previous && (!whole || ({page})());
  return done ? performance.now() - window.pressedAt : null; }}""".format(looks=LOOKS_BACK, page=PAGE_DRAWN)


def click_times(page, clicks: int = 7) -> tuple[list[float], list[float]]:
    """Per "Next word (greedy)" click, from the pointer press in the page (Playwright's own checks before the
    press apart): ms until the new piece's next-piece bars and attention row are drawn, and until the whole page is."""
    page.evaluate("document.addEventListener('pointerdown', () => { window.pressedAt = performance.now(); }, true)")
    added, whole = [], []
    for _ in range(clicks):
        before = page.evaluate(LOOKS_BACK)
        page.get_by_role("button", name="Next word (greedy)").click()
        added.append(page.wait_for_function(SINCE_PRESS, arg=[before, False], timeout=60_000, polling=5).json_value())
        whole.append(page.wait_for_function(SINCE_PRESS, arg=[before, True], timeout=60_000, polling=5).json_value())
        page.wait_for_timeout(800)
    return added, whole


def browser_figures(model) -> list[tuple[str, str]]:
    from playwright.sync_api import sync_playwright

    from bench.bench_browser import CHROMIUM, FLAGS, Server
    from bench.bench_memory import status

    text = sixty_four_pieces(model)
    server = Server(ROOT / "app.py")
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{server.url}/trained")
        page.wait_for_selector(".js-plotly-plot", timeout=300_000)
        page.goto(f"{server.url}/decoder?{urlencode({'text': text, 't': '0'})}")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 4", timeout=300_000)
        page.wait_for_timeout(1500)
        added, whole = click_times(page)
        rows.append(("'Next word (greedy)' click → the new piece, its next-piece bars and attention row drawn, 64 pieces "
                     f"({len(added)} clicks)", f"{statistics.median(added):.0f} ms"))
        rows.append((f"'Next word (greedy)' click → the whole page drawn again, 64 pieces ({len(whole)} clicks)",
                     f"{statistics.median(whole):.0f} ms"))
        rows.append(("server resident memory, Trained model and Decoder loaded", f"{status(server.process.pid, 'VmRSS'):.0f} MiB"))
        browser.close()
    server.stop()
    return rows


def main() -> None:
    import torch

    from attnviz import decoder

    parser = argparse.ArgumentParser()
    parser.add_argument("--browser", action="store_true", help="also time the page in Chromium and read the server's memory")
    parser.add_argument("--shapes-only", action="store_true",
                        help="the forward on CUDA with the model's shapes and random weights, where the model file is not at hand")
    args = parser.parse_args()
    if args.shapes_only:
        cpu, gpu = shaped_model("cpu"), shaped_model("cuda")
        for pieces in (64, 512):  # the same causal weights on both: the CUDA path computes what the CPU does
            ids = list(range(pieces))
            _, on_cpu, _ = decoder.forward(cpu, ids)
            _, on_gpu, _ = decoder.forward(gpu, ids)
            worst = max(float((a - b.cpu()).abs().max()) for a, b in zip(on_cpu, on_gpu))
            print(f"| forward, {pieces} pieces, {torch.cuda.get_device_name(0)} (random weights, SmolLM2's shapes) | "
                  f"{forward_time(gpu, pieces) * 1000:.1f} ms | max |Δα| against the CPU {worst:.1e} |")
        return
    rows = [("model ready, float weights cached (fresh process, imports apart)", f"{load_time():.2f} s")]
    cpu = decoder.load_model(device="cpu")
    for pieces in (64, 512):
        rows.append((f"forward, {pieces} pieces, CPU", f"{forward_time(cpu, pieces) * 1000:.0f} ms"))
    if torch.cuda.is_available():
        gpu = decoder.load_model(device="cuda")
        name = torch.cuda.get_device_name(0)
        for pieces in (64, 512):
            rows.append((f"forward, {pieces} pieces, {name}", f"{forward_time(gpu, pieces) * 1000:.1f} ms"))
    if args.browser:
        rows += browser_figures(cpu)
    print(f"{datetime.date.today()} · {platform.machine()} · {platform.processor() or platform.platform()} · "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| measure | median |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
