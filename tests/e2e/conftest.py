"""Fixtures for the end-to-end tests: one app server and one Chromium for the whole run, a fresh page per test."""

import pytest
from playwright.sync_api import sync_playwright

from driver import CHROMIUM, FLAGS, SHOTS, start_server


@pytest.fixture(scope="session")
def server():
    process, url = start_server()
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="session")
def browser():
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()
