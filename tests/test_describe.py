"""attnviz.describe: what a chart says to a screen reader, checked against the numbers worked out here; and the app's
charts carry it (their accessible text) with a table of the same numbers one toggle away."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from attnviz import describe
from page_support import decode, run_page
from appkit.lesson.common import STEP_COUNT


def test_a_matrix_is_described_by_its_largest_cell_and_each_rows_strongest_column():
    rng = np.random.default_rng(3)
    values = rng.random((5, 7))  # (5, 7)
    values[2, 4] = 2.5
    values[0, 1:] = np.nan  # a masked row end
    rows, cols = [f"q{i}" for i in range(5)], [f"k{j}" for j in range(7)]
    said = describe.matrix(values, rows, cols)
    assert said.startswith("Attention weights: 5 queries × 7 keys.")
    assert "The largest, 2.5, is query q2, key k4." in said
    for i in range(5):
        j = int(np.nanargmax(values[i]))
        assert f"q{i} → k{j} {values[i, j]:.3g}" in said
    assert "6 of 35 cells are masked or empty." in said


def test_a_matrix_of_many_rows_names_the_first_and_counts_the_rest():
    values = np.eye(20)  # (20, 20)
    said = describe.matrix(values, [str(i) for i in range(20)], [str(i) for i in range(20)], what="W", row_axis="layer",
                           col_axis="head")
    assert said.startswith("W: 20 layers × 20 heads.") and "11 → 11 1" in said and "12 → 12" not in said
    assert "and 8 more layers." in said


def test_bars_are_described_by_their_largest_in_order_and_their_trend():
    values = np.array([0.05, 0.4, -0.2, 0.3])  # (4,)
    said = describe.bars(values, ["a", "b", "c", "d"], what="p")
    assert said == "p: 4 bars. Largest: b 0.4, then d 0.3, then a 0.05. In the order drawn, they go up and down."
    assert describe.bars(np.arange(4.0), list("wxyz")).endswith("they rise from first to last.")
    assert describe.bars(np.array([np.nan, np.nan]), ["a", "b"]).endswith("No bar has a value.")
    assert describe.number(-0.000123456) == "−0.000123"


def test_lesson_charts_say_what_they_draw_and_show_it_as_a_table():
    """Step 7's heatmap: its accessible text names the largest weight of the matrix the page draws, where it is,
    and each word's strongest key; its table (after the toggle) holds the same weights under the words."""
    at = run_page("lesson.py", {"step": "7"})
    chart = next(c for c in at.get("plotly_chart") if "Every word as the query" in c.proto.spec)
    spec = json.loads(chart.proto.spec)
    heat = next(t for t in spec["data"] if t["type"] == "heatmap" and "customdata" in t)
    weights = decode(heat["customdata"])[..., 0].astype(float)  # (n, n) the weights the hover reads
    words = [re.sub(r"^#\d+ ", "", label) for label in heat["y"]]  # the plot's labels tell repeats apart by position
    i, j = np.unravel_index(int(np.argmax(weights)), weights.shape)
    alt = chart.proto.alt
    assert alt.startswith("Every word as the query")
    assert f"The largest, {weights[i, j]:.3g}, is row {words[i]}, column {words[j]}." in alt
    at.toggle(key="table_lesson_matrix").set_value(True).run()
    shown = at.table[0].value
    table = shown.data if hasattr(shown, "data") else shown
    repeats = [words[:k + 1].count(word) for k, word in enumerate(words)]
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == [w if r == 1 else f"{w} #{r}" for w, r in zip(words, repeats)]
    assert np.abs(table.to_numpy(dtype=float) - weights).max() <= 1e-6


@pytest.mark.parametrize("step", range(1, STEP_COUNT + 1))
def test_every_lesson_charts_description_names_the_largest_number_its_table_holds(step):
    """Each chart of each step: its accessible text names the largest value of the numbers it draws, as its table
    (after "Show as a table") gives them, written as the description writes numbers."""
    params = {"step": str(step)} | ({"mask": "padding"} if step == 10 else {})
    at = run_page("lesson.py", params)
    toggles = [t for t in at.toggle if t.key and t.key.startswith("table_")]
    for toggle in toggles:
        toggle.set_value(True)
    at.run()
    assert not at.exception, at.exception
    alts = {c.proto.id: c.proto.alt for c in at.get("plotly_chart")}
    assert all(alts.values()), "a chart without a description"
    tables = [t.value.data if hasattr(t.value, "data") else t.value for t in at.table]
    assert len(tables) == len(toggles)
    for table in tables:
        values = table.to_numpy(dtype=float)  # (rows, cols) the chart's numbers
        largest = describe.number(float(np.nanmax(values)))
        assert any(largest in alt for alt in alts.values()), (largest, list(alts.values()))
