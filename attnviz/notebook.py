"""attnviz in a notebook: the app's interactive heatmap and head atlas as widgets (anywidget), in JupyterLab and Notebook 7
(tested) and marimo (tried), fully offline: the browser's code is inline (attnviz.web), and nothing is fetched from any host.

    from attnviz.notebook import heatmap
    w = heatmap(scores, tokens)          # one head's raw scores (n, m), or a model's run: heatmap(run, layer=2, head=4)
    w                                    # drawn by the browser: τ, hard, masks, the query, colour scale, palette, PNG/SVG
    w.temp = 0.5                         # the view is traitlets both ways: a change in the page reaches Python once the
    w.weights                            #   person pauses, a change from Python redraws; weights: what is drawn, by the engine
    w.save_html("head.html")             # a standalone page that works offline

model_view(model, text) gives the atlas of every head, a click choosing the head drawn whole; compare(a, b) gives
A | B and B − A.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import anywidget
import numpy as np
import traitlets

from attnviz import figures, web
from attnviz.sentence import MASK_RULES, MASKS, temperature_grid, weights_under_view

MAX_SIDE = 512  # the most queries or keys a widget draws; the app's long-input view is the way past it
ALL_HEADS_BYTES = 16 * 2**20  # a model view carries every head's scores up to this size, so the atlas works offline
VIEW_NAMES = ("temp", "hard", "mask", "hide", "scale", "palette", "query", "key")
OVERFLOW = "The scores divided by τ are larger than float32 can hold, so the softmax has no answer. Choose a larger τ."


def check(scores, tokens: list[str], keys: list[str] | None = None) -> np.ndarray:
    """The scores as float32 (n, m), after the checks the app makes, each failing with what to change."""
    matrix = np.asarray(scores)
    if matrix.ndim != 2:
        raise ValueError(f"A heatmap draws one head's scores, a matrix (queries, keys); this has shape {matrix.shape}. "
                         "For a model's run, pass heatmap(run, layer=…, head=…).")
    n, m = matrix.shape
    keys = tokens if keys is None else keys
    if n == 0 or m == 0:
        raise ValueError("There is nothing to draw: the matrix has no rows or no columns (0 tokens).")
    if len(tokens) != n or len(keys) != m:
        raise ValueError(f"The tokens do not match the matrix: {len(tokens)} query tokens and {len(keys)} key tokens "
                         f"for a {n} × {m} matrix. Give one token per row (and `keys=`, one per column).")
    if max(n, m) > MAX_SIDE:
        raise ValueError(f"A notebook heatmap draws at most {MAX_SIDE} queries and keys; this matrix is {n} × {m}. "
                         f"Draw a window of it (scores[a:b, c:d] with its tokens), or open the text in the app, whose "
                         "long-input view draws an overview of 4,096 tokens and a zoom window.")
    if not np.issubdtype(matrix.dtype, np.number) or not np.isfinite(matrix).all():
        raise ValueError("The scores hold NaN or infinite values, which no softmax can turn into weights. Replace them "
                         "(a masked score is a mask, not −∞: pass mask='causal', or hide keys).")
    if np.abs(matrix).max() > np.finfo(np.float32).max:
        raise ValueError("The scores are larger than float32 holds (about 3.4e38): scale them down.")
    return np.ascontiguousarray(matrix, dtype=np.float32)


class _Widget(anywidget.AnyWidget):
    _esm = web.bundle("anywidget.mjs")
    _css = web.css()
    data = traitlets.Dict().tag(sync=True)
    view_names = traitlets.List(list(VIEW_NAMES)).tag(sync=True)
    temp = traitlets.Float(1.0).tag(sync=True)
    hard = traitlets.Bool(False).tag(sync=True)
    mask = traitlets.Unicode("none").tag(sync=True)
    hide = traitlets.List(traitlets.Int()).tag(sync=True)
    scale = traitlets.Unicode("row").tag(sync=True)
    palette = traitlets.Unicode("viridis").tag(sync=True)
    query = traitlets.Int(0).tag(sync=True)
    key = traitlets.Int(-1).tag(sync=True)

    @traitlets.validate("temp")
    def _temp(self, proposal):
        value = float(proposal["value"])
        if not np.isfinite(value) or value <= 0:
            raise traitlets.TraitError(f"τ must be a positive number, got {value}")
        return min(temperature_grid(), key=lambda t: abs(np.log(t) - np.log(value)))  # the toolbar's steps

    @traitlets.validate("mask")
    def _mask(self, proposal):
        if proposal["value"] not in MASK_RULES:
            raise traitlets.TraitError(f"mask must be one of {', '.join(MASK_RULES)}, got {proposal['value']!r}")
        return proposal["value"]

    @traitlets.validate("scale")
    def _scale(self, proposal):
        if proposal["value"] not in figures.SCALES:
            raise traitlets.TraitError(f"scale must be one of {', '.join(figures.SCALES)}, got {proposal['value']!r}")
        return proposal["value"]

    @traitlets.validate("palette")
    def _palette(self, proposal):
        if proposal["value"] not in figures.PALETTES:
            raise traitlets.TraitError(f"palette must be one of {', '.join(figures.PALETTES)}, got {proposal['value']!r}")
        return proposal["value"]

    @property
    def view(self) -> dict:
        return {name: getattr(self, name) for name in VIEW_NAMES}

    def _scores(self) -> np.ndarray:
        raise NotImplementedError

    @property
    def weights(self) -> np.ndarray:
        """(n, m) the weights drawn now, under the view (τ, hard, the mask, hidden keys), computed by the engine."""
        return weights_under_view(self._scores(), self.view)[0]

    def save_html(self, path: str | Path) -> Path:
        """A standalone page of this widget as it is now, that works offline: the browser's code and the data inline
        (no script, style or font from any other host). The page redraws for τ, hard, masks and the query by itself;
        it has no kernel to tell."""
        path = Path(path)
        path.write_text(self.html_page(), encoding="utf-8")
        return path

    def html_page(self) -> str:
        """save_html's page, as text."""
        state = {name: getattr(self, name) for name in self.keys if not name.startswith("_") and name not in
                 ("comm", "log", "keys", "layout", "tabbable", "tooltip")}
        payload = json.dumps(state).replace("</", "<\\/")  # no "</script>" can end the tag early
        module = web.bundle("anywidget.mjs", name="widget")
        page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self._title())}</title>
<style>body {{ margin: 16px; }}
{web.css()}</style></head>
<body><div id="attnviz"></div>
<script type="application/json" id="attnviz-state">{payload}</script>
<script type="module">
{module}
const values = JSON.parse(document.getElementById("attnviz-state").textContent);
const listeners = {{}};
const model = {{
  get: (name) => values[name],
  set: (name, value) => {{ values[name] = value; (listeners["change:" + name] || []).forEach((f) => f()); }},
  save_changes: () => {{}},
  on: (event, f) => (listeners[event] = listeners[event] || []).push(f),
  off: () => {{}},
}};
widget.render({{ model, el: document.getElementById("attnviz") }});
</script></body></html>
"""
        return page

    def _title(self) -> str:
        return self.data.get("title") or "attnviz"

    def __repr__(self) -> str:  # what a page without widgets shows (GitHub, a terminal, a notebook saved with outputs)
        return f"{type(self).__name__}: {self._title()} (an interactive widget: a running notebook draws it)"


class Heatmap(_Widget):
    """One head's attention drawn by the browser from its raw scores (see heatmap())."""

    def __init__(self, scores, tokens: list[str], keys: list[str] | None = None, *, title: str = "", **view):
        matrix = check(scores, tokens, keys)
        self._matrix = matrix
        data = figures.interactive_heatmap(matrix, list(tokens), None if keys is None else list(keys), view=_view(view),
                                           title=title, taus=temperature_grid(), overflow=OVERFLOW, file="attnviz_heatmap")
        super().__init__(data={**data, "kind": "single"}, **_view(view))

    def _scores(self) -> np.ndarray:
        return self._matrix

    def _title(self) -> str:
        return self.data.get("title") or "{} queries × {} keys".format(*self._matrix.shape)


def _view(view: dict) -> dict:
    unknown = set(view) - set(VIEW_NAMES)
    if unknown:
        raise TypeError(f"unknown view setting(s) {', '.join(sorted(unknown))}; the view is {', '.join(VIEW_NAMES)}")
    defaults = {"temp": 1.0, "hard": False, "mask": "none", "hide": [], "scale": "row", "palette": "viridis", "query": 0,
                "key": -1}
    out = {**defaults, **view}
    if out["mask"] not in MASKS + ("causal_keys",):
        raise ValueError(f"mask must be one of {', '.join(MASK_RULES)}, got {out['mask']!r}")
    return out


def heatmap(scores, tokens=None, keys: list[str] | None = None, *, layer: int = 0, head: int = 0, title: str = "",
            **view) -> Heatmap:
    """One head's attention, drawn by the browser: `scores` (n, m) before the softmax, with one token per row (and
    `keys`, one per column, where they differ), or a model's run (attnviz.models) with the layer and head to draw
    (from 0). View settings (temp, hard, mask, hide, scale, palette, query) set where it starts; they are traitlets."""
    from attnviz.models import Run

    if isinstance(scores, Run):
        run = scores
        attention = run.main
        if not (0 <= layer < run.layers and 0 <= head < run.heads):
            raise ValueError(f"This run has {run.layers} layers of {run.heads} heads (from 0); got layer {layer}, head {head}.")
        view.setdefault("mask", "causal" if attention.causal else "none")
        return Heatmap(run.head_scores(layer, head), attention.queries.labels(), attention.keys.labels()
                       if attention.keys is not attention.queries else None,
                       title=title or f"{run.model}: layer {layer}, head {head} (from 0)", **view)
    if tokens is None:
        raise ValueError("Give the tokens: one per row of the scores.")
    return Heatmap(scores, list(tokens), keys, title=title, **view)


class ModelView(_Widget):
    """Every head of a model's run as an atlas; a click chooses the head drawn whole below (see model_view()).
    `layer` and `head` count the heads drawn from 0; `names` (layer numbers, head numbers) says which of the model's
    they are, where bertviz's include_layers or include_heads drew a subset."""

    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    atlas = traitlets.Dict().tag(sync=True)
    all_scores = traitlets.Unicode("").tag(sync=True)

    def __init__(self, run, *, layer: int = 0, head: int = 0, names: tuple[list[int], list[int]] | None = None,
                 **view):
        self.run = run
        self.names = names if names is not None else (list(range(run.layers)), list(range(run.heads)))
        attention = run.main
        n, m = attention.weights.shape[-2:]
        check(np.zeros((n, m), np.float32), attention.queries.labels(), attention.keys.labels())
        view = _view({"mask": "causal" if attention.causal else "none", **view})
        allowed = run.allowed()  # (n, m) or None
        atlas = figures.atlas_data(run.weights, chosen=(layer, head), group=_group(run), allowed=allowed,
                                   scale=view["scale"], palette=view["palette"], base=0, names=names)
        bundle = ""
        if run.weights.nbytes <= ALL_HEADS_BYTES:
            bundle = base64.b64encode(np.ascontiguousarray(run.scores, dtype="<f4").tobytes()).decode("ascii")
        super().__init__(data=self._data(layer, head, view), atlas=atlas, all_scores=bundle, layer=layer, head=head, **view)

    def _data(self, layer: int, head: int, view: dict) -> dict:
        attention = self.run.main
        keys = attention.keys.labels() if attention.keys is not attention.queries else None
        title = f"Layer {self.names[0][layer]}, head {self.names[1][head]} (from 0)"
        data = figures.interactive_heatmap(self.run.head_scores(layer, head), attention.queries.labels(), keys, view=view,
                                           title=title, taus=temperature_grid(), overflow=OVERFLOW, file="attnviz_head")
        data.update(kind="model", layers=self.run.layers, heads_per_layer=self.run.heads, base=0)
        if attention.causal:
            data["masks"] = {"causal": "causal", "causal_keys": "causal, hide keys"}
        return data

    @traitlets.validate("layer")
    def _layer(self, proposal):
        if not 0 <= proposal["value"] < self.run.layers:
            raise traitlets.TraitError(f"layer must be from 0 to {self.run.layers - 1}, got {proposal['value']}")
        return proposal["value"]

    @traitlets.validate("head")
    def _head(self, proposal):
        if not 0 <= proposal["value"] < self.run.heads:
            raise traitlets.TraitError(f"head must be from 0 to {self.run.heads - 1}, got {proposal['value']}")
        return proposal["value"]

    @traitlets.observe("layer", "head")
    def _chosen(self, change):
        if not self.all_scores:  # without every head's scores in the page, the new head's come from here
            self.data = self._data(self.layer, self.head, self.view)

    def _scores(self) -> np.ndarray:
        return self.run.head_scores(self.layer, self.head)


def _group(run) -> int:
    arch = getattr(run, "architecture", None)
    return arch.group if arch is not None else 1


HTML_ACTIONS = ("view", "return")
DISPLAY_MODES = ("dark", "light")


def _place(wanted: int | None, drawn: list[int], what: str) -> int:
    """Where the model's layer or head `wanted` sits among those drawn (0 when None)."""
    if wanted is None:
        return 0
    if wanted not in drawn:
        raise ValueError(f"{what} {wanted!r} is not among those drawn: {drawn} (counted from 0).")
    return drawn.index(wanted)


def _action(widget: ModelView, html_action: str):
    """bertviz's html_action: 'view' gives the widget (a notebook draws it), 'return' an IPython HTML object of the
    same view as a standalone page that works offline (save_html's page)."""
    if html_action == "view":
        return widget
    from IPython.display import HTML

    return HTML(widget.html_page())


def _checked(html_action: str, display_mode: str) -> None:
    if html_action not in HTML_ACTIONS:
        raise ValueError(f"html_action must be 'view' or 'return' (bertviz's), not {html_action!r}.")
    if display_mode not in DISPLAY_MODES:
        raise ValueError(f"display_mode must be 'dark' or 'light' (bertviz's), not {display_mode!r}.")


def model_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
               display_mode: str = "dark", encoder_attention=None, decoder_attention=None, cross_attention=None,
               encoder_tokens=None, decoder_tokens=None, include_layers=None, include_heads=None,
               html_action: str = "view", *, layer: int | None = None, head: int | None = None, kind: str = "encoder",
               **view):
    """The atlas of every head, a click drawing that head whole below it with the heatmap's toolbar and inspector.

    `model_view(model, text)`: `model` anything attnviz.models.load gives, or a built-in name such as "minilm".

    bertviz's call, with bertviz's whole signature and positions: `model_view(attention, tokens, sentence_b_start,
    prettify_tokens, display_mode, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
    decoder_tokens, include_layers, include_heads, html_action)`, with transformers' `outputs.attentions` (a tuple of
    (1, heads, n, n), one per layer; or the whole output) and the tokens. An encoder–decoder draws one `kind` a
    widget ("encoder", "decoder" or "cross"); bertviz shows the three in one view. html_action="return" gives an
    IPython HTML object of the view instead of the widget. display_mode is taken and checked; the widget draws on the
    notebook's own background. The chosen `layer` and `head` are the model's numbers, from 0."""
    from attnviz import models, output_attentions as attentions

    _checked(html_action, display_mode)
    picks = dict(prettify=prettify_tokens, include_layers=include_layers, include_heads=include_heads)
    if encoder_attention is not None or decoder_attention is not None or cross_attention is not None:
        run, layers, heads = attentions.seq2seq_run_of(encoder_attention, decoder_attention, cross_attention,
                                                       encoder_tokens, decoder_tokens, kind=kind, **picks)
    elif isinstance(attention, (str, models.Model)):
        if tokens is None or not isinstance(tokens, str):
            raise ValueError("model_view(model, text) draws a model on a text; model_view(attention, tokens) draws "
                             "transformers' outputs.attentions, as bertviz's model_view does.")
        chosen = models.load(attention) if isinstance(attention, str) else attention
        run = chosen.run(tokens)
        layers = attentions.chosen(run.layers, include_layers, "include_layers")
        heads = attentions.chosen(run.heads, include_heads, "include_heads")
        if (layers, heads) != (list(range(run.layers)), list(range(run.heads))):
            raise ValueError("include_layers and include_heads pick from transformers' attentions; for a model, draw "
                             "every head and click the one to open.")
    elif attention is None and tokens is None:
        raise ValueError("model_view(model, text) draws a model on a text; model_view(attention, tokens) draws "
                         "transformers' outputs.attentions, as bertviz's model_view does.")
    else:
        run, layers, heads = attentions.run_of(attention, tokens, **picks)  # None: says what to set
    names = None if (layers, heads) == (list(range(len(layers))), list(range(len(heads)))) else (layers, heads)
    widget = ModelView(run, layer=_place(layer, layers, "layer"), head=_place(head, heads, "head"), names=names,
                       **view)
    if sentence_b_start is not None:
        _second_sentence(widget, sentence_b_start)
    return _action(widget, html_action)


def head_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
              layer: int | None = None, heads=None, encoder_attention=None, decoder_attention=None,
              cross_attention=None, encoder_tokens=None, decoder_tokens=None, include_layers=None,
              html_action: str = "view", *, kind: str = "encoder", **view):
    """bertviz's head_view, with its whole signature and positions: `head_view(attention, tokens, sentence_b_start,
    prettify_tokens, layer, heads, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
    decoder_tokens, include_layers, html_action)`. It opens on `layer` and the first of `heads` (the model's numbers,
    from 0), drawn whole with τ, masks and the query in the page, above every head as thumbnails (the same widget as
    model_view). `sentence_b_start`: where a sentence pair's second sentence starts; it is named in the title."""
    head = None
    if heads is not None:
        heads = list(heads)
        if not heads:
            raise ValueError("heads is empty: give the heads to open on, counted from 0, or leave it out.")
        head = int(heads[0])
    return model_view(attention, tokens, sentence_b_start, prettify_tokens, "dark", encoder_attention,
                      decoder_attention, cross_attention, encoder_tokens, decoder_tokens, include_layers, None,
                      html_action, layer=layer, head=head, kind=kind, **view)


def _second_sentence(widget: ModelView, sentence_b_start) -> None:
    n = len(widget.run.main.queries)
    if not (isinstance(sentence_b_start, (int, np.integer)) and not isinstance(sentence_b_start, bool)
            and 0 < sentence_b_start < n):
        raise ValueError(f"sentence_b_start must be a position from 1 to {n - 1} (where the second sentence's first "
                         f"token is), not {sentence_b_start!r}.")
    widget.sentence_b_start = int(sentence_b_start)
    widget.data = {**widget.data, "title": f"{widget.data['title']}; sentence B from token #{sentence_b_start}"}


class EffectsView(_Widget):
    """Every head removed in turn, as an atlas on a diverging scale; a click removes that head and draws the next-piece
    bars before and after it, side by side (see effects())."""

    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    effects_atlas = traitlets.Dict().tag(sync=True)
    before = traitlets.Dict().tag(sync=True)
    after = traitlets.List(traitlets.Unicode()).tag(sync=True)  # per head (layer-major): base64 float32 (k,)

    def __init__(self, model, text: str, *, how: str = "zero", layer: int = 0, head: int = 0):
        from attnviz import effects as measure

        self.found = measure.every_head(model, text, how)
        layers, heads = self.found.effects.shape
        atlas, _ = figures.effect_atlas_data(self.found.effects, (layer, head), decoder=self.found.top is not None,
                                             removed=measure.HOWS[how], piece="piece 0", base=0)
        before, after = {}, []
        if self.found.top is not None:
            names = model.reader.labels([int(i) for i in self.found.top])
            before = figures.bars_data(self.found.clean, names, title="Before: p(next piece)", axis="probability (T = 1)")
            after = [base64.b64encode(np.ascontiguousarray(row, "<f4").tobytes()).decode("ascii")
                     for row in self.found.ablated.reshape(layers * heads, -1)]
        super().__init__(data={"title": "attnviz effects", "kind": "effects"}, effects_atlas=atlas, before=before, after=after,
                         layer=layer, head=head)

    @property
    def effects(self) -> np.ndarray:
        """(layers, heads) the effects drawn."""
        return self.found.effects

    @property
    def weights(self):
        raise AttributeError("An effects view draws no weights; see .effects.")

    def _title(self) -> str:
        return "attnviz effects"


def effects(model, text: str, *, how: str = "zero", layer: int = 0, head: int = 0) -> EffectsView:
    """Every head of `model` (anything attnviz.models.load gives, or a built-in name) removed in turn on `text`, as an
    atlas coloured by the effect (attnviz.effects.head_effects); for a decoder a click on a head draws the next-piece
    bars before and after removing it, from numbers the widget already holds (so save_html keeps them too). The
    chosen `layer` and `head` (from 0) are traitlets."""
    from attnviz import models

    chosen = models.load(model) if isinstance(model, str) else model
    return EffectsView(chosen, text, how=how, layer=layer, head=head)


class GenerationView(_Widget):
    """A decoder writing, every step in a timeline scrubbed and played in the page (see generation())."""

    timeline = traitlets.Dict().tag(sync=True)

    def __init__(self, model, text: str, *, steps: int = 16, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int = 0, layer: int = 0, head: int = 0):
        from attnviz.models import sampler_text

        self.generation = model.generate(text, steps, temperature, top_k, top_p, seed)
        if not 0 <= layer < model.layers or not 0 <= head < model.heads:
            raise ValueError(f"layer and head count from 0: {model.name} has layers 0 … {model.layers - 1} and heads "
                             f"0 … {model.heads - 1}, got layer {layer}, head {head}.")
        sampler = sampler_text(temperature, top_k, top_p, seed)
        data = figures.timeline_data(self.generation, self.generation.run.pieces.labels(), model.reader.labels, layer,
                                     head=head, sampler=sampler, base=0,
                                     title=f"{model.name} writes {len(self.generation.new_ids)} pieces ({sampler}), "
                                           f"layer {layer} (from 0)")
        super().__init__(data={"title": data["title"], "kind": "timeline"}, timeline=data)

    @property
    def weights(self) -> np.ndarray:
        """(L, H, n, n) every layer's weights over the prompt and the written pieces."""
        return self.generation.run.weights


def generation(model, text: str, *, steps: int = 16, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               seed: int = 0, layer: int = 0, head: int = 0) -> GenerationView:
    """`model` (a decoder attnviz computes, or a built-in name) writing `steps` pieces after `text`
    (attnviz.models.generate), as a timeline: each step's offer with the kept set and the chosen piece, the query's row
    in each head of `layer`, `head`'s growing matrix (both from 0). Scrubbing and play run in the page, so save_html
    keeps all of it offline."""
    from attnviz import models

    chosen = models.load(model) if isinstance(model, str) else model
    return GenerationView(chosen, text, steps=steps, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                          layer=layer, head=head)


class ScanView(_Widget):
    """A whole document's scan (model.scan): every head's overview in the atlas, a click drawing that head's overview
    whole, from a bundle of every head's overview the widget holds (so save_html keeps them all). `.scan` is the Scan:
    its summaries, and any block's exact weights through scan.tile(layer, head, queries, keys)."""

    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    scan_atlas = traitlets.Dict().tag(sync=True)
    overview = traitlets.Dict().tag(sync=True)  # the overview's labels and scale (its values come from the bundle)
    overviews = traitlets.Unicode("").tag(sync=True)  # (L, H, B, B) float32, base64

    def __init__(self, scan, *, layer: int = 0, head: int = 0, sort: str = "layer"):
        from attnviz.figures import long as drawn

        if not 0 <= layer < scan.layers or not 0 <= head < scan.heads:
            raise ValueError(f"layer and head count from 0: the scan has layers 0 … {scan.layers - 1} and heads "
                             f"0 … {scan.heads - 1}, got layer {layer}, head {head}.")
        if sort not in drawn.SORTS or sort == "retrieval":
            raise ValueError(f"sort must be one of {', '.join(s for s in drawn.SORTS if s != 'retrieval')}, got {sort!r}.")
        self.scan = scan
        atlas = dict(drawn.scan_atlas(scan, (layer, head), sort), base=0)
        names = figures.labels(scan.pieces.labels())
        n, b = len(scan), scan.block
        spans = [drawn.block_name(names, a * b, min(n, (a + 1) * b)) for a in range(scan.overview.shape[-1])]
        overview = figures.matrix_data(scan.overview[0, 0], spans, spans, title=f"each block's mean share over {n:,} pieces",
                                       what="mean share", axes=("queries", "keys"), scale="max", file="attnviz_scan")
        bundle = base64.b64encode(np.ascontiguousarray(scan.overview, "<f4").tobytes()).decode("ascii")
        super().__init__(data={"title": f"attnviz scan of {n:,} pieces ({scan.model})", "kind": "scan"},
                         scan_atlas=atlas, overview=dict(overview, values=""), overviews=bundle, layer=layer, head=head)

    @property
    def weights(self):
        raise AttributeError("A scan keeps no whole matrix; .scan.tile(layer, head, queries, keys) gives any block's weights.")


def scan(model, text: str, *, block: int = 128, layer: int = 0, head: int = 0, sort: str = "layer") -> ScanView:
    """`model` (one attnviz's engine computes, or a built-in name) over a whole `text`, up to its own context
    (model.scan): the atlas of every head's overview, sorted within each layer by "layer" (the model's order), "sink"
    or "entropy", and the chosen head's overview (`layer`, `head`, from 0, are traitlets)."""
    from attnviz import models

    chosen = models.load(model) if isinstance(model, str) else model
    return ScanView(chosen.scan(text, block=block), layer=layer, head=head, sort=sort)


class Compare(_Widget):
    """A | B, and B − A where the tokens match (see compare())."""

    b_temp = traitlets.Float(1.0).tag(sync=True)
    b_hard = traitlets.Bool(False).tag(sync=True)
    b_mask = traitlets.Unicode("none").tag(sync=True)

    def __init__(self, a: Heatmap, b: Heatmap):
        self._sides = (a, b)
        same = a.data["rows"] == b.data["rows"] and a.data["cols"] == b.data["cols"]
        sides = [{**a.data, "view": a.view, "file": "attnviz_a"}, {**b.data, "view": {**b.view}, "file": "attnviz_b"}]
        data = figures.interactive_comparison(*sides, same_tokens=same)
        names = [*VIEW_NAMES, "b_temp", "b_hard", "b_mask"]
        super().__init__(data={**data, "kind": "compare"}, view_names=names, b_temp=b.temp, b_hard=b.hard, b_mask=b.mask, **a.view)

    @property
    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(A's, B's) weights as drawn, under each side's τ, hard and mask."""
        a, b = self._sides
        side_b = {**self.view, "temp": self.b_temp, "hard": self.b_hard, "mask": self.b_mask}
        return weights_under_view(a._scores(), self.view)[0], weights_under_view(b._scores(), side_b)[0]

    def _title(self) -> str:
        return " | ".join(side._title() for side in self._sides)


def compare(a: Heatmap, b: Heatmap) -> Compare:
    """A and B side by side on one colour scale, and B − A where their tokens match; each side's τ, hard and mask are
    its own (B's as b_temp, b_hard, b_mask), the colour scale, palette and query shared."""
    return Compare(a, b)


class PartsTable:
    """A score taken apart (attnviz.effects.ScoreParts), shown in a notebook as a table of the strongest query-side
    parts (rows) × key-side parts (columns), the rest folded into "other", with the sentence naming the largest; a
    static table (escaped HTML), so a saved notebook keeps it. `.parts` is the whole ScoreParts."""

    def __init__(self, parts, top: int = 6):
        self.parts, self.top = parts, top

    def _repr_html_(self) -> str:
        import html

        rows, cols, table = self.parts.strongest(self.top)
        p = self.parts
        head = "".join(f"<th>k: {html.escape(c)}</th>" for c in cols)
        body = "".join(f"<tr><th>q: {html.escape(r)}</th>" + "".join(f"<td>{v:+.4f}</td>" for v in table[i]) + "</tr>"
                       for i, r in enumerate(rows))
        caption = (f"Layer {p.layer}, head {p.head} (from 0): query {p.query} {html.escape(p.pieces[p.query])!s} × key "
                   f"{p.key} {html.escape(p.pieces[p.key])!s}, score {p.score:.4f} = the sum of every cell")
        return (f"<table><caption>{caption}</caption><tr><th></th>{head}</tr>{body}</table>"
                f"<p>{html.escape(p.sentence())}</p>")

    def __repr__(self) -> str:
        return f"PartsTable: layer {self.parts.layer}, head {self.parts.head}, score {self.parts.score:.4f}"


def score_parts(model, text: str, layer: int, head: int, query: int, key: int, *, top: int = 6) -> PartsTable:
    """Why head `head` of layer `layer` (from 0) scores the piece at `key` as it does for the piece at `query`: the
    score taken apart into what wrote its query's and its key's parts (attnviz.effects.score_parts), as a table of
    the `top` strongest parts a side."""
    from attnviz.effects import score_parts as parts_of

    return PartsTable(parts_of(model, text, layer, head, query, key), top)
