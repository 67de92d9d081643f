"""Every page under streamlit's AppTest: it runs, every chart downloads, the sidebar's settings, presenter mode, user
text shown as text."""

import json
import pytest
from streamlit.testing.v1 import AppTest

from page_support import KV, PAGES, ROOT, SELF, TIMEOUT, component_data, example_scanned, kv_page, live, page, sent_figures


def test_app_runs_the_default_page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert live(at)["n"] == 16


def test_pages_holds_only_the_page_scripts_the_navigation_lists():
    listed = {line.split('"')[1].removeprefix("pages/") for line in (ROOT / "app.py").read_text().splitlines()
              if 'st.Page("pages/' in line}
    assert {p.name for p in (ROOT / "pages").iterdir() if p.name != "__pycache__"} == listed


def test_html_like_text_is_shown_as_text():
    at = page({"text": "<script>alert(1)</script> dog <b>"})
    assert not at.exception
    assert "<" in live(at)["rows"]  # plain text: the browser sets it as text (tests/e2e checks no element appears)
    at = page({"text": "<script>alert(1)</script> dog <b>", "proj": "random", "heads": "2"})  # plotly's labels are escaped
    ticks = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks and "<" not in ticks


def test_messages_quoting_user_text_render_it_literally():
    at = kv_page({"preset": "Your own records (CSV)", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3"})
    at.text_area(key="records_paste").input("3.0,50000\n3.5,[x](https://example.com) **bold**").run()
    shown = at.error[0].value
    assert r"\[x\]\(https://example\.com\) \*\*bold\*\*" in shown


@pytest.mark.parametrize("name", PAGES)
def test_every_page_runs_and_its_charts_download_as_png_at_3x_or_as_svg(name):
    """Each page runs without an exception, under either download setting. app.py's sidebar holds the setting (AppTest's switch_page runs a page without app.py, so the pages are run
    alone here with the setting in session state)."""
    if name == "long_text.py":
        example_scanned()  # the server's job, which the page otherwise shows the progress of
    for fmt, scale in (("png", 3), ("svg", 1)):
        at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT)
        if fmt == "svg":
            at.session_state["figfmt"] = "svg"
        at.run()
        assert not at.exception, at.exception
        charts = at.get("plotly_chart")
        drawn = sent_figures(at)
        # The browser's figures (the interactive heatmap, a matrix, bars) have their own PNG and SVG buttons
        assert charts or any(d.get("file", "").startswith("attnviz_") for d in drawn), name
        for chart in charts:
            options = json.loads(chart.proto.config)["toImageButtonOptions"]
            assert (options["format"], options["scale"]) == (fmt, scale)
            assert options["filename"].startswith("attnviz_") and len(options["filename"]) > len("attnviz_")


def test_the_sidebar_sets_the_download_format():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["proj"], at.query_params["heads"] = "random", "2"  # the grid of several heads is plotly's
    at.run()
    assert json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]["format"] == "png"
    at.radio(key="figfmt").set_value("svg").run()
    assert all(json.loads(c.proto.config)["toImageButtonOptions"]["format"] == "svg" for c in at.get("plotly_chart"))


def test_presenter_mode_from_the_url_and_the_toggle():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["present"] = "1"
    at.query_params["proj"], at.query_params["heads"] = "random", "2"  # the grid of several heads is plotly's
    at.run()
    layout = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert layout["font"]["size"] >= 16 and layout["xaxis"]["tickfont"]["size"] >= 16 and layout["hoverlabel"]["font"]["size"] >= 16
    assert at.session_state["present"] and at.query_params["present"] in ("1", ["1"])
    at.toggle(key="present").set_value(False).run()
    assert "present" not in at.query_params
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"].get("font", {}).get("size", 12) < 16


def test_presenter_mode_sizes_the_interactive_heatmap():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["present"] = "1"
    at.run()
    assert live(at)["font_px"] >= 16 and live(at)["label_px"] == 21  # its text, and the room each label gets
    at.toggle(key="present").set_value(False).run()
    assert live(at)["font_px"] < 16 and live(at)["label_px"] == 15


SHARED_LINK = {"layer": "2", "head": "3", "scale": "max", "palette": "cividis", "temp": "0.5", "hard": "1", "nsort": "1",
               "hide": "1,2", "walk": "2"}


@pytest.mark.parametrize("name", ["trained.py", "decoder.py"])
def test_both_model_pages_read_and_keep_the_parameters_of_their_one_schema(name):
    from page_support import run_page
    from appkit.model_page import model_schema

    shared = model_schema(model="m", text="", text_chars=1, query=0, mask="none", masks=("none",))
    assert set(SHARED_LINK) <= set(shared)
    at = run_page(name, {"text": "the dog was happy", **SHARED_LINK})
    assert not at.exception and not at.error
    assert {key: at.query_params[key] for key in SHARED_LINK} == SHARED_LINK
    assert (at.session_state["layer"], at.session_state["head"], at.session_state["temp"]) == (2, 3, 0.5)
