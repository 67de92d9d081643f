"""The interactive heatmap as a Streamlit component (components v2, no iframe): the browser computes the weights from
the raw scores and redraws on its own; Python hears of the view (τ, hard, mask, hidden keys, colour scale, palette,
query) once the person pauses, and keeps its session state, URL and downloads in step with it.

The JavaScript and CSS are files in the attnviz package (attnviz.web joins them), passed inline, so `pip install .`
carries them and nothing is built."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import figures, web
from attnviz.sentence import weights_under_view
from appkit import beacon
from appkit.common import fragment_alone, page_id
from appkit.present import CHART_FONT_PX, PRESENT

VIEW_KEYS = ("temp", "hard", "mask", "hide", "scale", "palette", "query", "over", "key")  # key: the cell taken apart
COMPARE_KEYS = ("b_temp", "b_hard", "b_mask")  # Compare A | B: side B's τ, hard and mask
PRESENTER_HEIGHT = 540  # px: in presenter mode the heatmap, below the text box and toolbar, fits a 1080-px screen


def _mount(component, data: dict, **kwargs) -> None:
    """Mount `component` with `data` sent as a one-item list, which each entry unwraps (streamlit.mjs's unwrapped).
    Streamlit looks among a dict's values for dataframes, and that imports pandas: 0.5 s of a cold start, whose first
    page needs no pandas otherwise. A list goes as JSON."""
    component(data=[data], width="stretch", **kwargs)


# Each component's JavaScript is its entry in attnviz/browser/streamlit/ with what it imports (attnviz.web.bundle).
_heatmap = st.components.v2.component("attnviz_heatmap", js=web.bundle("streamlit/heatmap.mjs"),
                                      css=web.css(), isolate_styles=False)


def view_state(schema: dict) -> dict:
    """The view as the component receives it, from session state: the view's names that the page's URL schema has."""
    return {name: st.session_state.get(name, schema[name].default) for name in VIEW_KEYS if name in schema}


def screen_sizes() -> dict:
    """figures.interactive_heatmap's text sizes and height cap for this session: presenter mode's larger type."""
    presenting = bool(st.session_state.get(PRESENT))
    return dict(font_px=CHART_FONT_PX if presenting else figures.FONT_PX,
                label_px=figures.PRESENTER_LABEL_PX if presenting else figures.LABEL_PX,
                max_height=PRESENTER_HEIGHT if presenting else None)


def weights_on_screen(scores: np.ndarray, view: dict) -> np.ndarray:
    """(Tq, Tk) the weights the browser draws from `scores` under `view`, computed by the engine: what the downloads
    hold (attnviz.sentence.weights_under_view)."""
    return weights_under_view(scores, view)[0]


on_screen = weights_under_view  # (weights, allowed) under the view, as the browser draws them


_atlas = st.components.v2.component("attnviz_atlas", js=web.bundle("streamlit/atlas.mjs"),
                                    css=web.css(), isolate_styles=False)


def head_atlas(data: dict, *, key: str, on_open) -> None:
    """Mount the head atlas for `data` (figures.atlas_data); a click on a thumbnail calls on_open((layer, head)),
    counted from 0, before the page reruns."""
    _mount(_atlas, data, key=key, on_head_change=lambda: _opened(key, on_open))


def _opened(key: str, on_open) -> None:
    head = st.session_state[key].get("head")
    if isinstance(head, list) and len(head) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in head):
        on_open(tuple(head))


_census = st.components.v2.component("attnviz_census", js=web.bundle("streamlit/census.mjs"),
                                     css=web.css(), isolate_styles=False)


def census_map(data: dict, *, key: str, on_open=None) -> None:
    """Mount the census map for `data` (figures.census_data): its thresholds move in the browser alone; a head's cell
    calls on_open((layer, head)), counted from 0, before the page reruns (with no on_open, data's openable False: a
    cell opens nothing, and is no button)."""
    if on_open is None:
        _mount(_census, data, key=key)
    else:
        _mount(_census, data, key=key, on_head_change=lambda: _opened(key, on_open))


_routes = st.components.v2.component("attnviz_routes", js=web.bundle("streamlit/routes.mjs"),
                                     css=web.css(), isolate_styles=False)


def routes_graph(data: dict, *, key: str, on_open, on_threshold) -> None:
    """Mount the routes graph for `data` (figures.routes_data): a click on an edge calls on_open((layer, head)), from 0;
    the threshold, moved in the page, calls on_threshold(value) once released (for the link)."""
    _mount(_routes, data, key=key, on_head_change=lambda: _opened(key, on_open),
           on_threshold_change=lambda: on_threshold(st.session_state[key].get("threshold")))


def browser_figure(data: dict, *, key: str) -> None:
    """Mount a figure of final numbers drawn by the heatmap's code (figures.matrix_data, figures.bars_data): no view to
    sync back, and no plotly chart to redraw on every rerun."""
    _mount(_heatmap, data, key=key)


def interactive_heatmap(data: dict, *, key: str, clean, schema: dict | None = None, sentence=None) -> None:
    """Mount the heatmap for `data` (figures.interactive_heatmap, or figures.interactive_comparison). When the browser
    sends a paused view, `clean` turns it into allowed values (as a link's values are), which go into session state
    before this fragment reruns. With the page's URL `schema`, a pause reruns nothing: the browser posts the view
    (appkit/beacon) and writes the link itself, and the page's next run takes the view; for a page none of whose
    server-side views depends on the heatmap's view. `sentence(text)`, where nothing else the page drew depends on
    the sentence either: this heatmap's data for a new sentence, or None where the page must run (sentence_box)."""
    if schema is not None:
        token = beacon.token_for(key, page_id(schema), schema, sentence)
        data = {**data, "beacon": {"url": beacon.url(), "token": token, "taken": beacon.taken(token)}}
    _mount(_heatmap, data, key=key, on_view_change=lambda: _adopt(key, clean))


_sentence = st.components.v2.component("attnviz_sentence", js=web.bundle("streamlit/sentence.mjs"),
                                       css=web.css(), isolate_styles=False)


def sentence_box(name: str, *, label: str, help: str, max_chars: int, height: int, heatmap: str, posts: bool,
                 schema: dict) -> str:
    """A text box for the session-state text `name`, committed as Streamlit's text area is (Ctrl+Enter, or leaving
    it changed). Where it `posts`, a new text goes to the server, which answers with the data of the page's heatmap
    `heatmap` (its key; a beacon's) where nothing else the page drew depends on the text (interactive_heatmap's
    `sentence`): no run. Else, or where the server says the page must run, the text comes back as a trigger, and this
    fragment reruns. The text as it stands."""
    data = {"text": st.session_state.get(name, ""), "label": label, "help": help, "max_chars": max_chars,
            "height": height}
    if posts:
        token = beacon.token_for(heatmap, page_id(schema), schema)
        data["post"] = {"url": beacon.url(beacon.SENTENCE_PATH), "token": token}
    else:
        beacon.registered(heatmap, page_id(schema))  # a heatmap's page that posted before draws more from it now
    box = f"{name}_box"
    _mount(_sentence, data, key=box, on_text_change=lambda: _typed(box, name, max_chars))
    return st.session_state.get(name, "")


def _typed(box: str, name: str, max_chars: int) -> None:
    text = st.session_state[box].get("text")
    if isinstance(text, str):
        st.session_state[name] = text[:max_chars]


def _adopt(key: str, clean) -> None:
    sent = st.session_state[key].get("view")
    if isinstance(sent, dict):
        for name, value in clean({k: v for k, v in sent.items() if k in VIEW_KEYS + COMPARE_KEYS}).items():
            st.session_state[name] = value


_timeline = st.components.v2.component("attnviz_timeline", js=web.bundle("streamlit/timeline.mjs"),
                                       css=web.css(), isolate_styles=False)


def timeline(data: dict, *, key: str) -> None:
    """Mount the generation timeline for `data` (figures.timeline_data): scrubbing, play and the head shown run in the
    page and send nothing back, so they cost the server nothing."""
    _mount(_timeline, data, key=key)


_document = st.components.v2.component("attnviz_document", js=web.bundle("streamlit/document.mjs"),
                                       css=web.css(), isolate_styles=False)


def shaded_document(data: dict, *, key: str, on_query) -> None:
    """Mount the shaded document for `data` (figures.long.document_data); a click on a piece calls on_query(position)
    before the page reruns."""
    def picked() -> None:
        query = st.session_state[key].get("query")
        if isinstance(query, int) and not isinstance(query, bool):
            on_query(query)

    _mount(_document, data, key=key, on_query_change=picked)


_overview = st.components.v2.component("attnviz_overview", js=web.bundle("streamlit/overview.mjs"),
                                       css=web.css(), isolate_styles=False)


def head_overview(data: dict, *, key: str, on_region) -> None:
    """Mount one head's overview for `data` (figures.long.overview_data); a click on a block or a box dragged over
    several calls on_region(blocks) ([row, key] or [first row, first key, last row, last key]), the back button
    on_region([]), before the page reruns."""
    def picked() -> None:
        region = st.session_state[key].get("region")
        if isinstance(region, list) and len(region) in (0, 2, 4) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in region):
            on_region(region)

    _mount(_overview, data, key=key, on_region_change=picked)


_settle = st.components.v2.component("attnviz_settle", js=web.bundle("streamlit/settle.mjs"), isolate_styles=False)
_SETTLED = "_settled"  # session: the keys whose settle component asked for the whole page
PAUSE_MS = 700  # the rest of a page follows a fragment's run once no press and no key has come for this long


def catch_up(note: str, *, key: str, pause_ms: int = PAUSE_MS) -> None:
    """In a fragment whose run left the rest of its page behind: `note` says so, and once the person pauses (no press
    and no key for `pause_ms`) the browser reruns this fragment, whose caught_up(key) then runs the whole page."""
    st.session_state[f"_{key}_runs"] = token = st.session_state.get(f"_{key}_runs", 0) + 1  # new data: a new wait
    _mount(_settle, {"token": token, "pause_ms": pause_ms, "note": note}, key=key,
           on_settled_change=lambda: st.session_state.setdefault(_SETTLED, set()).add(key))


def caught_up(key: str) -> None:
    """At the top of catch_up's fragment: the whole page's run, if `key`'s settle component asked for it since the
    last run (a whole page's run forgets the ask)."""
    asked = st.session_state.get(_SETTLED, set())
    if key in asked:
        asked.discard(key)
        if fragment_alone():
            st.rerun(scope="app")
