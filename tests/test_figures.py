import csv
import io

import numpy as np
import plotly.graph_objects as go
import pytest

from attnviz import figures
from attnviz.export import Matrix, figure_html, matrices_zip, matrix_csv, weights_csv, weights_npy

TOKENS = ["he", "saw", "he", "<b>x</b>"]


def weights():
    w = np.random.default_rng(0).random((4, 4))
    return w / w.sum(1, keepdims=True), np.arange(16.0).reshape(4, 4)


def test_heatmap_rows_are_queries_in_order_and_hover_carries_numbers():
    w, s = weights()
    fig = figures.attention_heatmap(w, TOKENS, scores=s, row_oov=[False, True, False, False], scale="absolute")
    trace = fig.data[0]
    np.testing.assert_allclose(np.asarray(trace.z), w, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(trace.customdata)[..., 0], w, rtol=1e-6)  # the true weight behind each cell
    np.testing.assert_allclose(np.asarray(trace.customdata)[..., 1], s, rtol=1e-6)  # and the raw score
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 (the first word) on top
    assert (trace.zmin, trace.zmax) == (0, 1)
    assert trace.colorscale[0][1] == "#440154"  # viridis, colourblind-safe
    assert "weight: %{customdata[0]" in trace.hovertemplate and "score: %{customdata[1]" in trace.hovertemplate
    assert list(trace.y)[1] == "#1 saw" + figures.OOV_MARK and list(trace.x)[2] == "#2 he"
    # the repeated "he" stays two columns, both labelled "he"
    assert len(set(trace.x)) == 4 and list(fig.layout.xaxis.ticktext)[::2] == ["he", "he"]


def test_user_text_is_escaped():
    fig = figures.attention_heatmap(weights()[0], TOKENS)
    assert "&lt;b&gt;x&lt;/b&gt;" in fig.layout.xaxis.ticktext
    assert all("<b>" not in t for t in fig.layout.xaxis.ticktext)


def test_quotes_are_left_as_quotes():
    # plotly has no &quot; entity: an escaped quote would be drawn as the text "&quot;"
    assert figures.labels(['say "hi"', "it's", "a&b"]) == ['say "hi"', "it's", "a&amp;b"]


def test_nan_never_reaches_a_chart():
    w = weights()[0]
    w[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        figures.attention_heatmap(w, TOKENS)
    with pytest.raises(ValueError, match="NaN"):
        figures.matrix_heatmap(np.array([[np.inf]]), ["a"], ["0"])


def test_head_grid_has_each_head_and_the_average():
    w = np.random.default_rng(1).random((3, 4, 4))
    fig = figures.head_grid(w, TOKENS, scale="max")
    assert len(fig.data) == 4
    np.testing.assert_allclose(np.asarray(fig.data[3].z), w.mean(0), rtol=1e-6)
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(w.max())  # one bar for all panels
    # labels only on the outer edges: keys under the last row, queries left of the first column
    assert [fig.layout[f"xaxis{i or ''}"].showticklabels for i in ("", 2, 3, 4)] == [False, False, False, True]
    assert [fig.layout[f"yaxis{i or ''}"].showticklabels for i in ("", 2, 3, 4)] == [True, False, False, True]
    assert [a.text for a in fig.layout.annotations][-1] == "average over heads"


def test_matrix_heatmap_labels_shape_and_centres_signed_values():
    m = np.array([[-2.0, 1.0, 0.5]])
    fig = figures.matrix_heatmap(m, ["a"], figures.dims(3), title="Q")
    assert "(1×3)" in fig.layout.title.text
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-2.0, 2.0)


def test_weights_csv_round_trips_and_defuses_formulas():
    w = weights()[0]
    text = weights_csv(w, ["=cmd", "b,\"q\"", "c", "d"]).decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["query \\ key", "'=cmd", 'b,"q"', "c", "d"]
    assert [r[0] for r in rows[1:]] == ["'=cmd", 'b,"q"', "c", "d"]
    np.testing.assert_allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), w, rtol=1e-5)


def test_weights_csv_cells_are_printf_scientific_with_six_digits():
    rng = np.random.default_rng(3)
    edge = [0.0, 1.0, 1e-45, 1e-30, 0.1, 1e-3, 9.999996e-5, 9.999994e-5, 0.5, 2.4414062e-4, 0.99999997]
    w = np.concatenate([edge, rng.random(300) ** 9]).astype(np.float32).reshape(1, -1)  # (1, 311)
    cells = weights_csv(w, ["q"], [f"k{j}" for j in range(w.shape[1])]).decode().splitlines()[1].split(",")[1:]
    assert cells == ["%.5e" % v for v in w[0].astype(np.float64)]


def test_weights_csv_refuses_what_is_not_a_weight():
    for bad in (np.array([[0.5, -0.1]]), np.array([[0.5, np.nan]])):
        with pytest.raises(ValueError, match="weights"):
            weights_csv(bad, ["q"], ["a", "b"])


def test_matrix_csv_writes_signed_and_non_finite_numbers_as_printf_would():
    rng = np.random.default_rng(4)
    m = np.concatenate([[-0.0, -1.5, 2.4e7, -9.999996e-5, np.nan, np.inf, -np.inf], rng.normal(0, 30, 293)]).reshape(3, 100)
    text = matrix_csv(m, ["a", "=b", "c"], [f"d{j}" for j in range(100)], corner="token \\ dim").decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:2] == ["token \\ dim", "d0"] and [r[0] for r in rows[1:]] == ["a", "'=b", "c"]
    expected = [["%.5e" % v if np.isfinite(v) else str(v) for v in row] for row in m]
    expected[0][0] = "0.00000e+00"  # -0.0 is written as 0
    assert [r[1:] for r in rows[1:]] == expected


def test_matrix_csv_needs_a_label_per_row_and_column():
    with pytest.raises(ValueError, match="label"):
        matrix_csv(np.zeros((2, 3)), ["a"], ["x", "y", "z"])


def test_weights_npy_holds_the_float32_matrix():
    w = weights()[0]
    loaded = np.load(io.BytesIO(weights_npy(w)), allow_pickle=False)
    assert loaded.dtype == np.float32 and loaded.shape == (4, 4)
    np.testing.assert_array_equal(loaded, w.astype(np.float32))


def test_figure_html_is_standalone():
    html = figure_html(figures.weight_bars(np.array([0.2, 0.8]), ["a", "b"]))
    assert "<html>" in html and 'src="https://cdn.plot.ly' not in html
    assert len(html) > 1_000_000  # plotly.js itself is inlined


def test_weight_bars_highlight_the_hard_pick():
    fig = figures.weight_bars(np.array([0.1, 0.7, 0.2]), ["a", "b", "c"], highlight=1)
    assert list(fig.data[0].marker.color) == ["#0072b2", "#d55e00", "#0072b2"]
    assert fig.data[0].orientation == "h" and list(fig.data[0].y) == ["#0 a", "#1 b", "#2 c"]


def test_weight_bars_top_keeps_the_largest_weights_in_sentence_order():
    w = np.random.default_rng(3).random(200)
    w[[5, 150]] = 2.0  # the two largest
    fig = figures.weight_bars(w, [f"t{i}" for i in range(200)], top=10, highlight=150)
    keys = sorted(np.argsort(w)[-10:])
    assert list(fig.data[0].y) == [f"#{i} t{i}" for i in keys]
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), w[keys])
    assert list(fig.data[0].marker.color).count("#d55e00") == 1 and fig.data[0].marker.color[keys.index(150)] == "#d55e00"
    assert set(fig.layout.yaxis.tickvals) <= set(fig.data[0].y)


def test_block_overview_pads_a_ragged_edge_and_keeps_float32():
    w = np.random.default_rng(4).random((10, 10)).astype(np.float32)
    fig = figures.block_overview(w, [f"t{i}" for i in range(10)], max_blocks=4, scale="absolute")  # b = 3: blocks 0-2, 3-5, 6-8, 9
    z = np.asarray(fig.data[0].z)
    assert z.shape == (4, 4) and z.dtype == np.float32
    assert z[3, 3] == w[9, 9] and z[1, 3] == w[3:6, 9].max() and z[0, 0] == w[:3, :3].max()
    assert fig.data[0].y[3] == "#9 t9"


def test_block_overview_takes_each_blocks_maximum_and_names_its_ranges():
    w = np.random.default_rng(2).random((300, 300))
    fig = figures.block_overview(w, [f"t{i}" for i in range(300)], max_blocks=100)
    z = np.asarray(fig.data[0].customdata)  # the true block maxima; z is coloured per row by default
    assert z.shape == (100, 100)
    np.testing.assert_allclose(z[4, 7], w[12:15, 21:24].max(), rtol=1e-6)
    assert fig.data[0].y[4] == "#12–14 t12 … t14"
    assert len(fig.to_json()) < 2_000_000


@pytest.mark.parametrize("scale", list(figures.SCALES))
def test_colour_scales_map_weights_and_say_so(scale):
    w = np.array([[0.7, 0.2, 0.1], [0.05, 0.05, 0.9], [0.0, 0.0, 0.0]])  # the last row fully masked
    trace = figures.attention_heatmap(w, ["a", "b", "c"], scale=scale).data[0]
    z, bar = np.asarray(trace.z), trace.colorbar.title.text
    expected = {
        "absolute": w,
        "max": w,
        "row": np.array([[1, 2 / 7, 1 / 7], [1 / 18, 1 / 18, 1], [0, 0, 0]]),
        "sqrt": np.sqrt(w / 0.9),
    }[scale]
    np.testing.assert_allclose(z, expected, rtol=1e-6, atol=1e-7)
    assert trace.zmax == pytest.approx(0.9 if scale == "max" else 1.0)
    assert {"absolute": "0 → 1", "max": "max 0.9", "row": "row's largest", "sqrt": "√ scale"}[scale] in bar
    assert trace.colorbar.title.side == "right"  # beside the bar, never on its top tick
    np.testing.assert_allclose(np.asarray(trace.customdata)[..., 0], w, rtol=1e-6)  # hover keeps the true weight
    if scale == "sqrt":  # the bar's ticks name true weights at their stretched places
        ticks = dict(zip(trace.colorbar.ticktext, trace.colorbar.tickvals))
        assert ticks["0.5"] == pytest.approx(np.sqrt(0.5 / 0.9))


def test_click_layer_carries_sentence_positions_and_the_hover():
    w, s = weights()
    fig = figures.attention_heatmap(w, TOKENS, scores=s, clickable=True, row_start=100, col_start=7)
    heatmap, layer = fig.data
    assert heatmap.hoverinfo == "skip" and fig.layout.hoverdistance == -1
    custom = np.asarray(layer.customdata)  # (n·n, 4): query, key, weight, score
    assert custom.shape == (16, 4)
    row, col = 2, 3
    point = custom[row * 4 + col]
    assert point[:2].tolist() == [100 + row, 7 + col]
    assert point[2] == pytest.approx(w[row, col]) and point[3] == pytest.approx(s[row, col])
    assert list(layer.y)[row * 4 + col] == "#102 he" and list(layer.x)[row * 4 + col] == "#10 &lt;b&gt;x&lt;/b&gt;"
    assert "weight: %{customdata[2]" in layer.hovertemplate and "score: %{customdata[3]" in layer.hovertemplate
    many = figures.attention_heatmap(np.full((70, 70), 1 / 70), [f"t{i}" for i in range(70)], clickable=True)
    assert len(many.data) == 1  # above CLICK_LIMIT the select box picks the query


def test_keys_run_along_the_bottom_in_vertical_labels_thinned_to_the_width():
    n = 60
    tokens = [f"word{i}" for i in range(n)]
    w = np.full((n, n), 1 / n)
    full = figures.attention_heatmap(w, tokens).layout.xaxis
    third = figures.attention_heatmap(w, tokens, width="third").layout.xaxis
    assert full.side == "bottom" and full.tickangle == -90
    assert len(full.tickvals) <= figures.PLOT_PX["full"] // figures.LABEL_PX
    assert len(third.tickvals) <= figures.PLOT_PX["third"] // figures.LABEL_PX < len(full.tickvals)
    long = figures.attention_heatmap(np.ones((1, 1)), ["x" * 500]).layout.xaxis.ticktext[0]
    assert len(long) == figures.TICK_CHARS and long.endswith("…")
    tag = figures.attention_heatmap(np.ones((1, 1)), ["<b>" * 10]).layout.xaxis.ticktext[0]
    assert tag == "&lt;b&gt;" * 5 + "&lt;b…"  # cut by its text, never inside an entity


def test_line_view_scales_to_the_largest_weight_shown_and_fades_the_rest():
    w = np.zeros((2, 3, 3))
    w[0, 0] = [0.02, 0.03, 0.01]  # small weights: still drawn strongly, as they are the largest shown
    w[1, 0] = [0.0, 0.0, 0.03]
    w[:, 1:] = 1 / 3
    fig = figures.line_view(w, ["a", "b", "c"], query=0)
    lines = [t for t in fig.data if t.mode == "lines" and t.showlegend is False]
    strongest = max(lines, key=lambda t: t.opacity)
    assert strongest.opacity == pytest.approx(1.0) and strongest.line.width == pytest.approx(4.0)
    assert {y for t in lines if t.name != figures.FADED for y in list(t.y)[0::3]} == {0}
    faded = [t for t in lines if t.name == figures.FADED]
    assert {y for t in faded for y in list(t.y)[0::3]} == {1, 2} and max(t.opacity for t in faded) <= 0.12 + 1e-9
    one_head = figures.line_view(w, ["a", "b", "c"], heads=[1])
    assert {t.line.color for t in one_head.data if t.mode == "lines"} == {figures.HEAD_COLOURS[1]}
    words = next(t for t in fig.data if t.name == "queries")
    assert list(words.customdata) == [0, 1, 2] and words.text[0] == "<b>a</b>"


def test_difference_heatmap_is_b_minus_a_centred_on_zero():
    a = np.array([[0.7, 0.3], [0.5, 0.5]], np.float32)
    b = np.array([[1.0, 0.0], [0.2, 0.8]], np.float32)
    fig = figures.difference_heatmap(a, b, ["x", "y"])
    trace = fig.data[0]
    np.testing.assert_allclose(np.asarray(trace.z), b - a)
    assert (trace.zmin, trace.zmid, trace.zmax) == (pytest.approx(-0.3), 0, pytest.approx(0.3))
    np.testing.assert_array_equal(np.asarray(trace.customdata)[..., 0], a)
    np.testing.assert_array_equal(np.asarray(trace.customdata)[..., 1], b)


def test_matrices_zip_holds_each_matrix_as_csv_or_npy_in_order():
    import zipfile
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    w = np.array([[0.25, 0.75]], np.float32)
    matrices = [("Input X (GloVe)", Matrix(x, ["a", "b"], ["d0", "d1"], "token \\ dimension")), ("Weights", Matrix(w, ["a"], ["a", "b"]))]
    with zipfile.ZipFile(io.BytesIO(matrices_zip(matrices, "npy"))) as archive:
        assert archive.namelist() == ["01_input_x_glove.npy", "02_weights.npy"]
        np.testing.assert_array_equal(np.load(io.BytesIO(archive.read("01_input_x_glove.npy"))), x)
    with zipfile.ZipFile(io.BytesIO(matrices_zip(matrices, "csv"))) as archive:
        rows = list(csv.reader(io.StringIO(archive.read("02_weights.csv").decode())))
        assert rows == [["query \\ key", "a", "b"], ["a", "2.50000e-01", "7.50000e-01"]]
    with pytest.raises(ValueError):
        matrices_zip(matrices, "pickle")


def test_text_width_counts_wide_characters_double_and_reads_entities_and_tags_as_shown():
    assert figures.text_px("東京", 12) > figures.text_px("ab", 12) > 0
    assert figures.text_px("&amp;", 12) == figures.text_px("&", 12)  # one character on screen
    assert figures.text_px("Q<sub>0</sub>", 12) == figures.text_px("Q0", 12)
    assert figures.text_px("e\u0301", 12) == figures.text_px("e", 12)  # a combining accent takes no room
    assert figures.text_px("dog", 16) > figures.text_px("dog", 12)


def test_margins_grow_with_the_longest_label_title_and_font_and_keep_a_larger_one():
    w = np.full((3, 3), 1 / 3)
    short = figures.fit_margins(figures.attention_heatmap(w, ["a", "b", "c"])).layout.margin
    long = figures.fit_margins(figures.attention_heatmap(w, ["a", "b", "supercalifragilistic"])).layout.margin
    assert long.l > short.l and long.b > short.b  # the long word stands beside the rows and under the columns
    # a word cut to TICK_CHARS in its tick label takes no more room than the cut label
    cut = figures._short("supercalifragilistic")
    assert figures.text_px(cut, figures.FONT_PX) < long.l < figures.text_px("supercalifragilistic", figures.FONT_PX) + 60
    untitled = figures.fit_margins(figures.matrix_heatmap(w, ["a", "b", "c"], ["a", "b", "c"])).layout.margin
    assert untitled.l < short.l  # matrix_heatmap has no axis titles: "query" and "key" take room
    big = figures.attention_heatmap(w, ["a", "b", "c"]).update_yaxes(tickfont=dict(size=16), title_font=dict(size=16))  # as presenter mode
    assert figures.fit_margins(big).layout.margin.l > short.l
    assert short.r > 60  # the colour bar, its numbers and its title
    bare = figures.attention_heatmap(w, ["a", "b", "c"]).update_traces(showscale=False)
    assert figures.fit_margins(bare).layout.margin.r == 0
    roomy = figures.attention_heatmap(w, ["a", "b", "c"]).update_layout(margin=dict(b=300))
    assert figures.fit_margins(roomy).layout.margin.b == 300  # a builder's larger margin is kept
    grid = figures.fit_margins(figures.head_grid(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"]))
    assert grid.layout.margin.r > 60  # the grid's shared colour bar (a coloraxis) counts


def test_scatter_labels_never_run_into_each_other_and_the_heaviest_is_named():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(30, 2))  # (30, 2)
    points[1] = points[0] + 1e-3  # two keys on top of each other (the surnames' Smola and Werness)
    texts = [f"key number {i}" for i in range(30)]
    order = np.arange(30)[::-1]
    drawn, where = figures.place_labels(points, texts, order)
    assert drawn[29] == texts[29] and not (drawn[0] and drawn[1])  # the first placed always fits; one of the pair waits
    assert 0 < sum(bool(t) for t in drawn) < 30
    span = np.ptp(points, axis=0) * 1.15
    px = (points - points.min(0)) / span * np.array(figures.SCATTER_PLOT_PX)  # (30, 2)
    boxes = []
    for i, (text, place) in enumerate(zip(drawn, where)):
        if text:
            dx, dy = figures.LABEL_PLACES[place]
            w, h = figures.text_px(text, figures.FONT_PX) + 2, 1.3 * figures.FONT_PX
            cx, cy = px[i, 0] + dx * (w / 2 + 6), px[i, 1] + dy * (h / 2 + 6)
            boxes.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    fig = figures.pca_scatter(np.vstack([points, [[0, 0]]]), texts, "q", np.linspace(0, 1, 30))
    assert list(fig.data[0].hovertext) == texts  # every key still names itself on hover


def test_learned_sigma_axis_has_a_few_distinct_labels_spanning_what_is_drawn():
    sigmas = list(np.geomspace(0.5, 0.21, 60))  # σ falls over less than a decade
    fig = figures.bandwidth_training([1.0] * 60, sigmas, 80, grid_sigma=0.19)
    axis = fig.layout.yaxis2
    assert len(axis.tickvals) == 4 and len(set(axis.ticktext)) == 4
    assert min(axis.tickvals) == pytest.approx(0.19) and max(axis.tickvals) == pytest.approx(0.5)
    assert 10 ** axis.range[0] < 0.19 and 10 ** axis.range[1] > 0.5


def test_a_long_title_is_wrapped_to_what_its_figure_holds_and_given_room_above_the_plot():
    from attnviz.figures.layout import PLOT_PX, fit_margins, text_px, wrap_title

    title = "Layer 19, head 7: its score of “·antibiotics” from the last piece, taken apart  (6×6)"
    wrapped = wrap_title(title, "three_fifths")
    lines = wrapped.split("<br>")
    assert len(lines) > 1 and " ".join(lines) == title  # every word kept, in order
    assert all(text_px(line, 16) <= PLOT_PX["three_fifths"] + 80 for line in lines)
    assert wrap_title("Short", "full") == "Short"
    fig = fit_margins(go.Figure(go.Heatmap(z=[[0, 1]]), layout=dict(title=wrapped, margin=dict(t=40))))
    assert fig.layout.margin.t >= len(lines) * 1.36 * 16 + 30  # every line above the plot


def test_the_charts_toolbar_holds_the_camera_alone():
    """plotly's full toolbar (224 px) ran over the title of any chart narrower than about 500 px (e2e/test_layout
    measures it at 1440×900); the camera still saves the chart as the Download format says."""
    from appkit.present import chart_config

    config = chart_config("pca")
    assert config["modeBarButtons"] == [["toImage"]] and config["toImageButtonOptions"]["filename"] == "attnviz_pca"


def test_a_masked_cell_is_marked_as_well_as_grey():
    """WCAG 1.4.1: a masked cell is told by a mark, not by its colour alone; every other cell carries none."""
    w = np.array([[1.0, 0.0, 0.0], [0.4, 0.6, 0.0], [0.2, 0.3, 0.5]])
    allowed = np.tril(np.ones((3, 3), bool))  # causal
    masked = figures.attention_heatmap(w, ["a", "b", "c"], allowed=allowed).data[1]
    assert masked.name == "masked" and masked.texttemplate == "%{text}"
    marks = np.asarray(masked.text)  # (3, 3)
    assert ((marks == "×") == ~allowed).all() and ((marks == "") == allowed).all()
    n = 25  # above 24 rows or keys: grey only, and the hover still says "masked"
    big = figures.attention_heatmap(np.eye(n), [f"t{i}" for i in range(n)], allowed=np.tril(np.ones((n, n), bool))).data[1]
    assert big.text is None and "masked" in big.hovertemplate
