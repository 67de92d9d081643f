"""Streamlit helpers the pages share: cached word vectors, the vector-source picker, URL mirroring."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import urllib.parse
import zlib
from typing import TYPE_CHECKING, Any, Callable

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError
import torch  # noqa: F401  every page computes with it

from attnviz.embeddings import (
    MAX_UPLOAD_BYTES, VECTOR_FORMATS, VectorFileError, load_uploaded, load_vectors, upload_limit_text,
    vectors_from_settings,
)
from attnviz.figures import SCALES
from attnviz.urlstate import Param, beyond, encode_params, parse_params
from appkit import beacon
from appkit.vectors import glove, keyed_glove  # noqa: F401  the pages read GloVe from here
from appkit.present import PRESENT

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

GLOVE_LABEL = "GloVe 6B 50-d (built in, 400,000 words)"
URL_TEXT_LIMIT = 2000  # characters; longer text is not put in the URL


@st.cache_resource(show_spinner="Loading vectors from the configured file…")
def _vectors_at(path: str, fmt: str | None) -> KeyedVectors:
    return load_vectors(path, fmt)


@st.cache_resource(max_entries=4, show_spinner="Reading the uploaded vectors…")
def _uploaded(digest: str, _data: bytes, filename: str, fmt: str | None) -> KeyedVectors:
    return load_uploaded(_data, filename, fmt)


def word_vectors(where=None) -> tuple[KeyedVectors, str, str] | None:
    """The vector source picker, drawn in `where` (default: the sidebar); (vectors, an id for caches, their
    name for people), or None after showing why not. Pages draw their other controls first, so none is
    lost while it waits."""
    where = where or st.sidebar
    path, fmt = vectors_from_settings(sys.argv, dict(os.environ))
    sources = [GLOVE_LABEL] + ([f"File from settings: {os.path.basename(path)}"] if path else []) + ["Upload a file"]
    source = where.radio(
        "Word vectors", sources, key="vectors",
        help="GloVe ships with the app. You can also upload GloVe text (no header) or word2vec text/binary.",
    )
    if source == GLOVE_LABEL:
        return glove(), "glove", "GloVe 6B 50-d"
    try:
        picked = ((_vectors_at(path, fmt), f"path:{path}:{fmt}", os.path.basename(path)) if source.startswith("File from settings")
                  else _upload_picker(where))
    except VectorFileError as error:
        where.error(md_escape(str(error)))
        return None
    repeats = getattr(picked[0], "duplicates_skipped", 0) if picked else 0
    if repeats:
        where.warning(f"{repeats:,} repeated word(s) skipped: each word keeps the first vector the file gives it.")
    return picked


def _upload_picker(where) -> tuple[KeyedVectors, str, str] | None:
    upload = where.file_uploader(
        f"Vector file (at most {upload_limit_text()})", type=["txt", "vec", "bin"], key="vector_file",
        max_upload_size=MAX_UPLOAD_BYTES // 1_000_000,
        help="One word per line followed by its numbers (GloVe), the same with a 'count dim' first line "
        "(word2vec text), or word2vec binary (.bin). Files are parsed, never unpickled.",
    )
    fmt = where.selectbox("Format", ["auto", *VECTOR_FORMATS], key="vector_format")
    if upload is None:
        where.info("Choose a file to use your own vectors.")
        return None
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    return _uploaded(digest, data, upload.name, None if fmt == "auto" else fmt), f"upload:{digest}:{fmt}", upload.name


def page_link(page: str, label: str, icon: str = ":material/arrow_forward:", query_params: dict | None = None) -> None:
    """A link to another page of the app that keeps the session (and presenter mode), opening it in the state
    `query_params` give (the page's URL names); a plain link where the page runs on its own, without app.py's
    navigation (AppTest)."""
    try:
        st.page_link(f"pages/{page}.py", label=label, icon=icon, query_params=query_params)
    except StreamlitPageNotFoundError:
        query = "?" + urllib.parse.urlencode(query_params) if query_params else ""
        st.markdown(f"[{md_escape(label)}](./{page}{query})")


def newcomer_note() -> None:
    """On a session's first screen opened with no link, a box that says where to start (the Lesson), until closed."""
    if not st.session_state.setdefault(NEWCOMER, not st.query_params):
        return
    with st.container(border=True):
        text, close = st.columns([5, 1], vertical_alignment="center")
        with text:
            st.markdown("**New to attention?** Start with the Lesson: 22 short steps, from a database lookup to a "
                        "decoder predicting the next word and what a head changes, each a live figure. This page is the explorer they lead to.")
            page_link("lesson", "Start the Lesson", ":material/school:")
        close.button("Got it", key="newcomer_close", on_click=lambda: st.session_state.update({NEWCOMER: False}))


NEWCOMER = "_newcomer"


def load_url_state(schema: dict[str, Param]) -> None:
    """Put this page's controls into session state before its widgets are drawn.

    On entering the page (first visit, or back from another page), the values come from the URL when it
    names any of them, else from what the page showed last in this session, else the defaults.
    After a run that stopped early (an upload still to choose, a message), the widgets it did not draw have
    lost their state, or kept a value their re-drawn widget would not show: every control is set again
    through the session-state API, which also sends the value to the browser.
    A fragment that reruns without its page (the explorer's sentence and figures) calls it too, so such a run takes
    the same views and restores the same controls.
    """
    page = page_id(schema)
    saved = st.session_state.setdefault(_SAVED, {})
    for where, values in beacon.take().items():  # views a heatmap's pause posted since the last run (appkit/beacon)
        if where == page and st.session_state.get(_CURRENT) == page:
            for name, value in values.items():
                st.session_state[name] = value
        elif where in saved:
            saved[where].update(values)
    if st.session_state.get(_CURRENT) != page:
        st.session_state[_CURRENT] = page
        st.session_state[VISIT] = {}
        params = st.query_params.to_dict()
        from_url = any(name in params for name in schema) or page not in saved
        values = parse_params(params, schema) if from_url else saved[page]
        if from_url:
            said_beyond(beyond(params, schema))
    else:
        last = saved.get(page, {})
        stopped = st.session_state.pop(_STOPPED, None) == page
        values = {name: st.session_state[name] if name in st.session_state else value
                  for name, value in last.items() if stopped or name not in st.session_state}
    for name, value in values.items():
        st.session_state[name] = value


def said_beyond(found: list) -> None:
    """Where a link asked for more (or less) than a control offers, the page says what it shows instead."""
    if found:
        st.caption("This link asks for " + "; ".join(
            f"{name} = {shown_number(asked)}, past what this page offers, so it shows {shown_number(value)}"
            for name, asked, value in found) + ".")


def shown_number(value) -> str:
    """A link's number as a person reads it: thousands separated, a long tail cut."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)[:20]
    if number.is_integer() and abs(number) < 1e15:
        return f"{int(number):,}"
    return f"{number:,.6g}"


def save_url_state(schema: dict[str, Param], *, note: bool = True, kept: dict[str, str] | None = None) -> None:
    """Mirror every control into the URL, so a copied link reproduces this view, and keep them for the
    session (see load_url_state). `note`: say so where the text is too long for the link. `kept`: other
    parameters the link keeps (the class a student follows)."""
    values = {name: st.session_state.get(name, param.default) for name, param in schema.items()}
    st.session_state.setdefault(_SAVED, {})[page_id(schema)] = values
    params = {**(kept or {}), **encode_params(values, schema)}
    if st.session_state.get(PRESENT):
        params[PRESENT] = "1"
    if len(params.get("text", "")) > URL_TEXT_LIMIT:
        params.pop("text")
        if note:
            st.caption(f"The text is over {URL_TEXT_LIMIT} characters, so the link does not include it.")
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)


_SAVED, _CURRENT, _STOPPED = "_saved_controls", "_current_page", "_stopped_early"
VISIT = "_this_visit"  # what a page remembers between the runs of one visit; emptied on entering a page


def page_id(schema: dict[str, Param]) -> str:
    return ",".join(schema)


def held(name: str, options_id, clean: Callable[[Any], Any], make: Callable[..., Any]):
    """A widget whose options depend on the input (a word position, a window): its value survives any edit.

    The value lives under `name` as plain data (a position, never a label), and `clean` turns a stored
    value into one the current options allow (keep the position where it still exists, else a default).
    The widget itself is keyed by `options_id` (what its options are), so when the input changes them a
    fresh widget is drawn, rather than one whose dead label the browser would send back.
    `make(key=..., on_change=..., args=...)` draws the widget.
    """
    value = clean(st.session_state.get(name))
    key = widget_key(name, options_id)
    st.session_state[key] = value  # the callback below has already copied any change the person made
    value = clean(make(key=key, on_change=_adopt, args=(key, name)))
    st.session_state[name] = value
    return value


def widget_key(name: str, options_id) -> str:
    """The key of a widget whose options depend on the input: a fresh widget whenever its options change."""
    return f"_{name}_{zlib.crc32(repr(options_id).encode('utf-8')):08x}"


def _adopt(key: str, name: str) -> None:
    st.session_state[name] = st.session_state[key]


def position_select(container, label: str, names: list[str], name: str, *, first: tuple[int, str] | None = None, **kwargs) -> int:
    """A select box over the positions 0 … len(names)-1, shown as "i · name", holding the position (an int).

    `first` = (value, label) adds one option before the positions, such as (-1, "every word"); it is the
    default, else position 0 is.
    """
    options, clean = _positions(names, first)

    def label_of(i: int) -> str:
        return first[1] if first and i == first[0] else f"{i} · {names[i]}"

    return held(name, (first, names), clean,
                lambda **widget: container.selectbox(label, options, format_func=label_of, **widget, **kwargs))


def position(names: list[str], name: str, *, first: tuple[int, str] | None = None) -> int:
    """The position that position_select(…, names, name, first=first) holds in this run, read before it is drawn."""
    return _positions(names, first)[1](st.session_state.get(name))


def _positions(names: list[str], first: tuple[int, str] | None) -> tuple[list[int], Callable[[Any], int]]:
    """A position select's options, and its `clean`: a stored value it allows, else its default (the first option)."""
    options = ([first[0]] if first else []) + list(range(len(names)))
    return options, lambda value: value if isinstance(value, int) and value in options else options[0]


def clamp(low: int, high: int, default: int) -> Callable[[Any], int]:
    """A `clean` for integer widgets: an int is clamped into [low, high], anything else becomes `default`."""
    return lambda v: min(max(v, low), high) if isinstance(v, int) and not isinstance(v, bool) else default


def _numbers(point: dict) -> list[float] | None:
    """The numbers a selected point carries in its customdata (one, or a list); None where it carries other things."""
    data = point.get("customdata")
    if isinstance(data, dict) and all(str(k).isdigit() for k in data):  # a row of a typed array
        data = [data[k] for k in sorted(data, key=int)]
    data = data if isinstance(data, list) else [data]
    numbers = [d for d in data if isinstance(d, (int, float)) and not isinstance(d, bool)]
    return numbers if numbers and len(numbers) == len(data) else None


def clicked_point(chart_key: str) -> list[float] | None:
    """The numbers a click on a chart's point carries in its customdata (one, or a list); None when the
    chart's selection holds no such point."""
    points = st.session_state[chart_key].selection.points
    return _numbers(points[0]) if points else None


def clicked(chart_key: str) -> int | None:
    """The position a click on a chart's point carries (its customdata, or the first item of it)."""
    point = clicked_point(chart_key)
    return int(point[0]) if point else None


def scale_select(where=None) -> str:
    """The colour-scale picker (URL parameter `scale`), in `where` (default: the sidebar)."""
    return (where or st.sidebar).selectbox(
        "Colour scale", list(SCALES), format_func=SCALES.get, key="scale",
        help="What a cell's colour means. Per row: each query's largest weight is 1, which shows where each word "
             "looks. 0 → largest shown: one scale for the whole figure. 0 → 1: comparable across figures. √ stretch: "
             "0 → largest shown on a square-root scale, which lifts the small weights of long texts. "
             "Hover always gives the true weight.")


def stop(message: str, schema: dict[str, Param], *, error: bool = False) -> None:
    """End this run with a calm message (st.info), or st.error for input that cannot be used; the URL
    still mirrors the controls, so the link reproduces what the person sees."""
    halt(message, schema, error=error)
    save_url_state(schema)
    st.stop()


def halt(message: str, schema: dict[str, Param], *, error: bool = False) -> None:
    """stop's message, for a part of a page that ends there while the rest of the page goes on: the controls it did
    not draw are set again on the next run (load_url_state)."""
    (st.error if error else st.info)(md_escape(message))  # messages may quote the user's own text
    st.session_state[_STOPPED] = page_id(schema)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&])")


def md_escape(text: str) -> str:
    """User text made safe to place inside Markdown: every special character is backslash-escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def bounded_text_box(widget, label: str, *, key: str, limit: int, **kwargs) -> str:
    """A text box (st.text_area or st.text_input, or a column's) that keeps at most `limit` characters. The browser
    is given no limit of its own (its counter would show that number, and its limit drops a longer paste whole):
    a longer paste keeps its first `limit` characters, a warning under the box gives both lengths, and a caption
    counts the characters against the real limit."""
    def cut() -> None:
        text = st.session_state[key]
        if len(text) > limit:
            st.session_state[key] = text[:limit]
            st.session_state[f"_{key}_pasted"] = len(text)

    value = widget(label, key=key, on_change=cut, **kwargs)
    pasted = st.session_state.pop(f"_{key}_pasted", None)
    if pasted:
        st.warning(f"The text pasted has {pasted:,} characters; this page reads at most {limit:,}, so it keeps the "
                   f"first {limit:,}.")
    st.caption(f"{len(value):,} / {limit:,} characters")
    return value


def fragment_alone() -> bool:
    """Whether this run is a fragment's alone, the rest of the page as the last run left it."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx and ctx.fragment_ids_this_run)
