"""App-wide settings shown on every page: presenter mode and the figures' download format. Light on purpose:
app.py imports it before the page config, so it must not wait for torch or gensim."""

import streamlit as st

from attnviz.export import Matrix, figure_html
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
FIGURE_CACHE_BYTES = 32 * 2**20  # the figures a class's steps share (chart's same_for)


def presenting() -> bool:
    """Presenter mode: on from `?present=1` in any page's URL, or the sidebar toggle; it then stays on for the
    session, across pages, until switched off. Figures built in this run space their labels for its type."""
    if PRESENT not in st.session_state:
        st.session_state[PRESENT] = st.query_params.get(PRESENT) == "1"
    on = bool(st.session_state[PRESENT])
    set_presenter(on)
    return on


def settings() -> None:
    """The sidebar's app-wide controls, and the presenter's large type."""
    st.session_state[IN_CLASS] = False  # until the Lesson says this run is a class's
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
    drawn = where.plotly_chart(figure, key=key, width=width, config=chart_config(key), **kwargs)
    if matrix is not None:
        downloads(where, key, figure, matrix)
    return drawn


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
