"""Your own model in the real app: a server started with tiny models of its own (ATTNVIZ_MODELS), driven in headless
Chromium through the model picker, the atlas, the chosen head, links, and what a model computed by transformers
cannot show."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from driver import (atlases, choose, click_head, exceptions, settle, shown_value, start_server, type_into, url_has,
                    wait_for_heatmap)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tiny_models  # noqa: E402

FAMILIES = ("llama", "bert", tiny_models.OUTSIDE, "t5")  # OUTSIDE: a decoder transformers computes (GPT-J)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("mine")
    return {family: tiny_models.build(family, root) for family in FAMILIES}


@pytest.fixture(scope="module")
def own_server(tiny, server):  # `server` first: it checks for Chromium (or skips) before this one starts
    process, url = start_server({"ATTNVIZ_MODELS": os.pathsep.join(str(tiny[f]) for f in FAMILIES),
                                 "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    yield url
    process.terminate()
    process.wait(10)


def picker_options(page) -> list[str]:
    box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Model", exact=True))
    box.evaluate("element => element.scrollIntoView({block: 'center'})")
    box.get_by_role("button", name="Open").click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return options


def test_the_picker_opens_a_configured_decoder_and_a_link_reproduces_its_head(own_server, page, tiny):
    from attnviz import models

    page.goto(f"{own_server}/decoder?text=the+dog+was")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert picker_options(page) == ["smollm2", "llama (yours)", "gptj (yours)"]  # decoders only, built-in first
    choose(page, "Model", "llama (yours)")
    assert url_has(page, "model=llama")
    page.wait_for_function("() => document.querySelector('.av-atlas').attnviz.heads === 8", timeout=60_000)
    assert atlases(page)[0]["layers"] == 3 and atlases(page)[0]["chosen"] == [0, 0]
    click_head(page, 2, 5)  # layer 3, head 6: key/value group 2 of 2
    assert url_has(page, "model=llama", "layer=3", "head=6") and atlases(page)[0]["chosen"] == [2, 5]
    assert page.get_by_role("heading", name="Layer 3, head 6 (K/V group 2)").count() == 1
    mine = models.load(tiny["llama"], device="cpu")
    expected = mine.run("the dog was").weights[2, 5]
    drawn = wait_for_heatmap(page, lambda t: len(t["y"]) == len(expected))
    assert drawn["y"][0].startswith("#0 <s>") and np.abs(np.array(drawn["w"]) - expected).max() < 1e-5
    type_into(page, "Text", "A cat sat")  # type again: the same model and head, a new text
    pieces = [f"#{i} {label}" for i, label in enumerate(mine.run("A cat sat").pieces.labels())]
    again = wait_for_heatmap(page, lambda t: t["y"] == pieces)
    assert atlases(page)[0]["chosen"] == [2, 5] and np.allclose(np.sum(again["w"], 1), 1, atol=1e-4)
    link = page.url
    fresh = page.context.new_page()  # the link alone reproduces the model, the head and the text
    fresh.goto(link)
    fresh.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(fresh)
    assert shown_value(fresh, "stSelectbox", "Model") == "llama (yours)"
    assert atlases(fresh)[0]["chosen"] == [2, 5] and fresh.get_by_role("heading", name="Layer 3, head 6 (K/V group 2)").count() == 1
    assert wait_for_heatmap(fresh, lambda t: True)["w"] == again["w"]
    assert not exceptions(page) and not exceptions(fresh)


def test_a_link_to_a_model_the_server_does_not_offer_says_so(own_server, page):
    page.goto(f"{own_server}/trained?model=%2Fetc%2Fpasswd")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    warning = page.get_by_test_id("stAlertContentWarning").inner_text()
    assert "offers no model called “/etc/passwd”" in warning and "minilm, bert" in warning
    assert shown_value(page, "stSelectbox", "Model") == "minilm" and "model=" not in page.url


def test_an_encoder_decoder_shows_its_three_kinds_and_a_transformers_model_says_what_is_off(own_server, page):
    page.goto(f"{own_server}/trained?model=t5&text=the+cat+sat")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert atlases(page)[0]["layers"] == 2  # the encoder's self-attention first
    page.get_by_text("cross-attention", exact=True).click()
    settle(page)
    cross = wait_for_heatmap(page, lambda t: len(t["y"]) != len(t["w"][0]))  # decoder queries × encoder keys
    assert atlases(page)[0]["layers"] == 3 and all(abs(sum(row) - 1) < 1e-4 for row in cross["w"])
    page.get_by_text("decoder self-attention (causal)", exact=True).click()
    settle(page)
    causal = wait_for_heatmap(page, lambda t: t["view"]["mask"] == "causal" and len(t["y"]) == len(t["w"][0]))
    assert all(w == 0 for i, row in enumerate(causal["w"]) for j, w in enumerate(row) if j > i)
    page.goto(f"{own_server}/decoder?model=gptj&text=the+cat+sat&parts=1&steps=1")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    text = page.get_by_test_id("stMain").inner_text()
    assert "computed by transformers" in text and "so the step-by-step walk is off" in text
    assert wait_for_heatmap(page, lambda t: t["view"]["mask"] == "causal")  # its own weights, drawn all the same
    page.goto(f"{own_server}/trained?model=bert&text=the+cat+sat")  # and away to a configured encoder
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    assert atlases(page)[0]["heads"] == 3 and wait_for_heatmap(page, lambda t: t["y"][0] == "#0 [CLS]")
    assert not exceptions(page)


def test_an_encoder_decoder_writes_and_its_timeline_shows_each_pieces_cross_attention(own_server, page, tiny):
    from attnviz import models

    page.goto(f"{own_server}/trained?model=t5&text=the+cat+sat&kind=cross&layer=2&write=6")
    state = "() => { const t = document.querySelector('.av-timeline'); return t && t.attnvizTimeline; }"
    page.wait_for_function(state, timeout=120_000)
    settle(page)
    assert not exceptions(page)
    mine = models.load(tiny["t5"], device="cpu")
    written = mine.generate("the cat sat", 6)
    data = page.evaluate("() => document.querySelector('.av-timeline-host').view.data")
    assert data["cross"] and data["keys"] == written.run.pieces.labels() and data["layer"] == 1
    assert data["tokens"] == written.run.attention["decoder"].queries.labels()
    last = len(written.steps) - 1
    page.evaluate(f"""() => {{ const r = document.querySelector('.av-timeline input[type=range]');
        r.value = '{last}'; r.dispatchEvent(new Event('input')); }}""")
    row = page.evaluate(f"() => Array.from(document.querySelector('.av-timeline-host').view.rowsOf[0][{last}])")
    assert np.abs(np.array(row) - written.run.attention["cross"].weights[1, 0, last]).max() <= 1e-4
    assert page.evaluate(state)["step"] == last
