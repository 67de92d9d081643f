"""Long text in Chromium, as a person uses it: upload a text file, scan it with a progress bar, pick a head in the
atlas, click a block of its overview for the exact weights and zoom back out, pick a query in the shaded document, and
reload the link: the view comes back, the text does not (the page says so)."""

import re

from driver import atlases, click_head, exceptions, settle, url_has, url_lacks

FILE_TEXT = " ".join(["The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."] * 30
                     + ["The pass key is 31415. Remember it."])  # about 700 pieces of SmolLM2's
ATLAS_TITLE = "() => (document.querySelector('.av-atlas .av-atlas-title') || {}).textContent"


def overview(page) -> dict:
    """What the chosen head's overview draws (overview.mjs's root.attnviz)."""
    return page.evaluate("() => { const a = document.querySelector('.av-overview').attnviz; "
                         "return { showing: a.showing, title: a.title, tile: a.tile, drawn: a.drawn }; }")


def block_centre(page, i: int, j: int) -> list[float]:
    page.locator(".av-overview canvas").scroll_into_view_if_needed()
    return page.evaluate(f"() => document.querySelector('.av-overview').attnviz.cellCentre({i}, {j})")


def click_block(page, i: int, j: int):
    page.mouse.click(*block_centre(page, i, j))
    settle(page)


def drag_blocks(page, start: tuple[int, int], end: tuple[int, int]):
    """Drag from block `start` to block `end` ([query block, key block]); the box follows the pointer in the page."""
    first, last = block_centre(page, *start), block_centre(page, *end)
    page.mouse.move(*first)
    page.mouse.down()
    page.mouse.move(*last, steps=8)
    box = page.locator(".av-overview .av-overview-box")
    assert box.is_visible() and box.bounding_box()["width"] > 0  # drawn while dragging: no round trip for a frame
    page.mouse.up()
    settle(page)


def test_upload_scan_zoom_in_and_out_pick_a_head_and_reload_the_link(page, server, tmp_path):
    page.goto(f"{server}/long_text")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)  # the example document, scanned
    settle(page)
    first = page.evaluate(ATLAS_TITLE)
    upload = tmp_path / "document.txt"
    upload.write_text(FILE_TEXT, encoding="utf-8")
    page.locator('[data-testid="stFileUploader"]').filter(has_text="Or a text file").locator('input[type="file"]').set_input_files(str(upload))
    settle(page)
    page.get_by_role("button", name="Scan").click()
    page.wait_for_selector('[data-testid="stProgress"]', timeout=30_000)  # the bar while it scans
    page.wait_for_function(f"() => !!({ATLAS_TITLE[6:]}) && ({ATLAS_TITLE[6:]}) !== {first!r}", timeout=120_000)
    settle(page)
    assert page.get_by_test_id("stProgress").count() == 0
    title = page.evaluate(ATLAS_TITLE)
    assert "30 layers" not in title and "heads over 7" in title, title  # 700-odd pieces: the file's, not the example's
    with page.expect_download(timeout=120_000) as download:  # the scan as an open file, read by safetensors alone
        page.get_by_role("button", name="Download this scan and its census (.safetensors)").click()
    page.keyboard.press("Escape")
    page.mouse.move(0, 0)
    from safetensors import safe_open

    assert download.value.suggested_filename.startswith("attnviz_scan_smollm2_")
    with safe_open(download.value.path(), framework="numpy") as saved:
        meta, overviews = saved.metadata(), saved.get_tensor("overview")
        assert f"heads over {int(meta['n']):,} pieces" in title and meta["model"] == "smollm2"
        assert overviews.shape[:2] == (30, 9) and saved.get_tensor("lse").shape == (30, 9, int(meta["n"]))
        assert saved.get_tensor("census.class").shape == (30, 9) and "streaming" in meta["census_classes"]

    click_head(page, 19, 8)
    assert url_has(page, "layer=20", "head=9") and atlases(page)[0]["chosen"] == [19, 8]
    assert page.get_by_role("heading", name="Layer 20, head 9").count() == 1
    click_block(page, 5, 3)  # query block 5, key block 3: queries 640… on keys 384…
    assert url_has(page, "zoom=5%2C3") or url_has(page, "zoom=5,3")
    shown = overview(page)
    assert shown["showing"] == "tile" and "exact weights of queries 640–" in shown["title"], shown
    assert "on keys 384–511" in shown["title"] and shown["tile"]["keys"] == [384, 512]
    with page.expect_download() as download:  # the tile's numbers, as drawn
        page.locator(".av-overview .av-button", has_text="CSV").click()
    assert download.value.suggested_filename == "attnviz_long_L20H9_q640_k384.csv"
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0].startswith("query \\ key,#384 ") and lines[1].startswith("#640 ") and len(lines) == 1 + 734 - 640
    with page.expect_download() as download:
        page.locator(".av-overview .av-button", has_text="PNG").click()
    assert open(download.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    drawn = overview(page)["drawn"]
    page.locator(".av-overview .av-button", has_text="Back to the whole document").click()
    shown = overview(page)  # drawn at once, before the server has answered
    assert shown["showing"] == "overview" and shown["drawn"] > drawn and "mean share" in shown["title"]
    settle(page)
    assert url_lacks(page, "zoom="), page.url
    drag_blocks(page, (3, 1), (4, 2))  # a region: row blocks 3–4, key blocks 1–2
    tip = "() => getComputedStyle(document.querySelector('.av-overview .av-tip')).display"
    assert page.evaluate(tip) == "none"  # the hover named a block of the overview: it goes with it
    assert url_has(page, "zoom=3%2C1%2C4%2C2") or url_has(page, "zoom=3,1,4,2"), page.url
    assert "exact weights of queries 384–639 on keys 128–383" in overview(page)["title"]
    page.locator(".av-overview .av-button", has_text="Back to the whole document").click()
    settle(page)
    assert url_lacks(page, "zoom="), page.url
    assert overview(page)["showing"] == "overview"

    page.locator(".av-document span[data-i='42']").click()  # a piece of the document becomes the query
    settle(page)
    assert url_has(page, "query=42")
    assert page.evaluate("() => document.querySelector('.av-document').attnviz.query") == 42
    assert not exceptions(page)

    fresh = page.context.new_page()  # the link: the view, not the text
    fresh.goto(page.url)
    fresh.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(fresh)
    assert atlases(fresh)[0]["chosen"] == [19, 8]
    assert fresh.evaluate(ATLAS_TITLE) == first  # the example document again
    assert fresh.get_by_text("not the text", exact=False).count() >= 1
    # The link's query was made on the uploaded text: it is not applied to the example, and the page says so.
    assert fresh.get_by_text("was made on another text", exact=False).count() == 1
    pieces = fresh.evaluate("() => document.querySelector('.av-document').attnviz.pieces")
    assert fresh.evaluate("() => document.querySelector('.av-document').attnviz.query") == pieces - 1
    assert not exceptions(fresh)


def test_a_saved_scan_view_opens_each_heads_overview_offline(browser, tmp_path):
    import sys
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from test_scan import build, long_text

    from attnviz import models
    from attnviz.notebook import scan

    model = models.load(build("mistral", tmp_path), device="cpu")
    view = scan(model, long_text(model, 700), block=64)
    path = view.save_html(tmp_path / "scan.html")
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    shown = "() => { const m = document.querySelector('.av-matrix'); return m && m.attnviz ? Array.from(m.attnviz.weights()) : null; }"
    page.wait_for_function(f"({shown})() !== null && document.querySelector('.av-atlas').attnviz")
    assert np.allclose(np.ravel(page.evaluate(shown)), view.scan.overview[0, 0].ravel(), atol=1e-6)
    where = page.evaluate("""([l, h]) => { const a = document.querySelector('.av-atlas');
        a.attnviz.showTile(l, h); return a.attnviz.tileCentre(l, h); }""", [1, 6])
    page.mouse.click(*where)
    page.wait_for_function("() => document.querySelector('.av-atlas').attnviz.chosen.join() === '1,6'")
    page.wait_for_timeout(300)
    assert np.allclose(np.ravel(page.evaluate(shown)), view.scan.overview[1, 6].ravel(), atol=1e-6)
    assert all(url.startswith("file://") for url in requests)  # nothing asked of any host
    page.close()


def test_every_piece_of_chinese_text_can_be_clicked(page, server):
    """A character split into pieces (byte-level BPE) shows in its first piece; the others keep a place to click."""
    from driver import type_into

    page.goto(f"{server}/long_text")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)
    settle(page)
    type_into(page, "Text", "我们今天去公园散步，天气很好。")
    page.get_by_role("button", name="Scan").click()
    page.wait_for_function("() => { const b = document.querySelector('.av-document-body'); "
                           "return b && b.textContent.startsWith('我们'); }", timeout=120_000)
    settle(page)
    widths = page.evaluate("() => Array.from(document.querySelectorAll('.av-document-body span'), "
                           "s => s.getBoundingClientRect().width)")
    parts = page.locator(".av-document-body span.av-piece-part")
    assert parts.count() > 0 and min(widths) > 0  # every piece, the empty ones too, has room to be clicked
    target = int(parts.first.get_attribute("data-i"))
    parts.first.click()
    settle(page)
    assert page.evaluate("() => document.querySelector('.av-document').attnviz.query") == target
    assert exceptions(page) == []


def test_the_census_map_moves_its_classes_in_the_browser_and_a_head_opens_by_keyboard(page, server, tmp_path):
    """What each head does: the map's classes and counts follow a threshold at once, in the page; a head's cell,
    reached by the arrows and opened with Enter, opens that head's evidence; a paper's file sits beside it."""
    page.goto(f"{server}/long_text")
    page.wait_for_selector(".av-census table td", timeout=120_000)
    settle(page)
    census = "() => document.querySelector('.av-census').attnvizCensus"
    before = page.evaluate(census)
    assert len(before["classes"]) == 270 and "Of the 270 heads" in before["said"]
    streaming = page.get_by_label("streaming: share on the sinks and the window at least", exact=False)
    streaming.focus()
    page.keyboard.press("Home")  # 0 %: every head that is not previous-piece, local or Wu's retrieval is streaming
    after = page.evaluate(census)
    assert after["rules"]["streaming"] == 0 and after["said"] != before["said"]
    assert sum(c == 2 for c in after["classes"]) > sum(c == 2 for c in before["classes"])
    assert page.locator(".av-census-said").text_content() == after["said"]  # said in the live region
    cell = page.locator(".av-census td[tabindex='0']")
    cell.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    page.get_by_text("Layer 2, head 2 (open another on the map", exact=False).wait_for(timeout=60_000)
    settle(page)
    assert page.get_by_role("heading", name="Layer 2, head 2").count() == 1  # the head's own section
    assert url_has(page, "layer=2", "head=2")
    assert not exceptions(page)
    paper_file_beside(page, tmp_path)


def paper_file_beside(page, tmp_path) -> None:
    """A paper's file beside this document: DuoAttention's full_attention_heads.tsv for SmolLM2 (30 layers, 3
    key/value heads), as its training writes it, gives two maps, the file's gates and this document's distant
    shares; a file of another model gets a message, and the page goes on."""
    gates = [[0.0, 0.0, 0.0] for _ in range(30)]
    gates[18][0] = 0.95  # one key/value head: its 3 query heads need their whole cache
    tsv = tmp_path / "full_attention_heads.tsv"
    tsv.write_text("".join("\t".join(f"{v:.10f}" for v in row) + "\n" for row in gates))
    page.locator('[data-testid="stFileUploader"]').filter(has_text="A head file").locator('input[type="file"]') \
        .set_input_files(str(tsv))
    said = page.get_by_text("DuoAttention: The file gives 3 of 270 heads a gate of 0.5 or more", exact=False)
    said.wait_for(timeout=120_000)
    settle(page)
    titles = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => "
                           "(gd.layout.title && gd.layout.title.text) || '')")
    titles = [re.sub(r"<[^>]+>", "", t.replace("<br>", " ")) for t in titles]  # the text as drawn, wrapped
    file_map = [t for t in titles if t.startswith("The file: each head's gate")]
    document_map = [t for t in titles if t.startswith("This document: the distant share")]
    assert len(file_map) == 1 and len(document_map) == 1, titles
    z = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => "
                      "(gd.layout.title.text || '').includes('The file')).map(gd => gd._fullData[0].z)[0]")
    assert [row[:3] for row in z][18] == [0.95, 0.95, 0.95] and sum(map(sum, z)) == 0.95 * 3  # layer 19, heads 1-3
    other = tmp_path / "other.tsv"
    other.write_text("1.0\t0.0\n" * 4)
    page.locator('[data-testid="stFileUploader"]').filter(has_text="A head file").locator('input[type="file"]') \
        .set_input_files(str(other))
    page.get_by_text("This file is another model's: 4 layers × 2 key/value heads", exact=False).wait_for(timeout=60_000)
    assert not exceptions(page)
