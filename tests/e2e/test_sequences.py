"""What a person does in a row: type, click, type again, pick, upload, reload. Every widget must keep showing
the value the computation used, no exception box may appear, and the URL must describe what is on screen."""

import re
import time
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect

from driver import (
    choose, click_head, click_point, exceptions, live_cell, live_select, settle, shown_value, type_into, until, url_has,
    wait_for_heatmap, widget,
)

SENTENCES = ["the cat sat on the mat", "a dog ran to a tall tree", "birds fly"]


def url_params(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def url_becomes(page, expected: dict[str, str], timeout: float = 10) -> dict[str, str]:
    """The URL's parameters once they equal `expected`, or as they are after `timeout` seconds: the URL is
    updated at the end of a run, after its charts, so a drawn chart does not mean an updated URL yet."""
    deadline = time.time() + timeout
    while url_params(page) != expected and time.time() < deadline:
        page.wait_for_timeout(100)
    return url_params(page)


def first_rows(trace, words):
    return trace["y"][: len(words)] == [f"#{i} {w}" for i, w in enumerate(words)]


def test_retyping_then_clicking_on_self_attention(server, page):
    page.goto(server)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 16)

    type_into(page, "Sentence", SENTENCES[0])
    wait_for_heatmap(page, lambda t: first_rows(t, ["the", "cat"]))
    live_select(page, "Mask", "causal")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 6 and t["z"][0][1] == 0)
    assert exceptions(page) == [] and trace["view"]["query"] == 0
    page.mouse.click(*live_cell(page, 3, 0))  # the query "on"
    wait_for_heatmap(page, lambda t: t["view"]["query"] == 3)
    assert url_has(page, "query=3")

    type_into(page, "Sentence", SENTENCES[1])  # still has a position 3: the query keeps it
    trace = wait_for_heatmap(page, lambda t: first_rows(t, ["a", "dog"]))
    assert trace["view"]["query"] == 3 and "Query #3 to" in page.locator(".av-root .av-heading").text_content()
    page.get_by_text("Hard attention (one-hot argmax)").click()
    trace = wait_for_heatmap(page, lambda t: first_rows(t, ["a", "dog"]) and all(max(row) == 1 for row in t["w"]))
    assert exceptions(page) == [] and trace["view"]["query"] == 3
    assert url_has(page, "hard=1")

    type_into(page, "Sentence", SENTENCES[2])  # position 3 is gone: back to the first word
    wait_for_heatmap(page, lambda t: first_rows(t, ["birds", "fly"]))
    choose(page, "Scoring function a(q, k)", "cosine")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 2)
    assert exceptions(page) == []
    assert trace["view"]["query"] == 0 and trace["view"]["hard"] and trace["view"]["mask"] == "causal"
    assert shown_value(page, "stSelectbox", "Scoring function a(q, k)") == "cosine"
    expected = {"text": "birds fly", "mask": "causal", "hard": "1", "scoring": "cosine", "key": "0"}  # the clicked cell's key
    assert url_becomes(page, expected) == expected

    page.reload()  # the link alone reproduces the view
    assert wait_for_heatmap(page, lambda t: len(t["y"]) == 2)["z"] == trace["z"]
    assert page.get_by_role("textbox", name="Sentence").input_value() == "birds fly"
    assert exceptions(page) == []


def test_a_change_just_before_retyping_is_kept(server, page):
    """A change the browser has not yet sent (the person typed within the pause) survives the new sentence."""
    page.goto(f"{server}/?text=the+cat+sat")
    wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    live_select(page, "Colour scale", "absolute")
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("a dog ran home")
    box.press("Control+Enter")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 4)
    assert trace["view"]["scale"] == "absolute"
    assert url_has(page, "scale=absolute", "text=a+dog+ran+home")


def test_a_change_posted_while_the_new_sentence_runs_is_kept(server, page):
    """The pause's post (appkit/beacon) reaches the server only after the run for a new sentence took the posted views:
    the heatmap keeps the person's change over that run's view, and the link gets it, with the new sentence."""
    page.goto(f"{server}/?text=the+cat+sat")
    wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    settle(page)
    held = []
    page.route("**/_attnviz/view", lambda route: route.continue_() if held else held.append(route))  # the first
    live_select(page, "Colour scale", "absolute")
    deadline = time.time() + 10
    while not held and time.time() < deadline:  # the pause passed: the post is held on its way
        page.wait_for_timeout(100)
    assert held, "the pause posted nothing"
    type_into(page, "Sentence", "a dog ran home")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 4)
    assert trace["view"]["scale"] == "absolute"
    held[0].continue_()
    assert url_has(page, "scale=absolute", "text=a+dog+ran+home")
    live_select(page, "Mask", "causal")  # the next run takes the view: nothing changes back
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 4 and t["view"]["mask"] == "causal")
    settle(page)
    page.wait_for_timeout(1000)
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 4)
    assert trace["view"]["scale"] == "absolute" and trace["view"]["mask"] == "causal"
    assert url_has(page, "scale=absolute", "mask=causal", "text=a+dog+ran+home")
    page.reload()
    assert wait_for_heatmap(page, lambda t: len(t["y"]) == 4)["view"]["scale"] == "absolute"
    assert exceptions(page) == []


def test_hidden_keys_follow_a_shorter_sentence(server, page):
    page.goto(f"{server}/?text=the+cat+sat+on+the+mat&mask=keys&hide=1,4")
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 6)
    assert all(row[1] == 0 and row[4] == 0 for row in trace["z"])
    type_into(page, "Sentence", "a dog ran")  # key 4 no longer exists; key 1 still does
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    assert all(row[1] == 0 for row in trace["z"]) and trace["view"]["hide"] == [1]
    assert url_params(page)["hide"] == "1"
    live_select(page, "Mask", "causal")
    settle(page)
    assert exceptions(page) == []


def test_retyping_then_clicking_on_heads(server, page):
    page.goto(f"{server}/heads")
    page.wait_for_selector(".js-plotly-plot")
    type_into(page, "Sentence", SENTENCES[0], submit="Enter")
    choose(page, "Show the lines of", "3 · on")
    assert exceptions(page) == []

    type_into(page, "Sentence", SENTENCES[1], submit="Enter")
    assert shown_value(page, "stSelectbox", "Show the lines of") == "3 · to"
    widget(page, "stRadio", "Layer projections").get_by_text("random", exact=True).click()
    settle(page)
    assert exceptions(page) == []
    assert shown_value(page, "stSelectbox", "Show the lines of") == "3 · to"

    type_into(page, "Sentence", SENTENCES[2], submit="Enter")
    assert shown_value(page, "stSelectbox", "Show the lines of") == "every word"
    choose(page, "Show the lines of", "1 · fly")
    assert exceptions(page) == []
    expected = {"text": "birds fly", "focus": "1", "lmode": "random"}
    assert url_becomes(page, expected) == expected


def upload(page, path):
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    settle(page)


def test_uploading_vectors_keeps_every_other_control(server, page, tmp_path):
    words = "when he saw his owner , the dog was happy so wagged tail".split()
    vectors = tmp_path / "my_vectors.txt"
    vectors.write_text("".join(f"{w} {i % 3 + 1} {(-1) ** i} {i / 10}\n" for i, w in enumerate(words)))
    page.goto(f"{server}/?scoring=cosine&temp=0.5")
    glove_trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    before = url_params(page)

    widget(page, "stRadio", "Word vectors").get_by_text("Upload a file", exact=True).click()
    settle(page)
    upload(page, vectors)
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 16 and t["z"] != glove_trace["z"])
    assert exceptions(page) == []
    assert page.get_by_role("textbox", name="Sentence").input_value().startswith("When he saw his owner")
    assert shown_value(page, "stSelectbox", "Scoring function a(q, k)") == "cosine"
    assert trace["view"]["temp"] == 0.5
    assert url_becomes(page, before) == before

    page.get_by_text("Hard attention (one-hot argmax)").click()  # the next click applies the values shown
    hard = wait_for_heatmap(page, lambda t: t["z"] != trace["z"])
    assert all(max(row) == 1 for row in hard["w"])
    expected = {**before, "hard": "1"}
    assert url_becomes(page, expected) == expected
    assert exceptions(page) == []


def test_uploading_records_keeps_the_query(server, page, tmp_path):
    records = tmp_path / "people.csv"
    records.write_text("key,value\nZhang,Aston\nLipton,Zachary\nSmola,Alex\n")
    page.goto(f"{server}/kv_database?q=Lipto")
    page.wait_for_selector(".js-plotly-plot")
    choose(page, "Records", "Your own records (CSV)")
    assert page.get_by_role("textbox", name="Query").count() == 0 or \
        page.get_by_role("textbox", name="Query").input_value() == "Lipto"
    upload(page, records)
    page.wait_for_selector(".js-plotly-plot")
    assert exceptions(page) == []
    assert page.get_by_role("textbox", name="Query").input_value() == "Lipto"
    expected = {"q": "Lipto", "preset": "Your own records (CSV)"}
    assert url_becomes(page, expected) == expected
    assert "Lipton" in page.get_by_test_id("stDataFrame").first.inner_text() or page.get_by_text("Lipton").count() > 0


def test_switching_pages_and_back_keeps_the_view(server, page):
    page.goto(f"{server}/?text=the+cat+sat")
    wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    choose(page, "Scoring function a(q, k)", "cosine")
    page.mouse.click(*live_cell(page, 2, 0))  # the query "sat"
    assert url_has(page, "query=2")
    page.get_by_test_id("stSidebarNav").get_by_text("Heads and layers").click()
    page.get_by_role("textbox", name="Sentence").wait_for()
    settle(page)
    # its own text: the box may show before its value does while the page switches, so wait for the value
    expect(page.get_by_role("textbox", name="Sentence")).to_have_value(re.compile("^When he saw"), timeout=20_000)
    page.get_by_test_id("stSidebarNav").get_by_text("Self-attention").click()
    trace = wait_for_heatmap(page, lambda t: len(t["y"]) == 3)
    settle(page)
    assert shown_value(page, "stSelectbox", "Scoring function a(q, k)") == "cosine"
    assert trace["view"]["query"] == 2
    expected = {"text": "the cat sat", "scoring": "cosine", "query": "2", "key": "0"}  # the clicked cell (sat, the)
    assert url_becomes(page, expected) == expected
    assert exceptions(page) == []


def test_retyping_clicking_and_switching_pages_on_the_trained_model(server, page):
    page.goto(f"{server}/trained")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    type_into(page, "Sentence", "the dog wagged his tail", submit="Enter")  # 7 pieces
    click_head(page, 1, 3)  # layer 2, head 4, in the atlas
    assert shown_value(page, "stSelectbox", "Layer") == "2" and shown_value(page, "stSelectbox", "Head") == "4"
    page.mouse.click(*live_cell(page, 3, 1))  # the query "wa", on the head's heatmap
    wait_for_heatmap(page, lambda t: t.get("live") and t["view"]["query"] == 3)
    assert url_has(page, "query=3")
    assert exceptions(page) == []

    type_into(page, "Sentence", "hello", submit="Enter")  # 3 pieces: position 3 no longer exists; the head stays
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 3 and t["view"]["query"] == 0)
    assert shown_value(page, "stSelectbox", "Layer") == "2" and shown_value(page, "stSelectbox", "Head") == "4"
    widget(page, "stRadio", "Read as").get_by_text("words", exact=True).click()
    settle(page)
    assert exceptions(page) == []

    page.get_by_role("link", name="Heads and layers").click()
    page.wait_for_url("**/heads**")
    settle(page)
    page.get_by_role("link", name="Trained model").click()
    page.wait_for_url("**/trained**")
    settle(page)
    expected = {"text": "hello", "layer": "2", "head": "4", "unit": "words", "key": "1"}  # the clicked cell's key, still there
    assert url_becomes(page, expected) == expected
    assert shown_value(page, "stSelectbox", "Head") == "4"
    assert exceptions(page) == []


COMPARE_SIDES = """() => { const roots = Array.from(document.querySelectorAll('.av-compare .av-root'));
    return [0, 1, 2].map(i => roots[i] && roots[i].attnviz ? roots[i].attnviz.rows.length : 0); }"""  # A, B, B − A


def compare_sizes(page, expected, timeout=20):
    deadline = time.time() + timeout
    while page.evaluate(COMPARE_SIDES) != expected and time.time() < deadline:
        page.wait_for_timeout(200)
    return page.evaluate(COMPARE_SIDES)


def test_compare_mode_through_a_sequence(server, page):
    """Compare on, a B setting, retype A, give B its own sentence, clear it, off, another page and back."""
    page.goto(server)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 16)
    page.get_by_text("Compare A | B").click()
    settle(page)
    assert compare_sizes(page, [16, 16, 16]) == [16, 16, 16]
    assert url_becomes(page, {"cmp": "1"}) == {"cmp": "1"}
    choose(page, "Scoring (B)", "cosine")
    type_into(page, "Sentence", SENTENCES[0])
    assert compare_sizes(page, [6, 6, 6]) == [6, 6, 6]  # B follows A's new sentence
    assert url_becomes(page, {"cmp": "1", "b_scoring": "cosine", "text": SENTENCES[0]})["b_scoring"] == "cosine"
    type_into(page, "Sentence B (empty: A's sentence)", SENTENCES[2], submit="Enter")
    assert compare_sizes(page, [6, 2, 0]) == [6, 2, 0]  # different tokens: no difference drawn
    assert shown_value(page, "stSelectbox", "Scoring (B)") == "cosine"
    type_into(page, "Sentence B (empty: A's sentence)", "", submit="Enter")
    assert compare_sizes(page, [6, 6, 6]) == [6, 6, 6]
    page.get_by_text("Compare A | B").click()
    settle(page)
    wait_for_heatmap(page, lambda t: first_rows(t, ["the", "cat"]))
    assert page.evaluate(COMPARE_SIDES) == [0, 0, 0]
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Batches").click()
    page.wait_for_url("**/batches**")
    settle(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Self-attention").click()
    settle(page)
    page.get_by_text("Compare A | B").click()
    settle(page)
    assert compare_sizes(page, [6, 6, 6]) == [6, 6, 6]  # B's setting was kept while compare was off
    assert shown_value(page, "stSelectbox", "Scoring (B)") == "cosine"
    assert exceptions(page) == []


def test_the_lesson_keeps_its_sentence_and_step_through_a_sequence(server, page):
    """Type a sentence on step 7, pick a query, Next, Previous, follow the link to the full page and come back."""
    page.goto(f"{server}/lesson?step=7")
    settle(page)
    type_into(page, "Sentence", SENTENCES[0], submit="Enter")
    choose(page, "Query word", "2 · sat")
    assert url_becomes(page, {"step": "7", "text": SENTENCES[0], "query": "2"}) == {"step": "7", "text": SENTENCES[0], "query": "2"}
    for _ in range(2):  # past step 8, which has a sentence of its own, to step 9
        page.get_by_role("button", name="Next").click()
        settle(page)
    assert page.locator("h2").first.inner_text().startswith("9. ")
    assert page.get_by_role("textbox", name="Sentence", exact=True).input_value() == SENTENCES[0]
    for _ in range(2):
        page.get_by_role("button", name="Previous").click()
        settle(page)
    assert shown_value(page, "stSelectbox", "Query word") == "2 · sat"
    page.get_by_role("link", name="Explore this in Self-attention").click()
    page.wait_for_url(lambda url: "/lesson" not in url)
    wait_for_heatmap(page, lambda t: len(t["y"]) >= 2)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Lesson").click()
    settle(page)
    assert page.locator("h2").first.inner_text().startswith("7. ")
    assert shown_value(page, "stSelectbox", "Query word") == "2 · sat"
    assert exceptions(page) == []


WALK_TITLES = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
    title: String(gd.layout.title.text).replace(/<[^>]+>/g, ''), y: Array.from(gd._fullData[0].y || [])}))"""


def walk_shows(page, predicate, timeout=30):
    """The walk's charts (the page's plotly charts: the heatmap and its bars are the browser's) once `predicate` holds."""
    return until(page, WALK_TITLES, predicate, timeout, 250, "the walk never showed the expected charts")


def open_tab(page, name: str):
    page.get_by_role("tab", name=name, exact=True).click()
    settle(page)


def test_the_walk_keeps_its_step_through_a_sequence(server, page):
    """Open the walk, pick the weights' tab, change τ (which adds a step before it), retype, go to every step, reload."""
    page.goto(f"{server}/?text=the+cat+sat&steps=1")
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Input X"))
    open_tab(page, "8 · α")
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Weights"))
    assert url_has(page, "walk=8")

    page.get_by_role("slider", name="Temperature τ (log scale)").press("ArrowRight")  # τ = 2: a step S/τ before α
    settle(page)
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Weights"))
    assert page.get_by_role("tab", name="9 · α", exact=True).get_attribute("aria-selected") == "true"
    assert url_has(page, "walk=9", "temp=2")

    type_into(page, "Sentence", "a dog ran to a tree")
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Weights") and c[0]["y"][:2] == ["#0 a", "#1 dog"])
    open_tab(page, "All steps")
    charts = walk_shows(page, lambda c: len(c) == 10)
    assert [c["title"].split(" ")[0] for c in charts][6:8] == ["Temperature", "Mask"]
    assert url_has(page, "walk=0")
    open_tab(page, "2 · Q")
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Q "))

    page.reload()  # the link alone reopens the walk at the same step
    walk_shows(page, lambda c: len(c) == 1 and c[0]["title"].startswith("Q ") and c[0]["y"][:2] == ["#0 a", "#1 dog"])
    assert exceptions(page) == []


def paste(page, label: str, text: str, textbox: bool = True):
    box = page.get_by_role("textbox", name=label, exact=True)
    box.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)  # as a paste arrives: the browser's own length limit applies to it
    box.press("Control+Enter" if textbox else "Enter")
    settle(page)
    return box


def test_a_paste_over_a_boxs_limit_keeps_its_first_part_and_says_so(server, page):
    """Decoder (4,000 characters) and Trained model (20,000): the paste is not dropped, its first part stays, a
    warning gives both lengths, and a paste within the limit then reads as it is, with no warning left over."""
    for path, label, limit, area in (("decoder", "Text", 4_000, True), ("trained", "Sentence", 20_000, False)):
        page.goto(f"{server}/{path}")
        page.wait_for_selector(".av-atlas canvas", timeout=180_000)
        settle(page)
        long = ("the dog was happy " * (limit // 10))[: limit + 1234]
        box = paste(page, label, long, area)
        assert box.input_value() == long[:limit]
        warning = page.get_by_test_id("stAlertContentWarning").first.inner_text()
        assert f"has {limit + 1234:,} characters" in warning and f"keeps the first {limit:,}" in warning
        main = page.get_by_test_id("stMain").inner_text()
        assert f"{limit:,} / {limit:,} characters" in main and "1000000" not in main  # the real limit, counted
        assert exceptions(page) == []
        box = paste(page, label, "the cat sat on the mat", area)
        assert box.input_value() == "the cat sat on the mat"
        page.wait_for_selector(".av-atlas canvas", timeout=60_000)
        assert "characters; this page reads at most" not in page.get_by_test_id("stMain").inner_text()
