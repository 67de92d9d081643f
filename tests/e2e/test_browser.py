"""End-to-end: the default view, typing, a control, hover, every page and URL parameters in headless Chromium."""

import pytest

from driver import (NOT_RUNNING, SHOTS, atlases, caught_up, click_head, click_point, exceptions, live_select,
                    outside_requests, plots, settle, shown_value, url_has, wait_for_heatmap)

# Every page's first load without an error box, at 1280×800 and 1920×1080: test_layout (layout.py's checks).
PAGES = ["", "lesson", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads", "trained", "decoder",
         "long_text"]


def test_default_heatmap_is_drawn(server, page):
    page.goto(server)
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    assert trace["type"] == "heatmap" and trace["y"][:3] == ["#0 when", "#1 he", "#2 saw"]
    assert all(abs(sum(row) - 1) < 1e-4 for row in trace["w"])
    page.screenshot(path=str(SHOTS / "self_attention.png"))


def test_typing_a_sentence_redraws(server, page):
    page.goto(server)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("the cat sat on the mat")
    box.press("Control+Enter")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 6)
    assert trace["y"][1] == "#1 cat"


def test_changing_a_control_changes_the_drawn_data(server, page):
    page.goto(server)
    before = wait_for_heatmap(page, lambda t: len(t["y"]) == 16)["z"]
    page.get_by_text("Hard attention (one-hot argmax)").click()
    after = wait_for_heatmap(page, lambda t: t["z"] != before)["w"]
    assert all(sorted(row)[-1] == 1 and sum(row) == 1 for row in after)


def test_a_page_that_does_not_exist_says_so_before_the_home_page(server, page):
    page.goto(f"{server}/no_such_page?text=%3Cb%3Ex%3C/b%3E")
    dialog = page.get_by_role("dialog")
    dialog.wait_for(timeout=60_000)
    assert "Page not found" in dialog.inner_text()
    page.wait_for_selector(".av-root .av-figure", timeout=120_000)  # the home page, drawn behind the message
    assert "/no_such_page" not in page.url and not exceptions(page)


def test_url_parameters_reproduce_the_view(server, page):
    page.goto(f"{server}/?text=the+cat+sat&mask=causal&scoring=cosine")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    assert trace["z"][0][1] == 0 and trace["z"][0][2] == 0  # causal: the first word sees only itself
    assert shown_value(page, "stSelectbox", "Scoring function a(q, k)") == "cosine"
    assert url_has(page, "scoring=cosine", "mask=causal")


def test_clicking_a_word_in_the_line_view_shows_its_lines(server, page):
    page.goto(f"{server}/heads?text=the+cat+sat+on+the+mat")
    page.wait_for_selector(".js-plotly-plot")
    settle(page)
    click_point(page, 0, 0, 2)  # the query word "sat", left column
    assert shown_value(page, "stSelectbox", "Show the lines of") == "2 · sat"
    lines = [t for t in plots(page)[0] if t["type"] == "scatter"]
    assert lines and url_has(page, "focus=2")
    click_point(page, 0, 0, 2)  # again: every word's lines
    assert shown_value(page, "stSelectbox", "Show the lines of") == "every word"


def test_trained_atlas_opens_the_clicked_head(server, page):
    page.goto(f"{server}/trained?text=the+cat+sat")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert atlases(page) == [{"layers": 6, "heads": 12, "chosen": [0, 0], "drawn": atlases(page)[0]["drawn"]}]
    assert shown_value(page, "stSelectbox", "Layer") == "1" and shown_value(page, "stSelectbox", "Head") == "1"
    click_head(page, 2, 4)  # layer 3, head 5
    assert shown_value(page, "stSelectbox", "Layer") == "3" and shown_value(page, "stSelectbox", "Head") == "5"
    assert url_has(page, "layer=3", "head=5") and atlases(page)[0]["chosen"] == [2, 4]
    assert page.get_by_role("heading", name="Layer 3, head 5").count() == 1
    assert wait_for_heatmap(page, lambda t: t["y"][0].startswith("#0 [CLS]"))  # the chosen head, drawn in the browser
    assert not exceptions(page)


def test_no_request_leaves_the_app(server, page):
    """A classroom may have no internet: every page, its fonts and icons (the tab's icon too) come from the app."""
    outside = outside_requests(page, server)
    for path in PAGES:
        page.goto(f"{server}/{path}")
        page.wait_for_selector(".js-plotly-plot, .av-root .av-figure, .av-overview .av-atlas-figure, .av-barchart .av-bars", timeout=120_000)
        settle(page)
    icon = page.evaluate("() => Array.from(document.querySelectorAll('link[rel~=icon]'), link => link.href)")
    assert icon and all(href.startswith((server, "data:image/png;base64,")) for href in icon), icon  # ours, in the page
    assert outside == [], outside


def test_the_decoder_writes_on_reads_back_and_keeps_its_controls(server, page):
    """A sequence: two greedy next words, the first piece hidden, a head opened from the atlas, a new text typed, a
    sampled word, then away to another page and back: every step drawn, each row of the chosen head summing to 1."""
    page.goto(f"{server}/decoder?t=0&layer=2&head=4")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    box = page.get_by_role("textbox", name="Text")
    start = box.input_value()
    for _ in range(2):
        before = box.input_value()
        page.get_by_role("button", name="Next word (greedy)").click()
        page.wait_for_function("(b) => document.querySelector('textarea').value !== b", arg=before, timeout=60_000)
        caught_up(page)
    assert box.input_value().startswith(start) and len(box.input_value()) > len(start)
    head = wait_for_heatmap(page, lambda t: len(t["y"]) == 11)  # the chosen head follows the two new pieces
    assert head["view"]["query"] == 10 and head["view"]["mask"] == "causal"  # the newest piece is inspected
    live_select(page, "Mask", "causal_keys")  # the first piece hidden: the key labels become buttons
    page.locator(".av-root:not(.av-matrix) .av-col", has_text="When").first.click()
    head = wait_for_heatmap(page, lambda t: t["view"]["hide"] == [0])
    rows = head["w"][1:]  # the first row has no key left once the first piece is hidden
    assert all(abs(sum(row) - 1) < 1e-4 for row in rows) and all(row[0] == 0 for row in head["w"])
    assert url_has(page, "mask=causal_keys", "hide=0", "layer=2", "head=4")
    click_head(page, 5, 7)  # layer 6, head 8 from the atlas; the mask stays
    assert url_has(page, "layer=6", "head=8") and atlases(page)[0]["chosen"] == [5, 7]
    box.fill("A cat sat on the warm mat and")
    box.press("Control+Enter")
    settle(page)
    page.get_by_role("button", name="Next word (sample)").click()
    page.wait_for_function("() => document.querySelector('textarea').value.length > 'A cat sat on the warm mat and'.length",
                           timeout=60_000)
    caught_up(page)
    head = wait_for_heatmap(page, lambda t: t["view"]["hide"] == [0] and len(t["y"]) > 8)
    assert all(abs(sum(row) - 1) < 1e-4 for row in head["w"][1:])
    assert exceptions(page) == []
    page.goto(f"{server}/trained")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    page.go_back()
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert exceptions(page) == [] and page.locator('[data-testid="stException"]').count() == 0


NOTE = "still show the text before the last click"


def test_a_next_word_redraws_its_part_at_once_and_the_rest_once_the_clicks_pause(server, page):
    """Next word reruns the text, its bars and the new piece's row alone: until the clicks pause, the chosen head
    below keeps the text before the click and a note says so; then the whole page follows and the note goes. Text
    typed into the box reruns the whole page at once, with no note."""
    page.goto(f"{server}/decoder?t=0&text=the+dog+saw+the+cat")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    n = len(wait_for_heatmap(page, lambda t: True)["y"])
    box = page.get_by_role("textbox", name="Text")
    for _ in range(2):
        before = box.input_value()
        page.get_by_role("button", name="Next word (greedy)").click()
        page.wait_for_function("(b) => document.querySelector('textarea').value !== b", arg=before, timeout=60_000)
        page.wait_for_selector(".av-settle", timeout=60_000)
        page.wait_for_selector(NOT_RUNNING, timeout=60_000)
        assert NOTE in page.locator(".av-settle").inner_text()
        assert len(wait_for_heatmap(page, lambda t: True)["y"]) == n  # the chosen head: the text before the clicks
    caught_up(page)
    assert page.locator(".av-settle").count() == 0
    assert len(wait_for_heatmap(page, lambda t: True)["y"]) > n  # the chosen head reads the written pieces
    assert url_has(page, "text=the+dog+saw+the+cat")
    box.fill("A cat sat on the mat")
    box.press("Control+Enter")
    page.wait_for_function("() => document.querySelector('.av-atlas') && document.querySelector('.av-atlas')"
                           ".attnviz.drawn > 0", timeout=60_000)
    settle(page)
    head = wait_for_heatmap(page, lambda t: any("mat" in label for label in t["y"]))
    assert page.locator(".av-settle").count() == 0 and not any("dog" in label for label in head["y"])
    assert exceptions(page) == []


def test_a_deep_narrow_models_atlas_takes_the_width_in_columns_of_layers(server, page):
    """SmolLM2's 30 layers × 9 heads in one column used a third of the width: its layers go into two columns side by
    side, the thumbnails larger, and a click in the second column opens the head under the pointer."""
    page.goto(f"{server}/decoder?text=the+dog+saw+the+cat")
    page.wait_for_function("() => document.querySelector('.av-atlas') && document.querySelector('.av-atlas').attnviz",
                           timeout=120_000)
    settle(page)
    atlas = page.locator(".av-atlas").first
    assert atlas.evaluate("r => r.attnviz.columns") == 2
    canvas, root = atlas.locator("canvas").bounding_box(), atlas.bounding_box()
    assert canvas["width"] > 0.85 * root["width"]
    x, y = atlas.evaluate("r => { r.attnviz.showTile(24, 6); return r.attnviz.tileCentre(24, 6); }")  # layer 25,
    # head 7: in the second column
    page.mouse.click(x, y)
    settle(page)
    assert url_has(page, "layer=25", "head=7") and atlas.evaluate("r => r.attnviz.chosen") == [24, 6]
    assert not exceptions(page)
