"""App-wide settings shown on every page: presenter mode and the figures' download format. Light on purpose:
app.py imports it before the page config, so it must not wait for torch or gensim."""

import numpy as np
import streamlit as st

from attnviz.export import Matrix, figure_html
from attnviz import describe, web
from attnviz.cache import ByteBudgetCache
from attnviz.figures import fit_margins, grow_to_labels, set_presenter

PRESENT = "present"  # session key and URL parameter: presenter mode is on
IN_CLASS = "_in_class"  # session: this run's page follows or presents a live class (its charts have no Download menu)
FIGURE_FORMAT = "figfmt"  # session key: what the camera button of every chart saves
FORMATS = {"png": "PNG, 3× size", "svg": "SVG (vector, for papers)"}
# Large type for a projector: body text 22 px; charts' own text is set per figure (see chart_config).
PRESENTER_CSS = """<style>
.stApp [data-testid="stMarkdownContainer"] p, .stApp [data-testid="stMarkdownContainer"] li,
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stWidgetLabel"] p, .stApp input, .stApp textarea,
.stApp [data-baseweb="select"] div { font-size: 22px !important; }
.stApp h1 { font-size: 3.2rem !important; }
</style>"""
CHART_FONT_PX = 16
TABLE_ROWS, TABLE_COLS = 200, 60  # "Show as a table": at most this much of a chart's matrix
FIGURE_CACHE_BYTES = 32 * 2**20  # the figures a class's steps share (chart's same_for)


# Text at 4.5:1 or more on white (WCAG 2.2, 1.4.3). Streamlit draws captions and a slider's end values in its text
# colour at 60 % opacity (3.9:1, and 2.7:1 inside a faded block) and plotly's axes and titles in a grey of 3.7:1; here
# captions are #5e5d5b at full opacity (6.6:1) and plotly's text is the app's text colour.
CONTRAST_CSS = """<style>
[data-testid="stCaptionContainer"], [data-testid="stSliderTickBar"] { color: #5e5d5b !important; opacity: 1 !important; }
.js-plotly-plot .xtick text, .js-plotly-plot .ytick text, .js-plotly-plot .g-xtitle text, .js-plotly-plot .g-ytitle text,
.js-plotly-plot .gtitle, .js-plotly-plot .cbaxis text, .js-plotly-plot .cbtitle text, .js-plotly-plot .legendtext {
  fill: #31333f !important; }
</style>"""


def presenting() -> bool:
    """Presenter mode: on from `?present=1` in any page's URL, or the sidebar toggle; it then stays on for the
    session, across pages, until switched off. Figures built in this run space their labels for its type."""
    if PRESENT not in st.session_state:
        st.session_state[PRESENT] = st.query_params.get(PRESENT) == "1"
    on = bool(st.session_state[PRESENT])
    set_presenter(on)
    return on


_announce = st.components.v2.component("attnviz_announce", js=web.bundle("streamlit/announce.mjs"), css=web.css(),
                                       isolate_styles=False)


def announce(scope: str, place, heading: str, said: str) -> None:
    """When `place` changes in this tab (a lesson's step), a screen reader hears `said` and focus goes to the heading
    that starts with `heading`; the first visit says nothing."""
    _announce(data=[{"scope": scope, "place": place, "heading": heading, "said": said}], key=f"announce_{scope}",
              width="stretch")


def settings() -> None:
    """The sidebar's app-wide controls, the contrast every page's text needs, and the presenter's large type."""
    st.session_state[IN_CLASS] = False  # until the Lesson says this run is a class's
    st.html(CONTRAST_CSS)
    with st.sidebar:  # out of the page's flow; what every page's own elements lack for the keyboard (announce.mjs)
        announce("page", None, "", "")
    st.sidebar.toggle("Presenter mode", key=PRESENT, help="Large type for a projector, the sidebar folded away. "
                      "The page's link carries it (present=1).")
    st.sidebar.radio("Chart downloads (the camera button)", list(FORMATS), format_func=FORMATS.get, key=FIGURE_FORMAT,
                     horizontal=True)
    if st.session_state[PRESENT]:
        st.html(PRESENTER_CSS)


def chart_config(key: str) -> dict:
    """plotly's config for a chart: the camera button saves `attnviz_<key>` as PNG at 3× or as SVG."""
    fmt = st.session_state.get(FIGURE_FORMAT, "png")
    # The toolbar that hover shows at a chart's top right holds the camera alone: plotly's full row (zoom, pan,
    # select, autoscale, …) was 224 px wide and ran over the title of any chart narrower than about 500 px. A drag
    # still zooms and a double click resets.
    return {"displaylogo": False, "modeBarButtons": [["toImage"]],
            "toImageButtonOptions": {"format": fmt, "scale": 3 if fmt == "png" else 1, "filename": f"attnviz_{key}"}}


def chart(where, figure, *, key: str, width: str = "stretch", matrix: Matrix | None = None, same_for: tuple | None = None,
          **kwargs):
    """st.plotly_chart in `where` (st, a column, an expander) with the download config, the presenter's
    chart text (titles, ticks, legends, hover) at CHART_FONT_PX or more, and margins sized for that text
    (figures.fit_margins), so plotly draws the chart once; a heatmap's axes are fixed (hover, no pan or zoom by drag).
    With `matrix`, a Download menu under the chart offers its numbers (CSV, float32 .npy) and the figure (standalone
    HTML). With `same_for` (what the figure is made from), `figure` is a function that builds it, and the finished
    figure is built once for every session (a class on the step), read by each, never changed."""
    presenter = bool(st.session_state.get(PRESENT))
    if same_for is None:
        finish(figure, presenter)
    else:
        build = figure
        figure = _finished().get((key, presenter, *same_for), lambda: finish(build(), presenter))
    values = matrix.values if matrix is not None and not callable(matrix.values) else None
    said = describe.figure(figure, values, *((matrix.rows, matrix.cols) if values is not None else (None, None)))
    drawn = where.plotly_chart(figure, key=key, width=width, config=chart_config(key), alt=said, **kwargs)
    if matrix is not None:
        table(where, key, matrix)
        downloads(where, key, figure, matrix)
    return drawn


def table(where, key: str, matrix: Matrix) -> None:
    """'Show as a table': the chart's numbers as a table with its row and column names (an HTML table, which a screen
    reader walks by cell), built only once asked for; the first TABLE_ROWS × TABLE_COLS cells of a larger one."""
    if not where.toggle("Show as a table", key=f"table_{key}", help="The numbers this chart draws, as a table."):
        return
    import pandas as pd  # here: a page's first run imports no pandas (0.5 s of a cold start), only a table asked for

    values = np.asarray(matrix.get())  # (rows, cols)
    rows, cols = min(len(matrix.rows), TABLE_ROWS), min(len(matrix.cols), TABLE_COLS)
    shown = pd.DataFrame(values[:rows, :cols], index=_unique(matrix.rows[:rows]), columns=_unique(matrix.cols[:cols]))
    shown.index.name = matrix.corner
    where.table(shown.style.format(precision=4, na_rep="masked"))
    if rows < len(matrix.rows) or cols < len(matrix.cols):
        whole = ("the step's own page (its Explore link) has the CSV of them all" if st.session_state.get(IN_CLASS)
                 else "the Download menu's CSV holds them all")
        where.caption(f"The first {rows:,} rows and {cols:,} columns of {len(matrix.rows):,} × {len(matrix.cols):,}; "
                      f"{whole}.")


def _unique(names: list[str]) -> list[str]:
    """Table headers told apart where a sentence repeats a word ("the", "the #2")."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


@st.cache_resource
def _finished() -> ByteBudgetCache:
    """Finished figures shared by sessions, each counted as the JSON the browser receives."""
    return ByteBudgetCache(FIGURE_CACHE_BYTES, lambda figure: len(figure.to_json()))


def finish(figure, presenter: bool):
    """`figure` made ready to draw (in place, and returned): the presenter's type, fixed heatmap axes, fitted margins."""
    if presenter:
        figure.update_layout(font=dict(size=CHART_FONT_PX), hoverlabel=dict(font=dict(size=CHART_FONT_PX)))
        figure.update_layout(title_font_size=max(CHART_FONT_PX + 4, figure.layout.title.font.size or 0))
        # Streamlit's chart theme sets the axes' fonts itself (12 px), so they are set here explicitly.
        axis_fonts = dict(tickfont=dict(size=CHART_FONT_PX), title_font=dict(size=CHART_FONT_PX))
        figure.update_xaxes(**axis_fonts)
        figure.update_yaxes(**axis_fonts)
        figure.update_layout(legend_font_size=CHART_FONT_PX)
        for trace in figure.data:  # text drawn as data (the line view's words, printed cell values), colour bars
            if "textfont" in trace and (trace.textfont.size or 0) < CHART_FONT_PX:
                trace.textfont.size = CHART_FONT_PX
            if "colorbar" in trace:
                trace.colorbar.tickfont.size = CHART_FONT_PX
    if any(trace.type == "heatmap" for trace in figure.data):  # a drag would pan the cells away from their labels
        figure.update_xaxes(fixedrange=True)
        figure.update_yaxes(fixedrange=True)
    grow_to_labels(fit_margins(figure))
    return figure


def downloads(where, key: str, figure, matrix: Matrix, *, image_help: str = "PNG or SVG: the camera button on the chart.",
              label: str = "Download") -> None:
    """CSV, .npy and HTML of one chart, in a small menu labelled `label`. Each file is built only when its button is
    clicked; `figure` is a plotly figure, or a function that builds one then. A page in a live class has none: its
    three buttons cost each of 30 students' runs more than the step's text, and the step's "Explore" link opens the
    page with them."""
    if st.session_state.get(IN_CLASS):
        return
    menu = where.popover(label, icon=":material/download:", key=f"downloads_{key}",
                         help="This chart's numbers (CSV, .npy) or the figure as a page that works offline (HTML). "
                              + image_help)
    name = f"attnviz_{key}"
    menu.download_button("Numbers (CSV)", matrix.csv,
                         f"{name}.csv", "text/csv", on_click="ignore", key=f"csv_{key}", width="stretch")
    menu.download_button("Numbers (.npy, float32)", matrix.npy, f"{name}.npy",
                         "application/octet-stream", on_click="ignore", key=f"npy_{key}", width="stretch",
                         help="Read it with numpy.load.")
    menu.download_button("Figure (HTML)", lambda: figure_html(figure() if callable(figure) else figure), f"{name}.html", "text/html", on_click="ignore",
                         key=f"html_{key}", width="stretch", help="A standalone page with plotly.js inside: it opens offline.")
