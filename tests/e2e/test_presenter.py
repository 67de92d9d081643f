"""Presenter mode in Chromium: large type in the page and in the charts, the sidebar folded, kept across pages."""

from driver import exceptions, live_cell, plots, settle, url_has, wait_for_heatmap

FONT_SIZES = """() => ({
  body: Array.from(document.querySelectorAll('[data-testid="stMarkdownContainer"] p')).filter(p => p.offsetParent)
        .map(p => parseFloat(getComputedStyle(p).fontSize)),
  ticks: Array.from(document.querySelectorAll('.js-plotly-plot .xtick text, .js-plotly-plot .ytick text, ' +
                                              '.av-root .av-row, .av-root .av-col, .av-root .av-tick'))
        .map(t => parseFloat(getComputedStyle(t).fontSize)),
  titles: Array.from(document.querySelectorAll('.js-plotly-plot .gtitle, .av-root .av-title'))
        .map(t => parseFloat(getComputedStyle(t).fontSize)),
})"""


def opened(browser, url: str):
    """(context, page) at 1920×1080 with `url` drawn."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(url)
    wait_for_heatmap(page, lambda t: True)
    settle(page)
    return context, page


def sizes(page) -> dict:
    found = page.evaluate(FONT_SIZES)
    assert found["body"] and found["ticks"] and found["titles"], found
    return found


def test_presenter_mode_has_large_type_and_a_folded_sidebar(browser, server):
    context, page = opened(browser, f"{server}/?present=1&text=the+cat+sat+on+the+mat")
    found = sizes(page)
    assert min(found["body"]) >= 22 and min(found["ticks"]) >= 16 and min(found["titles"]) >= 16, found
    assert page.get_by_test_id("stSidebar").get_attribute("data-collapsed") == "true"

    page.mouse.move(*live_cell(page, 2, 3))
    page.wait_for_selector(".av-root .av-tip", state="visible", timeout=10_000)
    hover = page.evaluate("() => Array.from(document.querySelectorAll('.av-root .av-tip div'))"
                          ".map(t => parseFloat(getComputedStyle(t).fontSize))")
    assert hover and min(hover) >= 16

    # Another page of the same session: still presenting, and its link says so.
    page.get_by_test_id("stExpandSidebarButton").click()
    page.get_by_role("link", name="Heads and layers").click()
    page.wait_for_url("**/heads**")
    plots(page)
    settle(page)
    assert url_has(page, "present=1")
    assert min(sizes(page)["body"]) >= 22
    assert exceptions(page) == []
    context.close()


def test_without_presenter_mode_type_is_ordinary(browser, server):
    context, page = opened(browser, f"{server}/?text=the+cat+sat+on+the+mat")
    found = sizes(page)
    assert min(found["body"]) < 22 and max(found["ticks"]) < 16  # the presenter test above can fail
    assert "present" not in page.url
    context.close()
