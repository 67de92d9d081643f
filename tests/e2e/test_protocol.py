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
    sent = [element for kind, element in session.elements if kind == "bidi_component"]
    assert sent, "the run drew no heatmap component"
    return json.loads(sent[-1].json)[0]  # a one-item list (appkit.interactive)


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

        box = session.find("Sentence")
        assert box.fragment, "the sentence box is drawn inside the page's fragment"
        typed = await session.change(box, string_value="a cat sat on the mat")
        assert typed.ok, typed.problem
        drawn = [(kind, getattr(element, "label", "")) for kind, element in session.elements]
        assert ("selectbox", "Scoring function a(q, k)") not in drawn, "a new sentence ran the sidebar again"
        data = heatmap_data(session)
        assert len(data["rows"]) == 6 and "text=a+cat+sat+on+the+mat" in session.query
        scores = np.frombuffer(base64.b64decode(data["scores"]), dtype=np.float32)
        assert scores.size == 36 and np.isfinite(scores).all()
        await session.close()

    # In a thread of its own: Playwright's sync API, open in this process for the other tests, holds an event loop here.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(lambda: asyncio.run(scenario())).result()
