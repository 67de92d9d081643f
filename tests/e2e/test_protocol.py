"""bench/protocol.py, the load benchmark's client, against the real server: it speaks Streamlit's websocket protocol
as a browser does, so what it sends reaches the page as a person's change would (the benchmark measures real runs)."""

import asyncio
import base64
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.protocol import Session  # noqa: E402


def heatmap_data(session: Session) -> dict:
    """The data the Self-attention heatmap component received in the session's last run."""
    sent = [json.loads(element.json)[0]  # one-item lists (appkit.interactive)
            for kind, element in session.elements if kind == "bidi_component"]
    heatmaps = [data for data in sent if "scores" in data]  # not the sentence box
    assert heatmaps, "the run drew no heatmap component"
    return heatmaps[-1]


def test_a_paused_view_and_a_new_sentence_over_the_protocol(server):
    async def scenario():
        session, first = await Session.open(server, "text=the+dog+was+happy")
        assert first.ok, first.problem
        data = heatmap_data(session)
        assert [row.split(" ")[0] for row in data["rows"]] == ["the", "dog", "was", "happy"]

        view = {"temp": 2.0, "hard": True, "mask": "causal", "hide": [], "scale": "max", "palette": "cividis", "query": 2,
                "key": 1}
        paused = await session.set_component_state("live", {"view": view})
        assert paused.ok, paused.problem
        for part in ("temp=2.0", "hard=1", "mask=causal", "scale=max", "palette=cividis", "query=2", "key=1"):
            assert part in session.query.split("&"), session.query  # the link follows the view the browser sent
        assert heatmap_data(session)["view"] == view

        box = session.find("text_box", "bidi_component")
        assert box.fragment, "the sentence box is drawn inside the page's fragment"
        assert session.data["text_box"]["text"] == "the dog was happy" and "post" in session.data["text_box"]
        # Nothing else on the page depends on the sentence: the box's POST is answered with the heatmap's data, and
        # nothing runs (the session reads no message), the link follows the answer.
        typed = await session.type_sentence(server, "text_box", "a cat sat on the mat")
        assert typed.ok and "data" in typed.answer, typed
        data = typed.answer["data"]
        assert [row.split(" ")[0] for row in data["rows"]] == ["a", "cat", "sat", "on", "the", "mat"]
        assert "text=a+cat+sat+on+the+mat" in session.query.split("&")
        scores = np.frombuffer(base64.b64decode(data["scores"]), dtype=np.float32)
        assert scores.size == 36 and np.isfinite(scores).all()
        # The next run (a paused view that reruns) takes the sentence: the box and the heatmap have it.
        rerun = await session.set_component_state("live", {"view": {**view, "temp": 1.0}})
        assert rerun.ok, rerun.problem
        assert session.data["text_box"]["text"] == "a cat sat on the mat"
        assert heatmap_data(session)["version"] == data["version"]

        # An unknown word draws a warning: the server answers that the page runs, and the box's trigger runs its
        # fragment, not the sidebar.
        typed = await session.type_sentence(server, "text_box", "a qzxjvwk sat")
        assert typed.ok, typed.problem
        drawn = [(kind, getattr(element, "label", "")) for kind, element in session.elements]
        assert ("selectbox", "Scoring function a(q, k)") not in drawn, "a new sentence ran the sidebar again"
        assert len(heatmap_data(session)["rows"]) == 3 and "text=a+qzxjvwk+sat" in session.query
        assert any(kind == "alert" and "not in the vocabulary" in element.body for kind, element in session.elements)
        await session.close()

    # In a thread of its own: Playwright's sync API, open in this process for the other tests, holds an event loop here.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(lambda: asyncio.run(scenario())).result()
