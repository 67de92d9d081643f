"""What a head does, in the real app: the atlas sorted and coloured by a head score measured over the corpus, a click
on a sorted place opening the head drawn there, a row of the top-heads table opening its head, the value-weighted
view, and all of it kept through a new sentence."""

import functools

import numpy as np

from driver import exceptions, settle, shown_value, type_into, url_has


@functools.cache
def minilm_scores():
    from attnviz import heads, models

    return heads.measure(models.load("minilm", "cpu"))


def atlas_state(page) -> dict:
    return page.evaluate("() => { const a = document.querySelector('.av-atlas').attnviz; "
                         "return {order: a.order, chosen: a.chosen, version: a.version}; }")


def toggle(page, label: str):
    page.get_by_text(label, exact=True).click()
    settle(page)


def test_the_atlas_sorted_and_coloured_by_a_score_opens_the_heads_it_shows(server, page):
    found = minilm_scores()
    previous = found.scores["previous"]  # (6, 12)
    page.goto(f"{server}/trained?text=the+dog+saw+the+cat&score=previous")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert atlas_state(page)["order"] is None
    toggle(page, "Sort by it")
    page.wait_for_function("() => document.querySelector('.av-atlas').attnviz.order !== null", timeout=120_000)
    order = np.array(atlas_state(page)["order"]).reshape(6, 12)
    assert (order == np.argsort(-previous, axis=1, kind="stable")).all()  # each layer's heads, highest first
    assert url_has(page, "bysort=1", "score=previous")
    # Place #1 of layer 1 holds its best previous-piece head: a click there opens that head, not head 1.
    best = int(order[0, 0])
    where = page.evaluate("() => { const a = document.querySelector('.av-atlas'); const box = a.querySelector('canvas')"
                          ".getBoundingClientRect(); return [box.left, box.top]; }")
    centre = page.evaluate(f"() => document.querySelector('.av-atlas').attnviz.tileCentre(0, {best})")
    assert centre[0] - where[0] < 100  # drawn in the first place, at the left
    page.mouse.click(*centre)
    settle(page)
    assert shown_value(page, "stSelectbox", "Layer") == "1" and shown_value(page, "stSelectbox", "Head") == str(best + 1)
    assert url_has(page, f"head={best + 1}") and best != 0  # a place other than the head's own number
    toggle(page, "Show it on each head")
    page.wait_for_function("() => document.querySelector('.av-atlas').attnviz.scoreBar(0, 0) !== undefined")
    for layer, head in ((0, best), (3, 5), (5, 11)):  # each head's bar is its score; its thumbnail keeps its pattern
        bar = page.evaluate(f"() => document.querySelector('.av-atlas').attnviz.scoreBar({layer}, {head})")
        assert abs(bar - float(np.clip(previous[layer, head], 0, 1))) < 1e-4
    # A new sentence: the scores are the corpus's, so the atlas keeps its order, its colours and the chosen head.
    type_into(page, "Sentence", "a bird sang in the old tree")
    state = atlas_state(page)
    assert state["order"] == order.ravel().tolist() and state["chosen"] == [0, best]
    assert url_has(page, "bycolour=1", "bysort=1") and not exceptions(page)


def test_the_top_heads_table_opens_a_head_and_the_moved_view_says_where_weight_moves_little(server, page):
    found = minilm_scores()
    page.goto(f"{server}/trained?text=the+dog+saw+the+cat&types=1&moved=1&layer=2&head=1")
    page.wait_for_selector("[data-testid=stDataFrame]", timeout=120_000)
    settle(page)
    table = page.get_by_test_id("stDataFrame")
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    # The first row: the best previous-piece head. A click on its row marker selects it and opens it.
    layer, head, _ = found.top("previous", 1)[0]
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)
    settle(page)
    page.wait_for_function(f"() => document.querySelector('.av-atlas').attnviz.chosen.join() === '{layer},{head}'",
                           timeout=60_000)
    assert shown_value(page, "stSelectbox", "Layer") == str(layer + 1)
    assert shown_value(page, "stSelectbox", "Head") == str(head + 1)
    page.wait_for_selector(".st-key-moved_shares .js-plotly-plot", timeout=60_000)
    settle(page)
    said = page.get_by_text("of the weight and").all_inner_texts()
    assert len(said) == 2 and all("of the norm" in s for s in said), said
    assert said[0].startswith(f"In layer {layer + 1}, head {head + 1},")
    assert not exceptions(page)
