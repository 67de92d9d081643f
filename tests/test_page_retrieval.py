"""The key–value database and attention pooling pages under AppTest."""

import re
import json
import numpy as np
import pytest
from attnviz.pooling import fit_bandwidth, salary_data

from page_support import KV, ROOT, TIMEOUT, chart_data, decode, kv_page, messages, run_page, soft_table


def test_kv_query_and_tau_change_the_output():
    at = kv_page()
    assert not at.exception
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]
    at.text_input(key="q").input("Smol").run()
    assert not at.exception
    after = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]
    assert not np.array_equal(decode(bars), decode(after))
    assert "Alex" in soft_table(at)["value"].iloc[0]
    at.select_slider(key="tau").set_value(100.0).run()
    spread = decode(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"])
    np.testing.assert_allclose(spread, 1 / 6, atol=0.01)  # τ → ∞: the plain average


def test_kv_exact_lookup_reports_no_record():
    at = kv_page({"q": "Lipt"})
    assert "No record" in messages(at)


def test_kv_preset_from_url_numeric():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3.45"})
    assert not at.exception
    assert any(m.label == "value" for m in at.metric)


def test_kv_bad_inputs_show_messages():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "abc"})
    assert not at.exception and "needs a number" in messages(at)
    at = kv_page({"q": "   "})
    assert "Type a query" in messages(at)
    at = kv_page({"preset": "Your own records (CSV)"})
    assert "Upload or paste" in messages(at)
    at.text_area(key="records_paste").input("only-one-column").run()
    assert not at.exception and "two columns" in messages(at)
    at.text_area(key="records_paste").input("a,1\n,2").run()
    assert "Row 2 has a key or a value but not both" in messages(at)  # left out; the whole record still answers
    at = kv_page({"preset": "Your own records (CSV)", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3"})
    at.text_area(key="records_paste").input("3.0,50000\n3.5,lots").run()
    assert not at.exception and "'lots' is not a number" in messages(at)


def test_pooling_controls_change_the_data():
    at = run_page("pooling.py")
    assert not at.exception
    fitted = decode(chart_data(at, 0)[2]["y"])
    at.select_slider(key="bw").set_value(0.5).run()
    assert not np.array_equal(decode(chart_data(at, 0)[2]["y"]), fitted)
    points = decode(chart_data(at, 0)[0]["x"])
    at.slider(key="n").set_value(80).run()
    assert len(decode(chart_data(at, 0)[0]["x"])) == 80 != len(points)
    assert len(at.metric) == 0  # σ is learned when asked, not on every visit


@pytest.mark.slow  # several seconds of page runs: the full suite's, not the fast tier's
def test_pooling_learns_sigma_when_asked_and_keeps_the_fit():
    at = run_page("pooling.py", {"n": "30", "seed": "2"})
    assert not at.exception and not at.metric
    at.button(key="fit").click().run()
    assert not at.exception
    x, y = salary_data(30, 3000, "saturating", 2)
    expected = fit_bandwidth(x, y, steps=150)
    assert at.metric[0].value == f"{expected.sigma:.4f}" and at.metric[1].value == f"{expected.grid_sigma:.4f}"
    curves = chart_data(at, len(at.get("plotly_chart")) - 2)  # the training curves, before the decision map
    np.testing.assert_allclose(decode(curves[0]["y"]), expected.losses, rtol=1e-9)
    np.testing.assert_allclose(decode(curves[1]["y"]), expected.sigmas, rtol=1e-9)
    at.select_slider(key="bw").set_value(0.5).run()  # another control: the fit stays
    assert at.metric[0].value == f"{expected.sigma:.4f}" and at.button(key="fit").label == "Learn σ again"
    at.slider(key="n").set_value(31).run()  # other data: no fit yet
    assert not at.metric


def test_pooling_boxcar_gaps_are_reported_not_drawn():
    at = run_page("pooling.py", {"kernel": "boxcar", "bw": "0.01", "n": "5"})
    assert not at.exception and "no training point" in messages(at)
    assert np.isfinite(decode(chart_data(at, 0)[2]["y"])).all()


def test_a_record_half_typed_is_left_out_and_the_page_still_answers():
    at = kv_page({"preset": "Your own records (CSV)", "q": "Li"})
    at.text_area(key="records_paste").input("Zhang,Aston\nLi,\nSmola,Alex").run()
    assert not at.exception and "Row 2 has a key or a value but not both" in messages(at)
    table = soft_table(at)
    assert len(table) == 2 and not at.error  # the two whole records answer the query
    at.text_area(key="records_paste").input("Li,\n").run()
    assert "Row 1 has an empty value" in messages(at)  # nothing whole to answer with: the row is named


def test_money_reads_as_money():
    at = kv_page({"preset": "GPA → starting salary", "encoder": "numeric", "sim": "gaussian", "kind": "numeric", "q": "3.5"})
    values = [m.value for m in at.metric]
    assert values and all(re.fullmatch(r"\d{2},\d{3}", v) for v in values), values  # 64,000, not 6.4e+04
    regression = json.loads(run_page("pooling.py").get("plotly_chart")[0].proto.spec)
    assert regression["layout"]["yaxis"]["tickformat"] == ",.0f"


def test_the_decision_map_spans_the_data_not_the_page_width():
    """Square cells (scaleanchor) would stretch the x range to fill a wide page (−10…10 for data in −4…4): the axes
    keep the grid's range and the plot narrows instead."""
    at = run_page("pooling.py")
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if str(json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")).startswith("Decision map"))
    grid = spec["data"][0]["x"]
    grid = decode(grid) if isinstance(grid, dict) else grid
    for axis in ("xaxis", "yaxis"):
        assert spec["layout"][axis]["range"] == [min(grid), max(grid)] and spec["layout"][axis]["constrain"] == "domain"
