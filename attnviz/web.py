"""The browser's code, as the hosts load it: each figure's JavaScript is a few files joined at run time, with no build
step and no request to any other host (the page gets it inline). No streamlit here: the Streamlit components
(pages/_interactive.py) and the notebook widgets (attnviz.notebook) add their own adapter to the same source."""

from __future__ import annotations

from importlib import resources

# The interactive heatmap: the math, its parts (methods put on one class), the class, Compare A | B, the figures of
# final numbers drawn with its code (a matrix, bars). It defines
# `mount(component)`, which a host's adapter calls.
HEATMAP = ("weights.mjs", "canvas.js", "heatmap_draw.js", "heatmap_toolbar.js", "heatmap_inspector.js", "heatmap_export.js", "heatmap.js",
           "heatmap_compare.js", "heatmap_matrix.js")
# The head atlas: the math (colours), the canvas, the atlas. It defines `mountAtlas(component)`.
ATLAS = ("weights.mjs", "canvas.js", "atlas.js")
# The information-flow routes: the canvas, the graph. It defines `mountRoutes(component)`.
ROUTES = ("canvas.js", "routes.js")
# The generation timeline: the colours, the canvas, the timeline. It defines `mountTimeline(component)`.
TIMELINE = ("weights.mjs", "canvas.js", "timeline.js")
# The notebook widgets: the heatmap's files, the atlas, and anywidget's adapter (its default export).
WIDGET = (*HEATMAP, "atlas.js", "timeline.js", "widget.js")
CSS = "heatmap.css"


def read(name: str) -> str:
    return resources.files("attnviz").joinpath(name).read_text(encoding="utf-8")


def source(files: tuple[str, ...]) -> str:
    """The files joined in order, into one ES module's text."""
    return "\n".join(read(name) for name in files)


def css() -> str:
    return read(CSS)
