"""The interactive heatmap in Chromium: τ, hard, the mask, the colour scale, the palette and the query redraw in the
browser with no message to the server; once the person pauses, one message syncs the view, after which the link
and the downloads hold what is drawn, and a reload of that link draws the same numbers."""

import csv
import io
import math
import re
import time

from driver import SHOTS, exceptions, live_cell, live_select, settle, until, url_has, wait_for_heatmap


def count_sent(page) -> list[float]:
    """The times of the websocket messages the page sends from now on (each one asks the server for a run)."""
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(time.time())))
    return sent


SYNC_S = 0.4  # heatmap_draw.mjs's SYNC_MS: the pause after which the heatmap sends its view


def changes(sent: list[float], *steps) -> tuple[int, float, int]:
    """Make each of `steps` (callables) in turn: (messages sent before them, when the last ended, the driver's own
    pauses). The heatmap sends its view once the person pauses for SYNC_S, so changes made faster than that send
    nothing until the last; on a loaded machine a step of the driver's can itself take longer than a pause, and then a
    message after it is the right answer."""
    start, marks = len(sent), [time.time()]
    for step in steps:
        step()
        marks.append(time.time())
    return start, marks[-1], sum(b - a >= SYNC_S for a, b in zip(marks, marks[1:]))


def sent_before(sent: list[float], start: int, end: float) -> int:
    """Messages sent since `start` and seen before `end` (seen late, never early: the count is never too high)."""
    return len([t for t in sent[start:] if t < end])


def downloaded_npy(page, key: str):
    """The .npy from the Download menu of the chart keyed `key`, read back."""
    import numpy as np

    page.locator(f".st-key-downloads_{key} button").first.click()
    with page.expect_download() as download:
        page.locator(f".st-key-npy_{key} button:visible").click()
    page.keyboard.press("Escape")  # the menu closes, and the pointer leaves: no tooltip left over the next button
    page.mouse.move(0, 0)
    return np.load(download.value.path(), allow_pickle=False)


def burst(page):
    """Twenty changes as a person makes them: τ steps, hard on and off, masks, scales, a palette, cells and keys."""
    tau = page.get_by_role("slider", name="Temperature τ (log scale)")
    for key in ["ArrowLeft"] * 4 + ["ArrowRight"] * 2:
        tau.press(key)
    page.get_by_text("Hard attention (one-hot argmax)").click()
    page.get_by_text("Hard attention (one-hot argmax)").click()
    for mask in ("causal", "keys", "causal"):
        live_select(page, "Mask", mask)
    for scale in ("absolute", "sqrt", "max"):
        live_select(page, "Colour scale", scale)
    live_select(page, "Palette", "cividis")
    page.mouse.click(*live_cell(page, 5, 2))
    page.locator(".av-root .av-figure").focus()
    for key in ("ArrowDown", "ArrowDown", "ArrowUp"):
        page.keyboard.press(key)


def count_posts(page) -> list[str]:
    """The views the page posts from now on to the server's view beacon (appkit/beacon: no page run)."""
    posted = []
    page.on("request", lambda r: posted.append(r.post_data) if r.method == "POST" and "/_attnviz/view" in r.url else None)
    return posted


def test_a_burst_of_changes_asks_the_server_nothing_until_the_pause(server, page):
    """On Self-attention no view drawn by the server depends on the heatmap's, so the pause reruns nothing: it posts
    the view (one small HTTP request, no websocket message) and the browser writes the link; the next run, for a new
    sentence, keeps the view."""
    page.goto(server)
    before = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    settle(page)
    sent = count_sent(page)
    page.reload()
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    settle(page)
    posted = count_posts(page)
    start = len(sent)
    burst(page)
    during = len(sent) - start
    drawn = wait_for_heatmap(page, lambda t: t["view"]["query"] == 6)
    assert during == 0, f"{during} messages sent during the burst"
    assert drawn["view"] == {"temp": 0.2, "hard": False, "mask": "causal", "hide": [], "scale": "max", "palette": "cividis",
                             "query": 6, "key": 2}  # the clicked cell's key stays as the arrows move the query
    assert drawn["w"] != before["w"] and drawn["w"][0][1] == 0  # causal: the first word sees only itself
    assert url_has(page, "temp=0.2", "mask=causal", "scale=max", "palette=cividis", "query=6")
    settle(page)
    assert len(sent) - start == 0, "the pause sent no websocket message (no page run)"
    # The pause posts the view once. A loaded machine may stall mid-burst past the pause's wait, and then posts that
    # view too (one CI run did, after the τ steps): each such post is a pause, never a page run (checked above).
    assert posted and '"temp":0.2' in posted[-1] and '"query":6' in posted[-1], posted
    assert len(posted) <= 3, posted
    assert not exceptions(page)
    # The CSV button saves the weights drawn (the server's torch engine against the browser's math).
    with page.expect_download() as download:
        page.locator(".av-root .av-button", has_text="CSV").first.click()
    rows = list(csv.reader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))[1:]
    downloaded = [[float(v) for v in row[1:]] for row in rows]
    assert max(abs(a - b) for r, s in zip(downloaded, drawn["w"]) for a, b in zip(r, s)) < 1e-5
    # A reload of the link draws the same numbers.
    link = page.url
    page.goto(link)
    again = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    assert again["view"] == drawn["view"] and again["w"] == drawn["w"] and again["z"] == drawn["z"]
    page.screenshot(path=str(SHOTS / "self_attention_interactive.png"))


def test_a_new_sentence_is_drawn_without_a_run_and_the_page_follows(server, page):
    """While nothing else on the page depends on the sentence, the box posts it and the heatmap redraws from the
    server's answer: the page sends Streamlit nothing, and the link follows. A part opened afterwards (Inside a score)
    takes apart the new sentence, not the one of the page's last run; a reload keeps it."""
    sent = count_sent(page)  # before the page opens its websocket
    page.goto(server)
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    settle(page)
    assert sent, "the page's runs were not seen"
    before = len(sent)
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("the cat sat on the mat today")
    box.press("Control+Enter")
    typed = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 7)
    assert [row.split(" ")[-1] for row in typed["y"]][:3] == ["the", "cat", "sat"]
    assert url_has(page, "text=the+cat+sat+on+the+mat+today")
    page.wait_for_timeout(1500)  # longer than the heatmap's pause: a view it had to send would have gone
    assert len(sent) == before, "the new sentence asked the server for a run"
    page.get_by_text("Inside a score").first.click()
    page.get_by_text("Query #0 the (q) and key #").first.wait_for(timeout=30_000)
    settle(page)
    assert box.input_value() == "the cat sat on the mat today"
    page.reload()
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 7)
    box = page.get_by_role("textbox", name="Sentence")
    assert box.input_value() == "the cat sat on the mat today"
    settle(page)
    before = len(sent)
    box.fill("a qzxjvwk sat")  # an unknown word: the page draws its warning, so the box asks for a run
    box.press("Control+Enter")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 3)
    page.get_by_text("not in the vocabulary").first.wait_for(timeout=30_000)
    assert len(sent) > before and url_has(page, "text=a+qzxjvwk+sat")


def test_a_paused_view_survives_a_new_sentence_and_a_page_switch(server, page):
    """The view a pause posted (no run) is what the next run keeps: a new sentence keeps τ and the mask, and so does
    a visit to another page and back."""
    page.goto(server)
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    settle(page)
    tau = page.get_by_role("slider", name="Temperature τ (log scale)")
    for key in ("ArrowRight", "ArrowRight"):
        tau.press(key)
    live_select(page, "Mask", "causal")
    assert url_has(page, "temp=5.0", "mask=causal")
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("the cat sat on the mat today")
    box.press("Control+Enter")
    typed = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 7)
    assert typed["view"]["temp"] == 5.0 and typed["view"]["mask"] == "causal"
    assert url_has(page, "temp=5.0", "mask=causal", "text=the+cat")
    page.get_by_role("link", name="Scoring functions").first.click()
    settle(page)
    page.get_by_role("link", name="Self-attention").first.click()
    back = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 7)
    assert back["view"]["temp"] == 5.0 and back["view"]["mask"] == "causal"
    assert not exceptions(page)


def test_a_click_a_label_and_the_keys_choose_the_query(server, page):
    page.goto(f"{server}/?text=the+cat+sat+on+the+mat")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 6)
    figure = page.locator(".av-root .av-figure")
    assert figure.get_attribute("tabindex") == "0" and figure.get_attribute("aria-label").startswith("Attention weights, 6 queries")
    page.mouse.click(*live_cell(page, 3, 1))
    assert wait_for_heatmap(page, lambda t: t["view"]["query"] == 3)
    assert "Query #3 on" in page.locator(".av-root .av-heading").text_content()
    page.locator(".av-root .av-row", has_text="cat").click()
    wait_for_heatmap(page, lambda t: t["view"]["query"] == 1)
    figure.focus()
    page.keyboard.press("End")
    trace = wait_for_heatmap(page, lambda t: t["view"]["query"] == 5)
    bars = [v.text_content() for v in page.locator(".av-root .av-bar-value").all()]
    assert all(re.fullmatch(r"0\.\d{4}|<0\.0001", b) for b in bars), bars  # one format: 4 decimals from the largest
    for text, weight in zip(bars, trace["w"][5]):  # the inspector's bars are the chosen row
        assert weight < 1e-4 if text.startswith("<") else abs(float(text) - weight) <= 5e-5 + 1e-7
    entropy = -sum(w * math.log(w) for w in trace["w"][5] if w > 0)
    assert f"H = {entropy:.3f} nats" in page.locator(".av-root .av-entropy").text_content()
    assert url_has(page, "query=5")


def test_hovering_a_cell_names_it_and_gives_its_numbers(server, page):
    page.goto(server)
    trace = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 16)
    page.mouse.move(*live_cell(page, 6, 2))  # query "the" (#6), key "saw" (#2)
    tip = page.locator(".av-root .av-tip")
    tip.wait_for(state="visible")
    lines = tip.locator("div").all_text_contents()
    weight = float(lines[2].removeprefix("weight: "))
    assert lines[:2] == ["query #6 the", "key #2 saw"] and abs(weight - trace["w"][6][2]) <= 5e-4 * trace["w"][6][2]
    assert lines[3].startswith("score: ")

    # A new sentence under a still mouse: the old hover, which names the old sentence's words, goes with it.
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("a cat sat on the mat")
    box.press("Control+Enter")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 6)
    assert not tip.is_visible()


def test_hidden_keys_and_a_fully_masked_row(server, page):
    page.goto(f"{server}/?text=a+dog+ran&mask=keys&hide=0")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 3)
    page.locator(".av-root .av-col", has_text="dog").click()  # under the hide-keys mask a key's label hides it
    page.locator(".av-root .av-col", has_text="ran").click()
    trace = wait_for_heatmap(page, lambda t: t["view"]["hide"] == [0, 1, 2])
    assert trace["w"] == [[0, 0, 0]] * 3  # every key hidden: zero rows, never NaN
    assert "3 query row(s) have every key masked" in page.locator(".av-root .av-message").text_content()
    page.mouse.move(*live_cell(page, 0, 0))
    assert "masked: weight 0" in page.locator(".av-root .av-tip").text_content()
    # The keyboard: a key's label is a button; Enter shows the key again, and the label keeps the focus.
    page.locator(".av-root .av-col[data-col='0']").focus()
    page.keyboard.press("Enter")
    trace = wait_for_heatmap(page, lambda t: t["view"]["hide"] == [1, 2])
    assert trace["w"][0] == [1, 0, 0] and page.evaluate("() => document.activeElement.dataset.col") == "0"
    page.keyboard.press("Enter")
    wait_for_heatmap(page, lambda t: t["view"]["hide"] == [0, 1, 2])
    assert url_has(page, "hide=0%2C1%2C2") or url_has(page, "hide=0,1,2")
    assert page.locator(".av-root .av-col[role=button]").count() == 3


def test_a_key_label_that_hides_its_key_is_a_24_px_target(server, page):
    """WCAG 2.5.8: under "hide keys" each of 40 keys has a band at least 24 × 24 px that a click hides it by; the
    figure pans inside itself, and the page does not scroll sideways."""
    words = ("when he saw his owner the dog was happy so he wagged his tail and ran to the door " * 3).split()[:40]
    page.goto(f"{server}/?text={'+'.join(words)}&mask=keys")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 40)
    targets = page.locator(".av-root:not(.av-matrix) .av-col-target")
    boxes = [targets.nth(j).bounding_box() for j in range(targets.count())]
    assert len(boxes) == 40 and min(b["width"] for b in boxes) >= 24 and min(b["height"] for b in boxes) >= 24
    assert all(a["x"] + a["width"] <= b["x"] + 0.01 for a, b in zip(boxes, boxes[1:]))  # side by side, none overlaps
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    figure = page.locator(".av-root:not(.av-matrix) .av-figure").first
    figure.evaluate("(f) => f.scrollLeft = f.scrollWidth")  # the last key's band, panned into view, hides it
    targets.nth(39).click()
    wait_for_heatmap(page, lambda t: t["view"]["hide"] == [39])
    page.mouse.move(*live_cell(page, 2, 38))  # a panned figure's hover names the cell under the pointer
    assert page.locator(".av-root .av-tip div").nth(1).text_content() == f"key #38 {words[38]}"
    live_select(page, "Mask", "none")  # no buttons: the figure fits again
    wait_for_heatmap(page, lambda t: t["view"]["mask"] == "none")
    assert targets.count() == 0 and figure.evaluate("(f) => f.scrollWidth <= f.clientWidth")


def test_tokens_are_shown_as_text_never_as_html(server, page):
    page.goto(server)
    wait_for_heatmap(page, lambda t: t.get("live"))
    box = page.get_by_role("textbox", name="Sentence")
    box.fill('<img src=x onerror="window.hacked=1"> <script>window.hacked=2</script> dog')
    box.press("Control+Enter")
    trace = wait_for_heatmap(page, lambda t: t.get("live") and any("<" in y for y in t["y"]))
    assert page.locator(".av-root img, .av-root script").count() == 0
    assert page.evaluate("() => window.hacked === undefined")
    assert any(label.startswith("<") for label in page.locator(".av-root .av-row").all_text_contents()), trace["y"]


def test_one_token_and_512_tokens(server, page):
    page.goto(f"{server}/?text=dog")
    one = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 1)
    assert one["w"] == [[1]]
    assert "1 query × 1 key." in page.locator(".av-root .av-figure").get_attribute("aria-label")
    assert page.get_by_text("Attention weights α: 1 query × 1 key").count() == 1
    words = "when he saw his owner the dog was happy so he wagged his tail".split()
    page.goto(f"{server}/?text=" + "+".join(words[i % len(words)] for i in range(512)) + "&mask=causal")
    long = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 512, timeout=60)
    assert all(abs(sum(row) - 1) < 1e-9 for row in long["w"]) and long["w"][0][1] == 0
    labels = page.locator(".av-root .av-col").count()
    assert 0 < labels < 512  # thinned to the room the width holds
    assert not exceptions(page)


def test_png_at_3x_and_svg_downloads(server, page):
    page.goto(f"{server}/?text=the+cat+sat")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 3)
    width = page.evaluate("() => document.querySelector('.av-root .av-overlay').getAttribute('width')")
    with page.expect_download() as png:
        page.get_by_role("button", name="PNG (3×)").click()
    data = open(png.value.path(), "rb").read()
    assert png.value.suggested_filename == "attnviz_heatmap.png" and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 3 * int(width)  # the IHDR's width: 3× the figure
    with page.expect_download() as svg:
        page.get_by_role("button", name="SVG").click()
    text = open(svg.value.path(), encoding="utf-8").read()
    assert svg.value.suggested_filename == "attnviz_heatmap.svg" and text.startswith("<svg")
    assert text.count("<rect") >= 9 and ">cat<" in text and "linearGradient" in text


def test_the_trained_models_chosen_head_redraws_in_the_browser(server, page):
    """The Trained model's chosen head: the browser's softmax of the head's scores is the model's own weights at τ = 1;
    τ, the mask and the query change it with no message until the pause; then the link and the .npy hold what is drawn."""
    import numpy as np

    from attnviz import models

    text = "the dog wagged his tail"
    sent = count_sent(page)
    page.goto(f"{server}/trained?text={text.replace(' ', '+')}&layer=2&head=4")
    model = models.load("minilm").run(text).weights[1, 3]  # (8, 8): [CLS] the dog wa ##gged his tail [SEP]
    first = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 8)
    assert np.abs(np.array(first["w"]) - model).max() < 1e-5
    assert first["y"][3] == "#3 wa" and first["y"][4] == "#4 ##gged"
    settle(page)
    tau = page.get_by_role("slider", name="Temperature τ (log scale)")
    start, end, pauses = changes(sent, lambda: tau.press("ArrowLeft"), lambda: live_select(page, "Mask", "causal"),
                                 lambda: page.mouse.click(*live_cell(page, 3, 1)))
    drawn = wait_for_heatmap(page, lambda t: t["view"]["query"] == 3 and t["view"]["mask"] == "causal")
    assert sent_before(sent, start, end) <= pauses
    assert drawn["view"]["temp"] == 0.5 and drawn["w"][1][2] == 0  # causal: "the" does not see "dog"
    assert url_has(page, "temp=0.5", "mask=causal", "query=3")
    settle(page)
    assert 1 <= len(sent) - start <= pauses + 1  # after the last change, one message with the whole view
    saved = downloaded_npy(page, "head_map")
    assert saved.shape == (8, 8) and np.abs(saved - np.array(drawn["w"])).max() < 1e-6
    assert not exceptions(page)


def test_heads_average_and_maximum_redraw_in_the_browser(server, page):
    """Heads and layers: every head's scores go to the browser once; switching between the average and the maximum over
    heads, and τ, redraw there with the engine's numbers; the download then holds what is drawn."""
    import numpy as np

    from attnviz.embeddings import embed, load_glove, tokenize
    from attnviz.sentence import Config, run

    text = "the cat sat on the mat"
    sent = count_sent(page)
    page.goto(f"{server}/heads?text={text.replace(' ', '+')}&heads=4&seed=2")
    first = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 6)
    x = embed(tokenize(text), load_glove()).vectors  # (6, 50)
    engine = run(x, Config(projection="random", heads=4, d_k=16, seed=2))
    assert np.abs(np.array(first["w"]) - engine.mean_weights).max() < 1e-6
    settle(page)
    start, end, pauses = changes(sent, lambda: live_select(page, "Over heads", "max"),
                                 lambda: page.get_by_role("slider", name="Temperature τ (log scale)").press("ArrowRight"))
    drawn = wait_for_heatmap(page, lambda t: t["view"].get("over") == "max" and t["view"]["temp"] == 2.0)
    assert sent_before(sent, start, end) <= pauses
    at_two = run(x, Config(projection="random", heads=4, d_k=16, seed=2, temperature=2.0))
    assert np.abs(np.array(drawn["w"]) - at_two.weights.max(0)).max() < 1e-6
    assert "Maximum over 4 heads" in page.locator(".av-root .av-title").text_content()
    page.mouse.move(*live_cell(page, 2, 1))
    assert "per head:" in page.locator(".av-root .av-tip").text_content()
    assert url_has(page, "over=max", "temp=2.0")
    settle(page)
    assert 1 <= len(sent) - start <= pauses + 1
    assert np.abs(downloaded_npy(page, "summary") - np.array(drawn["w"])).max() < 1e-6
    assert not exceptions(page)


def test_a_long_inputs_zoom_window_redraws_in_the_browser(server, page):
    """Over 512 tokens the server draws the overview, and the zoom window's rows come to the browser with every key:
    τ, the causal mask and the query redraw there, each row normalised over the whole sentence (the engine's rows of
    the whole matrix); after the pause one message syncs the view and the window's download holds what is drawn."""
    import numpy as np

    from attnviz.embeddings import embed, load_glove, tokenize
    from attnviz.sentence import Config, run

    glove = load_glove()
    text = " ".join([w for w in glove.index_to_key[:2000] if w.isalpha()][:600])  # 600 different words
    sent = count_sent(page)
    page.goto(f"{server}/?text={text.replace(' ', '+')}&zr=256&zc=192&zw=64")
    first = wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 64, timeout=60)
    x = embed(tokenize(text), glove).vectors  # (600, 50)
    assert x.shape == (600, 50)
    window = (slice(256, 320), slice(192, 256))
    assert np.abs(np.array(first["w"]) - run(x, Config()).mean_weights[window]).max() < 1e-6
    settle(page)
    start, end, pauses = changes(
        sent, lambda: page.get_by_role("slider", name="Temperature τ (log scale)").press("ArrowLeft"),
        lambda: live_select(page, "Mask", "causal"), lambda: page.mouse.click(*live_cell(page, 3, 5)))
    drawn = wait_for_heatmap(page, lambda t: t["view"]["query"] == 259 and t["view"]["mask"] == "causal")
    assert sent_before(sent, start, end) <= pauses
    engine = run(x, Config(temperature=0.5, mask="causal")).mean_weights  # (600, 600)
    assert np.abs(np.array(drawn["w"]) - engine[window]).max() < 1e-6
    full = np.array(page.evaluate("() => document.querySelector('.av-root').attnviz.full()"))  # (64, 600)
    assert np.abs(full - engine[256:320]).max() < 1e-6 and full[3, 260:].sum() == 0  # causal from position 259
    shown = np.array(drawn["z"])  # per row: ÷ the whole row's largest, which may lie outside the window
    assert np.abs(shown - engine[window] / engine[256:320].max(1, keepdims=True)).max() < 1e-6
    assert (engine[window].max(1) < engine[256:320].max(1)).any()  # where the window's own largest would differ
    assert "Query #259" in page.locator(".av-root .av-heading").text_content()
    words = text.split()  # the window's labels name the sentence's positions, since words recur in a long input
    assert page.locator('.av-root .av-col[data-col="0"]').text_content() == f"#192 {words[192]}"
    assert page.locator(".av-root .av-row.av-chosen").text_content() == f"#259 {words[259]}"
    assert url_has(page, "temp=0.5", "mask=causal", "query=259")
    settle(page)
    assert 1 <= len(sent) - start <= pauses + 1  # after the last change, one message with the whole view
    assert np.abs(downloaded_npy(page, "zoom") - np.array(drawn["w"])).max() < 1e-6
    live_select(page, "Mask", "keys")
    page.locator('.av-root .av-col[data-col="0"]').click()  # the window's first key is the sentence's key 192
    wait_for_heatmap(page, lambda t: t["view"]["hide"] == [192])
    full = np.array(page.evaluate("() => document.querySelector('.av-root').attnviz.full()"))  # (64, 600)
    assert (full[:, 192] == 0).all() and np.abs(full.sum(1) - 1).max() < 1e-9
    assert url_has(page, "mask=keys", "hide=192")
    assert not exceptions(page)


SIDES = "() => Array.from(document.querySelectorAll('.av-compare .av-root'), r => r.attnviz ? {w: r.attnviz.weights(), view: r.attnviz.view, zmax: r.attnviz.zmax} : null)"


def test_compare_redraws_both_sides_and_their_difference_in_the_browser(server, page):
    """Compare A | B: each side's raw scores come once; B's τ, A's mask and a click on B (the query, shared) redraw
    A, B and B − A in the browser on one colour scale with no message; after the pause one message, then the link
    and the three downloads hold what is drawn."""
    import numpy as np

    from attnviz.embeddings import embed, load_glove, tokenize
    from attnviz.sentence import Config, run

    text = "the cat sat on the mat"
    sent = count_sent(page)
    page.goto(f"{server}/?cmp=1&text={text.replace(' ', '+')}&scoring=dot&b_scoring=scaled_dot&b_mask=none")
    page.wait_for_function("() => document.querySelectorAll('.av-compare .av-root').length === 3 && "
                           "Array.from(document.querySelectorAll('.av-compare .av-root')).every(r => r.attnviz)", timeout=60_000)
    x = embed(tokenize(text), load_glove()).vectors  # (6, 50)
    a, b, difference = page.evaluate(SIDES)
    expect_a, expect_b = run(x, Config(scoring="dot")).mean_weights, run(x, Config()).mean_weights  # (6, 6) each
    assert np.abs(np.array(a["w"]) - expect_a).max() < 1e-6 and np.abs(np.array(b["w"]) - expect_b).max() < 1e-6
    assert np.abs(np.array(difference["w"]) - (expect_b - expect_a)).max() < 1e-6
    settle(page)
    start, end, pauses = changes(
        sent, lambda: page.get_by_role("slider", name="Temperature τ (log scale) (B)").press("ArrowLeft"),
        lambda: live_select(page, "Mask (A)", "causal"),
        lambda: page.mouse.click(*live_cell(page, 3, 1, index=1)))  # on B: the query is shared
    page.wait_for_function("() => { const r = Array.from(document.querySelectorAll('.av-compare .av-root'), r => r.attnviz.view);"
                           " return r[0].mask === 'causal' && r[1].temp === 0.5 && r.every(v => v.query === 3) }")
    a, b, difference = page.evaluate(SIDES)
    assert sent_before(sent, start, end) <= pauses
    expect_a = run(x, Config(scoring="dot", mask="causal")).mean_weights
    expect_b = run(x, Config(temperature=0.5)).mean_weights
    assert np.abs(np.array(a["w"]) - expect_a).max() < 1e-6 and np.abs(np.array(b["w"]) - expect_b).max() < 1e-6
    assert np.abs(np.array(difference["w"]) - (expect_b - expect_a)).max() < 1e-6
    # One colour scale: "per row" is drawn as 0 → the largest weight of either side.
    assert a["zmax"] == b["zmax"] and abs(a["zmax"] - max(expect_a.max(), expect_b.max())) < 1e-6
    page.mouse.move(*live_cell(page, 2, 1, index=2))
    lines = page.locator(".av-compare .av-root").nth(2).locator(".av-tip div").all_text_contents()
    assert lines[2].startswith("A: ") and lines[3].startswith("B: ") and lines[4].startswith("B − A: ")
    assert url_has(page, "b_temp=0.5", "mask=causal", "query=3")
    settle(page)
    assert 1 <= len(sent) - start <= pauses + 1
    for key, drawn in (("compare_a", a), ("compare_b", b), ("compare_difference", difference)):
        assert np.abs(downloaded_npy(page, key) - np.array(drawn["w"])).max() < 1e-6, key
    assert not exceptions(page)


def test_the_lessons_comparison_redraws_in_the_browser_and_each_step_opens_with_its_own(server, page):
    """Lesson step 10 in presenter mode: A (no mask) and B (causal) side by side on one screen. B's mask and A's τ
    redraw A, B and B − A with no message; after the pause one message, the link and B's download hold what is
    drawn; the step after and back again opens with the step's own settings (B causal)."""
    import numpy as np

    from attnviz.embeddings import embed, load_glove, tokenize
    from attnviz.sentence import Config, run

    text = "the cat sat on the mat"
    page.set_viewport_size({"width": 1920, "height": 1080})
    ready = ("() => document.querySelectorAll('.av-compare.av-compact .av-root').length === 3 && "
             "Array.from(document.querySelectorAll('.av-compare .av-root')).every(r => r.attnviz)")
    sent = count_sent(page)
    page.goto(f"{server}/lesson?step=10&present=1&text={text.replace(' ', '+')}")
    page.wait_for_function(ready, timeout=60_000)
    settle(page)
    x = embed(tokenize(text), load_glove()).vectors  # (6, 50)
    a, b, difference = page.evaluate(SIDES)
    assert np.abs(np.array(a["w"]) - run(x, Config()).mean_weights).max() < 1e-6
    assert np.abs(np.array(b["w"]) - run(x, Config(mask="causal")).mean_weights).max() < 1e-6
    for side in page.locator(".av-compare .av-pair > div").all()[:2]:  # A and B whole on the projector's screen
        box = side.locator(".av-figure").bounding_box()
        assert box["y"] + box["height"] <= 1080, box
    start, end, pauses = changes(
        sent, lambda: live_select(page, "Mask (B)", "none", index=1),
        lambda: page.get_by_role("slider", name="Temperature τ (log scale) (A)").press("ArrowLeft"))
    page.wait_for_function("() => { const [a, b] = Array.from(document.querySelectorAll('.av-compare .av-root'), r => r.attnviz.view);"
                           " return a.temp === 0.5 && b.mask === 'none' }")
    a, b, difference = page.evaluate(SIDES)
    assert sent_before(sent, start, end) <= pauses
    expect_a, expect_b = run(x, Config(temperature=0.5)).mean_weights, run(x, Config()).mean_weights
    assert np.abs(np.array(a["w"]) - expect_a).max() < 1e-6 and np.abs(np.array(b["w"]) - expect_b).max() < 1e-6
    assert np.abs(np.array(difference["w"]) - (expect_b - expect_a)).max() < 1e-6
    assert url_has(page, "ctemp=0.5", "cb_mask=none")
    settle(page)
    assert 1 <= len(sent) - start <= pauses + 1
    assert np.abs(downloaded_npy(page, "lesson_compare_b") - expect_b).max() < 1e-6
    page.get_by_role("button", name="Next").click()
    assert url_has(page, "step=11")
    page.get_by_role("button", name="Previous").click()
    assert url_has(page, "step=10")
    page.wait_for_function(ready)
    page.wait_for_function("() => document.querySelectorAll('.av-compare .av-root')[1].attnviz.view.mask === 'causal'")
    assert "cb_mask" not in page.url and not exceptions(page)


def test_a_click_on_a_cell_takes_its_score_apart_after_the_pause(server, page):
    """A click on the cell (happy, dog) chooses the query and the key in the browser, outlines the cell and sends
    nothing; after the pause the page takes that score apart: the score and the weight the heatmap gives."""
    import numpy as np

    sent = count_sent(page)
    page.goto(f"{server}/?parts=1&text=when+he+saw+his+owner+the+dog+was+happy")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 9)
    settle(page)
    start, end, pauses = changes(sent, lambda: page.mouse.click(*live_cell(page, 8, 6)))
    trace = wait_for_heatmap(page, lambda t: t["view"]["query"] == 8 and t["view"].get("key") == 6)
    assert sent_before(sent, start, end) <= pauses and page.locator(".av-root .av-cell-outline").count() == 1
    assert url_has(page, "query=8", "key=6")
    formula = page.locator(".stMarkdown, [data-testid='stMarkdownContainer']", has_text="Query #8").first
    assert "key #6 dog" in formula.inner_text()
    chart = page.locator(".st-key-score_parts .js-plotly-plot")
    chart.wait_for()
    terms = np.array(page.evaluate("() => Array.from(document.querySelector('.st-key-score_parts .js-plotly-plot')._fullData.at(-1).y)"))
    score = page.evaluate("() => document.querySelector('.av-root').attnviz.scores()[8][6]")
    assert abs(terms.sum() - score) < 1e-4  # the terms sum to the score the heatmap's hover gives
    tex = " ".join(page.locator(".katex-mathml annotation").all_text_contents())  # each formula's TeX, numbers and all
    weight = float(re.search(r"\\alpha_\{8,6\} = \\frac\{[^$]*?\} = ([-0-9.e]+)", tex).group(1))
    assert abs(weight - trace["w"][8][6]) < 1e-5 and not exceptions(page)


def test_a_click_on_a_query_in_the_query_key_space_joins_it_to_its_strongest_keys(server, page):
    """The Trained model's query–key space: a click on a query's point rings it and labels its three strongest keys
    of its own sentence with the model's weights; the link keeps the query."""
    from attnviz import models

    page.goto(f"{server}/trained?qk=1&layer=3&head=5&text=the+dog+was+happy")
    chart = page.locator(".st-key-qk_map .js-plotly-plot")
    chart.wait_for(timeout=90_000)
    settle(page)
    chart.scroll_into_view_if_needed()
    x, y = page.evaluate("""() => { const gd = document.querySelector('.st-key-qk_map .js-plotly-plot'), l = gd._fullLayout;
      const box = gd.getBoundingClientRect(), t = gd._fullData[0];
      return [box.left + l._size.l + l.xaxis.d2p(t.x[2]), box.top + l._size.t + l.yaxis.d2p(t.y[2])]; }""")
    page.mouse.click(x, y)
    page.wait_for_function("() => ((document.querySelector('.st-key-qk_map .js-plotly-plot') || {})._fullData || [])"
                           ".some(t => t.name === 'its strongest keys')", timeout=30_000)  # the chart is remounted meanwhile
    assert url_has(page, "qkq=2")
    labels = page.evaluate("() => document.querySelector('.st-key-qk_map .js-plotly-plot')._fullData"
                           ".find(t => t.name === 'its strongest keys').text")
    row = models.load("minilm").run("the dog was happy").weights[2, 4, 2]  # query 2 ("dog") of the text, layer 3, head 5
    assert sorted((float(label.split()[-1]) for label in labels), reverse=True) == [round(float(w), 2) for w in sorted(row)[::-1][:3]]
    assert not exceptions(page)


def test_the_keyboard_walks_the_cells_and_a_screen_reader_hears_each_weight(server, page):
    """Up and down choose the query, left and right move along its row, and a polite live region reads each cell:
    its query, its key, its weight as drawn and its rank in the row. Enter chooses the cell's query as a click does.
    A letter typed on the figure stays the figure's: Streamlit's page-wide "r" does not rerun the page from there."""
    sent = count_sent(page)
    page.goto(f"{server}/?text=the+dog+is+very+happy")
    wait_for_heatmap(page, lambda t: t.get("live") and len(t["y"]) == 5)
    settle(page)
    figure = page.locator(".av-root .av-figure").first
    assert "left and right read its cells" in figure.get_attribute("aria-label")
    described = page.locator(f"#{figure.get_attribute('aria-describedby')}").text_content()
    assert re.match(r"The largest, [\d.]+, is query \S+, key \S+\. Each query's strongest key: the → ", described)
    live = page.locator(".av-root .av-sr[aria-live='polite']").first
    figure.focus()
    for key in ("ArrowDown", "ArrowDown", "ArrowDown", "ArrowDown"):
        page.keyboard.press(key)
    trace = wait_for_heatmap(page, lambda t: t["view"]["query"] == 4)
    row = trace["w"][4]
    keys = page.evaluate("() => document.querySelector('.av-root:not(.av-matrix)').attnviz.cols")
    pattern = r"query happy, key (\S+), weight ([\d.e-]+), (\d+)(st|nd|rd|th) of 5"
    column = keys.index(re.fullmatch(pattern, live.text_content()).group(1))  # the column stays as the query moves
    step = -1 if column >= 2 else 1
    for _ in range(2):
        page.keyboard.press("ArrowLeft" if step < 0 else "ArrowRight")
        column += step
        rank = 1 + sum(w > row[column] for w in row)
        said = live.text_content()
        match = re.fullmatch(pattern, said)
        assert match, said
        assert match.group(1) == keys[column] and int(match.group(3)) == rank
        assert abs(float(match.group(2)) - row[column]) <= 5e-3 * row[column] + 1e-9  # 3 significant digits
    assert page.locator(".av-root .av-cursor").count() == 1  # the focused cell is outlined while the figure has focus
    page.keyboard.press("Home")
    assert wait_for_heatmap(page, lambda t: t["view"]["query"] == 0)
    assert live.text_content().startswith("query the, key ")
    page.keyboard.press("Enter")
    assert url_has(page, "query=0") or wait_for_heatmap(page, lambda t: t["view"]["query"] == 0)
    settle(page)
    page.wait_for_timeout(1000)  # the pause's view has gone to the server
    before = len(sent)
    figure.focus()
    page.keyboard.press("r")  # Streamlit's page-wide "rerun" key, typed on the figure: the figure's, not the page's
    page.wait_for_timeout(1500)
    assert len(sent) == before
    page.evaluate("() => document.activeElement.blur()")  # the same key on the page itself reruns it: the check can fail
    page.keyboard.press("r")
    until(page, "() => 1", lambda _: len(sent) > before, timeout=10, what="the page's own r never reran it")
    assert not exceptions(page)
