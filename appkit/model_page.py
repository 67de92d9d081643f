"""What every model page shares: its URL parameters, its head (title, model picker, the model, its run), the layer and
head pickers and the sections about the chosen head. A model page adds only what is its own (Trained model: the
summaries, the rollout, the toy; Decoder: the next word, sinks, the logit lens)."""

from __future__ import annotations

import streamlit as st

from attnviz import figures, models
from attnviz.sentence import temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, encode_bool, encode_int_list, int_list, int_range, nearest
from appkit.common import load_url_state, stop
from appkit.effects_panel import EFFECT_PARAMS, effects_section
from appkit.served import load_or_stop, pick_model, run
from appkit.model_views import HEAD_TYPE_PARAMS, WRITE_PARAMS, moved_section, positions, qk_space_section, walk


def flag(default: bool = False) -> Param:
    return Param(default, boolean, encode_bool)


def model_schema(*, model: str, text: str, text_chars: int, query: int, mask: str, masks: tuple[str, ...],
                 **own: Param) -> dict[str, Param]:
    """The URL parameters of a model page: those every model page has, with this page's defaults, then its `own`.
    `query` -1 starts on the last piece."""
    return {
        "model": Param(model, bounded_text(100)),
        "text": Param(text, bounded_text(text_chars)),
        **own,
        "layer": Param(1, int_range(1, 1024)),
        "head": Param(1, int_range(1, 1024)),
        "scale": Param("row", choice(figures.SCALES)),
        "learned": flag(),  # the model's positions are open
        "qk": flag(),  # the query–key space is open
        "qkq": Param(-1, int_range(-1, 10_000)),  # its chosen query: an index into its points; -1 none
        # The chosen head's heatmap, drawn in the browser from its scores (appkit/interactive): what it shows.
        "query": Param(query, int_range(min(query, 0), models.MAX_PIECES - 1)),
        "key": Param(-1, int_range(-1, models.MAX_PIECES - 1)),  # the key whose score is taken apart; -1: the strongest
        "parts": flag(),  # "Inside a score" is open
        "why": flag(),  # "Why here?" is open
        "nsort": flag(),
        "temp": Param(1.0, nearest(temperature_grid())),
        "hard": flag(),
        "mask": Param(mask, choice(masks)),
        "hide": Param([], int_list, encode_int_list),
        "palette": Param("viridis", choice(figures.PALETTES)),
        "steps": flag(),
        "walk": Param(1, int_range(0, 16)),  # the walk's open tab: a step from 1, or 0 for every step
        **HEAD_TYPE_PARAMS,
        **WRITE_PARAMS,
        **EFFECT_PARAMS,
    }


def open_model(title: str, schema: dict[str, Param], kinds: tuple[str, ...], default: str) -> tuple[str, models.Model]:
    """The page's title, its URL read, and the model chosen in the sidebar (of `kinds`; `default` where the link names
    another), loaded; or the page stopped with why it cannot load."""
    st.title(title)
    load_url_state(schema)
    name = pick_model(kinds, default)
    return name, load_or_stop(name, lambda message: stop(message, schema, error=True))


def run_or_stop(name: str, text: str, schema: dict[str, Param], target: str | None = None) -> models.Run:
    """The model's run on `text`, or the page stopped: calmly for an empty text, as an error for one the model cannot
    read or a model that fails."""
    try:
        return run(name, text, target)
    except models.TextError as error:
        stop(str(error), schema, error=bool(text.strip()))
    except models.ModelError as error:
        stop(str(error), schema, error=True)


def keep_in_range(layers: int, heads: int) -> None:
    """A link's layer and head, cut to the model's (a link made for a larger model)."""
    st.session_state.layer = min(st.session_state.layer, layers)
    st.session_state.head = min(st.session_state.head, heads)


def pick_head(title: str, layers: int, heads: int) -> tuple[int, int]:
    """The header over every head, then the layer and head pickers (counted from 1): the head chosen."""
    keep_in_range(layers, heads)
    st.header(title)
    pick_layer, pick_head_ = st.columns(2)
    layer = pick_layer.selectbox("Layer", list(range(1, layers + 1)), key="layer")
    head = pick_head_.selectbox("Head", list(range(1, heads + 1)), key="head")
    return layer, head


def head_sections(model: models.Model, name: str, text: str, result: models.Run, layer: int, head: int,
                  labels: list[str], schema: dict[str, Param]) -> None:
    """The sections about the chosen head every model page has: the positions the model knows, the query–key space,
    the walk from X to αV, what the head moved, and whether its attention matters to the output."""
    section = st.expander("The positions the model knows: its learned table, or how RoPE turns q and k", key="learned",
                          on_change="rerun")
    if section.open:
        with section:
            positions(model, result)
    qk_space_section(name, text, layer, head, schema)
    walk(model, result, layer, head, schema)
    moved_section(model, result, layer, head, labels)
    effects_section(model, name, text, result, layer, head)

