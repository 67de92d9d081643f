"""Long text in Chromium, as a person uses it: upload a text file, scan it with a progress bar, pick a head in the
atlas, click a block of its overview for the exact weights and zoom back out, pick a query in the shaded document, and
reload the link: the view comes back, the text does not (the page says so)."""

from driver import atlases, click_head, click_point, drag_box, exceptions, settle, url_has, url_lacks

FILE_TEXT = " ".join(["The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."] * 30
                     + ["The pass key is 31415. Remember it."])  # about 700 pieces of SmolLM2's
ATLAS_TITLE = "() => (document.querySelector('.av-atlas .av-atlas-title') || {}).textContent"


def test_upload_scan_zoom_in_and_out_pick_a_head_and_reload_the_link(page, server, tmp_path):
    page.goto(f"{server}/long_text")
    page.wait_for_selector(".av-atlas canvas", timeout=120_000)  # the example document, scanned
    settle(page)
    first = page.evaluate(ATLAS_TITLE)
    upload = tmp_path / "document.txt"
    upload.write_text(FILE_TEXT, encoding="utf-8")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(upload))
    settle(page)
    page.get_by_role("button", name="Scan").click()
    page.wait_for_selector('[data-testid="stProgress"]', timeout=30_000)  # the bar while it scans
    page.wait_for_function(f"() => !!({ATLAS_TITLE[6:]}) && ({ATLAS_TITLE[6:]}) !== {first!r}", timeout=120_000)
    settle(page)
    assert page.get_by_test_id("stProgress").count() == 0
    title = page.evaluate(ATLAS_TITLE)
    assert "30 layers" not in title and "heads over 7" in title, title  # 700-odd pieces: the file's, not the example's

    click_head(page, 19, 8)
    assert url_has(page, "layer=20", "head=9") and atlases(page)[0]["chosen"] == [19, 8]
    assert page.get_by_role("heading", name="Layer 20, head 9").count() == 1
    click_point(page, 0, 3, 5)  # key block 3 (x), query block 5 (y): queries 640… on keys 384…
    assert url_has(page, "zoom=5%2C3") or url_has(page, "zoom=5,3")
    tile_title = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.title.text")
    assert "exact weights of queries 640–" in tile_title and "on keys 384–511" in tile_title
    page.get_by_role("button", name="Back to the whole document").click()
    settle(page)
    assert url_lacks(page, "zoom="), page.url
    assert "mean share" in page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.title.text")
    drag_box(page, 0, (0.7, 2.7), (2.3, 4.3))  # a region: key blocks 1–2 (x), row blocks 3–4 (y)
    assert url_has(page, "zoom=3%2C1%2C4%2C2") or url_has(page, "zoom=3,1,4,2"), page.url
    tile_title = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullLayout.title.text")
    assert "exact weights of queries 384–639 on keys 128–383" in tile_title, tile_title
    page.get_by_role("button", name="Back to the whole document").click()
    settle(page)
    assert url_lacks(page, "zoom="), page.url

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
    assert fresh.evaluate("() => document.querySelector('.av-document').attnviz.query") == 42
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
