"""Fixtures for the end-to-end tests: one app server and one Chromium for the whole run, a fresh page per test."""

import pytest
from playwright.sync_api import sync_playwright

from driver import FLAGS, SHOTS, chromium_or_skip, start_server


def pytest_collection_modifyitems(items):
    """Every test in this folder drives a browser: mark it so `-m "not browser"` leaves it out."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def server():
    chromium_or_skip()  # no server to start for tests that will skip
    process, url = start_server()
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="session")
def browser():
    SHOTS.mkdir(exist_ok=True)
    executable = chromium_or_skip()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()
