"""What the page tests share: running a page under AppTest with URL parameters, reading what it sent the browser (plotly
figures, the interactive heatmap's data, messages), and the formulas written out."""

import base64
import contextlib
import re
import json
import urllib.parse
from pathlib import Path
import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


PAGES = sorted(p.name for p in (ROOT / "pages").glob("*.py") if not p.name.startswith("_"))


SELF = str(ROOT / "pages" / "self_attention.py")


def component_data(element) -> dict:
    """A browser figure's data as the page sent it (appkit.interactive sends it as a one-item list)."""
    sent = json.loads(element.proto.json)
    assert isinstance(sent, list) and len(sent) == 1, "a component's data goes as a one-item list (no pandas)"
    return sent[0]


@contextlib.contextmanager
def own_model(family: str, folder: Path, monkeypatch):
    """A tiny `family` model (tests/tiny_models) built in `folder` and offered by the server as its own (ATTNVIZ_MODELS),
    the offered models read afresh before and after: yields its folder."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import tiny_models
    from appkit.served import offered

    built = tiny_models.build(family, folder)
    monkeypatch.setenv("ATTNVIZ_MODELS", str(built))
    offered.clear()
    try:
        yield built
    finally:
        offered.clear()


TIMEOUT = 60


DEFAULT = "When he saw his owner, the dog was happy, so he wagged his tail"


def decode(value):
    """A plotly JSON array: a plain list, or numpy's typed-array encoding {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value)


def sent_figures(at) -> list[dict]:
    """The data each of the page's browser figures got: every component's but the sentence box's (its text) and the
    announcer's (what a screen reader hears of a new step)."""
    return [d for d in (component_data(c) for c in at.get("bidi_component")) if "max_chars" not in d and "said" not in d]


def type_sentence(at, text: str, name: str = "text"):
    """What the sentence box (appkit/interactive.sentence_box) sends for a text that needs a run: the text, then the
    run. AppTest cannot fire a component's trigger, so the text goes into session state as the box's callback puts
    it."""
    at.session_state[name] = text
    return at.run()


def heatmap(at) -> dict:
    """The first chart's first trace, with "weights": the true weights it carries for hover (its z is what the
    colour scale shows)."""
    trace = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    return {**trace, "z": decode(trace["z"]), "weights": decode(trace["customdata"])[..., 0]}


def live(at, index: int = 0) -> dict:
    """The interactive heatmap's data (appkit/interactive): its raw scores decoded into an (n, m) array, or (n, M)
    for a zoom window's rows over every key (M = len(keys)). Figures of final numbers (a matrix, bars) are not counted."""
    sent = sent_figures(at)
    data = [d for d in sent if d.get("kind") not in ("matrix", "bars")][index]
    width = len(data["keys"]) if "keys" in data else data["m"]
    return {**data, "scores": np.frombuffer(base64.b64decode(data["scores"]), "<f4").reshape(data["n"], width)}


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def glove_scores(glove, text: str) -> np.ndarray:
    """XXᵀ/√50 of the sentence's GloVe rows, in float64: the scaled-dot scores written out."""
    from attnviz.embeddings import embed, tokenize

    x = embed(tokenize(text), glove).vectors.astype(np.float64)  # (n, 50)
    return x @ x.T / np.sqrt(50)


def page(params=None) -> AppTest:
    at = AppTest.from_file(SELF, default_timeout=TIMEOUT)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def held(widgets, name: str):
    """The one widget that holds `name`: appkit.common.held keys it "_<name>_<options id>"."""
    matches = [w for w in widgets if str(w.key).startswith(f"_{name}_")]
    assert len(matches) == 1, [w.key for w in widgets]
    return matches[0]


def messages(at) -> str:
    return " ".join(e.value for kind in (at.error, at.warning, at.info) for e in kind)


def walk_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


KV = str(ROOT / "pages" / "kv_database.py")


def kv_page(params=None) -> AppTest:
    at = AppTest.from_file(KV, default_timeout=TIMEOUT)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def soft_table(at):
    return at.dataframe[-1].value


def masked_cells(trace: dict) -> np.ndarray:
    """(rows, cols) True where a "masked" trace draws its grey cell (z 1; null where the weights show)."""
    return np.array([[z is not None for z in row] for row in trace["z"]])


def run_page(name: str, params=None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if name == "long_text.py":
        example_scanned((params or {}).get("model", "smollm2"))
    if name == "lesson.py":
        lesson_computed(params)
    return at.run()


def lesson_works(step) -> list:
    """The server's jobs (appkit.served.Work) whose progress Lesson step `step` shows until they are done."""
    from appkit import served
    from appkit.lesson.experiments import DOG_PREFIX

    works = {"16": served.induction_work, "17": served.induction_work, "21": served.induction_work,
             "18": lambda name: served.importance_work(name, DOG_PREFIX), "20": served.example_needle_work,
             "22": served.census_document_work}
    return [works[str(step)]("smollm2")] if str(step) in works else []


def lesson_computed(params=None) -> None:
    """The lesson step's heavy part computed (the server's job, whose progress the page otherwise shows), so that a
    page run finds it, as a warm server's does: the step the page opens, its link's value read as the page reads it
    (step=99 is the last). A failure is left to the page to say."""
    from appkit.lesson.common import SCHEMA

    asked = (params or {}).get("step")
    try:
        step = SCHEMA["step"].parse(str(asked)) if asked is not None else SCHEMA["step"].default
    except ValueError:
        step = SCHEMA["step"].default
    for work in lesson_works(step):
        try:
            work.result()
        except Exception:  # noqa: BLE001  the page says what fails, and the test reads it there
            pass


def example_scanned(name: str = "smollm2", timeout: float = TIMEOUT) -> None:
    """Long text's example document scanned (the server's job, which its page otherwise shows the progress of), so that
    a page run finds it, as a warm server's does. A name the page does not offer is left to the page to refuse."""
    import time

    from appkit import served

    if name not in served.offered():
        return
    try:
        deadline = time.monotonic() + timeout
        while served.example_scan(name) is None and time.monotonic() < deadline:
            time.sleep(0.2)
    except Exception:  # noqa: BLE001  the page says what fails, and the test reads it there
        return


def chart_data(at, index: int) -> list[dict]:
    return json.loads(at.get("plotly_chart")[index].proto.spec)["data"]


def atlas_tiles(at) -> tuple[dict, np.ndarray]:
    """The browser atlas's data and its thumbnails (L, H, r, r) on 0 … 255, as the colour scale shows them."""
    data = sent_figures(at)[0]
    tiles = np.frombuffer(base64.b64decode(data["blocks"]), np.uint8).reshape(data["layers"], data["heads"], data["r"], data["r"])
    return data, tiles


def score_apart(at) -> tuple[np.ndarray, float, float]:
    """The neuron view on a page: its chart's rows (the vectors, then the terms), and the score and weight its
    formulas give (the last number of each line)."""
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")).startswith("a = Σ terms"))
    rows = [decode(trace["y"]) for trace in spec["data"]]
    lines = [line.value.strip("$\n") for line in at.latex]
    score = float(next(line for line in lines if re.match(r"a_\{\d+,\d+\} =", line)).split("=")[-1])
    weight = float(next(line for line in lines if re.search(r"(quad |^)\\alpha_\{\d+,\d+\} =", line)).split("=")[-1])
    return rows, score, weight


def spec_titled(at, start: str) -> dict:
    """The spec of the chart whose title starts with `start` (a long title is wrapped for its width: <br> reads as a
    space)."""
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")).replace("<br>", " ").startswith(start))


def link_params(at, label: str) -> dict:
    """The query of the page link (AppTest's plain-link stand-in) whose label starts with `label`."""
    target = next(m.value for m in at.markdown if m.value.startswith(f"[{label}"))
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target[target.index("](") + 2:-1]).query))


def compared(at) -> tuple[dict, dict, dict]:
    """The two sides of the interactive comparison, their raw scores decoded, and the whole data."""
    sent = sent_figures(at)[0]
    a, b = ({**side, "scores": np.frombuffer(base64.b64decode(side["scores"]), "<f4").reshape(side["n"], side["m"])}
            for side in sent["sides"])
    return a, b, sent
