"""WCAG 2.2 AA in Chromium: axe-core (the copy axe-playwright-python ships) with the WCAG 2.0-2.2 A and AA tags on
every page, every Lesson step, presenter mode and a class's projector, console and student page: no violation, and
no exception list (none is needed today: a violation of Streamlit's own would be listed here with its upstream issue).
Then reflow: at 320 px wide, no page scrolls sideways."""

import importlib.resources
import re

import pytest

from driver import atlases, settle, start_server, until
from test_live_class import classroom, one_student  # noqa: F401  (classroom: a fixture)
from appkit.lesson.common import STEP_COUNT

AXE = (importlib.resources.files("axe_playwright_python") / "axe.min.js").read_text()
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
PAGES = ["", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads", "trained", "decoder",
         "long_text", "?mask=keys&hide=1"]  # the last: each key's label a button, with its 24-px band
STEPS = range(1, STEP_COUNT + 1)


def violations(page) -> list[str]:
    """axe's WCAG A/AA violations on the page as drawn: 'rule: target …' for each failing element."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE)
    result = page.evaluate("(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}})", TAGS)
    return [f"{v['id']}: {node['target']} {node['failureSummary'][:160]}" for v in result["violations"] for node in v["nodes"]]


@pytest.fixture(scope="module")
def app():
    process, url = start_server()
    yield url
    process.terminate()
    process.wait(10)


STYLED = "() => [...document.querySelectorAll('style')].some(s => s.textContent.includes('stCaptionContainer'))"


def visit(page, url: str) -> None:
    """The page as a person sees it once it has settled: its run done (after the server's warm-up, which may run it
    again), the app's style sheet in, and the figures' own drawing after the run."""
    page.goto(url, timeout=300_000)
    page.wait_for_function(STYLED, timeout=300_000)
    settle(page, timeout=300_000)
    page.wait_for_timeout(1000)
    settle(page, timeout=300_000)


@pytest.mark.parametrize("name", PAGES)
def test_every_page_meets_wcag_aa_by_axe(browser, app, name):
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    visit(page, f"{app}/{name}")
    assert violations(page) == []
    page.context.close()


def test_every_lesson_step_and_presenter_mode_meet_wcag_aa_by_axe(browser, app):
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    found = {}
    for step in STEPS:
        visit(page, f"{app}/lesson?step={step}")
        found[step] = violations(page)
    visit(page, f"{app}/lesson?step=7&present=1")
    found["presenter"] = violations(page)
    assert {where: said for where, said in found.items() if said} == {}
    page.context.close()


def test_a_class_projector_console_and_student_meet_wcag_aa_by_axe(browser, classroom):  # noqa: F811
    url, _, _, _ = classroom
    with one_student(browser, url, 3, projector_size=(1920, 1080)) as (projector, console, student):
        console.get_by_role("button", name=re.compile("^Ask: ")).first.click()
        student.locator(".av-class-option").first.wait_for(timeout=20_000)
        settle(console), settle(projector), settle(student)
        found = {name: violations(page) for name, page in (("projector", projector), ("console", console),
                                                             ("student", student))}
        assert {name: said for name, said in found.items() if said} == {}


@pytest.mark.parametrize("name", ["", "lesson?step=7", "kv_database", "heads", "trained", "decoder", "long_text"])
def test_nothing_scrolls_sideways_at_320_px(browser, app, name):
    """WCAG 1.4.10 reflow: at 320 CSS px the page's scrolling area (Streamlit's main block: the document itself never
    scrolls) is as wide as the window; a figure or a formula may pan inside itself."""
    page = browser.new_context(viewport={"width": 320, "height": 640}).new_page()
    visit(page, f"{app}/{name}")
    wide = page.evaluate("() => { const main = document.querySelector('[data-testid=stMain]'); "
                         "return main.scrollWidth - main.clientWidth; }")
    assert wide <= 0, f"{name or 'self_attention'} is {wide} px wider than 320 px"
    page.context.close()


def test_the_head_atlas_is_walked_and_read_by_keyboard(browser, app):
    """The atlas takes focus; the arrows move the chosen head and a polite live region reads it as its hover does
    (layer, head, counted from 1); Enter opens it, as a click does."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    visit(page, f"{app}/trained")
    figure = page.locator(".av-atlas-figure").first
    assert "Arrow keys move the chosen head" in figure.get_attribute("aria-label")
    figure.focus()
    start = atlases(page)[0]["chosen"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    chosen = atlases(page)[0]["chosen"]
    assert chosen == [min(start[0] + 1, atlases(page)[0]["layers"] - 1), min(start[1] + 1, atlases(page)[0]["heads"] - 1)]
    said = page.locator(".av-atlas .av-sr[aria-live='polite']").first.text_content()
    assert said.startswith(f"layer {chosen[0] + 1}, head {chosen[1] + 1}")
    page.keyboard.press("Enter")
    until(page, "() => window.location.search", lambda search: f"head={chosen[1] + 1}" in search, timeout=30,
          what="Enter never opened the head")
    page.context.close()


def test_long_texts_overview_and_document_are_walked_and_read_by_keyboard(browser, app):
    """The overview takes focus: the arrows move a block and a live region reads it as the hover does; Enter opens the
    block's exact weights (the link's zoom), Escape goes back. The document takes focus: the arrows read its pieces
    one by one, with their weights, and Enter makes one the query."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    visit(page, f"{app}/long_text")
    overview = page.locator(".av-overview .av-atlas-figure").first
    overview.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    said = page.locator(".av-overview .av-sr[aria-live='polite']").first.text_content()
    assert re.fullmatch(r"queries #128–255, .*, keys #128–255, .*, mean share [\d.e−-]+", said), said  # block (1, 1)
    page.keyboard.press("Enter")
    until(page, "() => window.location.search", lambda search: "zoom=1%2C1" in search or "zoom=1,1" in search,
          timeout=60, what="Enter never opened the block")
    settle(page)
    page.locator(".av-overview .av-atlas-figure").first.focus()
    page.keyboard.press("Escape")
    until(page, "() => window.location.search", lambda search: "zoom=" not in search, timeout=60,
          what="Escape never went back to the whole document")
    settle(page)
    body = page.locator(".av-document-body").first
    pieces = page.evaluate("() => document.querySelector('.av-document').attnviz.pieces")
    body.focus()
    page.keyboard.press("ArrowLeft")
    said = page.locator(".av-document .av-sr[aria-live='polite']").first.text_content()
    assert said.startswith(f"piece {pieces - 2} of {pieces}, “") and ", weight " in said, said
    page.keyboard.press("Enter")
    until(page, "() => window.location.search", lambda search: f"query={pieces - 2}" in search, timeout=60,
          what="Enter never made the piece the query")
    page.context.close()
