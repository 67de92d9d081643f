"""A live class in Chromium: a presenter and three students, each in a browser context of their own. The students
follow the presenter's step, answer a question whose histogram the projector counts, see the reveal, and one steps
away and comes back; then the server restarts mid-lesson and the class resumes with every answer kept."""

import json
import re
import time
import urllib.request

import pytest

from driver import exceptions, settle, shown_value, start_server

STUDENTS = 3
PANEL = "() => { const r = document.querySelector('.av-class'); return r && r.attnviz ? r.attnviz : null; }"
BANNER = ".av-class-banner"


@pytest.fixture
def classroom(tmp_path):
    env = {"ATTNVIZ_CLASS_STORE": str(tmp_path / "classes.sqlite")}
    process, url = start_server(env)
    yield url, env, process
    process.terminate()
    process.wait(10)


def wait_for(page, script, predicate, timeout=20):
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        last = page.evaluate(script)
        if predicate(last):
            return last
        page.wait_for_timeout(100)
    raise AssertionError(f"never reached: last {last!r}")


def step_of(page) -> str:
    return shown_value(page, "stSelectbox", "Lesson step").split(" of ")[0]


def following(page, step: int, timeout=20):
    page.locator(BANNER).filter(has_text=f"following the presenter, step {step}").wait_for(timeout=timeout * 1000)
    deadline = time.time() + timeout
    while step_of(page) != str(step) and time.time() < deadline:
        page.wait_for_timeout(100)
    settle(page)
    assert step_of(page) == str(step)


def state(url: str, code: str) -> dict:
    return json.load(urllib.request.urlopen(f"{url}/_attnviz/class/{code}", timeout=10))


def test_a_presenter_drives_three_students_who_answer_and_see_the_reveal(browser, classroom):
    url, env, process = classroom
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(STUDENTS + 1)]
    try:
        teacher, *students = [c.new_page() for c in contexts]
        teacher.goto(f"{url}/lesson?present=1&step=7")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class").click()
        settle(teacher)
        join = teacher.get_by_text("Join code").first.inner_text()
        code = re.search(r"/lesson\?class=([A-Z0-9]{6})", join).group(1)
        assert teacher.get_by_role("heading", name=code).count() == 1  # the code in large type
        assert "teach=" not in teacher.url  # the secret never shows in the projector's address bar
        assert teacher.locator('[data-testid="stImage"] img').count() == 1  # the QR code
        for page in students:
            page.goto(f"{url}/lesson?class={code}")
            following(page, 7)
            assert "teach" not in page.content()
        wait_for(teacher, PANEL, lambda p: p and p["students"] == STUDENTS)

        teacher.get_by_role("button", name="Next").click()  # step 8: every student follows
        settle(teacher)
        for page in students:
            following(page, 8)

        students[2].get_by_role("button", name="Explore on my own").click()
        teacher.get_by_role("button", name="Previous").click()  # back to 7; student 2 stays on 8
        settle(teacher)
        for page in students[:2]:
            following(page, 7)
        students[2].wait_for_timeout(1500)
        assert step_of(students[2]) == "8" and "exploring on your own" in students[2].locator(BANNER).inner_text()
        students[2].get_by_role("button", name="Follow the class").click()
        following(students[2], 7)  # back with the class

        ask = teacher.get_by_role("button", name=re.compile("^Ask: Which word does"))
        ask.click()
        settle(teacher)
        question = state(url, code)["question"]
        assert question["id"] == "s7-word" and "answer" not in question  # the truth stays on the server
        choices = [0, 1, 1]
        for page, choice in zip(students, choices):
            page.locator(".av-class-option").nth(choice).click()
            page.get_by_text("Answer sent").wait_for(timeout=10_000)
        students[0].locator(".av-class-option").nth(1).click()  # a changed mind: still one answer
        students[0].get_by_text("Answer sent").wait_for(timeout=10_000)
        shown = wait_for(teacher, PANEL, lambda p: p and p["tally"] and p["tally"]["answered"] == STUDENTS)
        assert shown["tally"]["counts"][:2] == [0, 3]

        teacher.get_by_role("button", name="Reveal").click()
        settle(teacher)
        truth = state(url, code)["truth"]
        for page in students:
            note = page.get_by_text(re.compile("^Answer: ")).first
            note.wait_for(timeout=10_000)
            assert f"{round(100 * truth['share'])}% of the class got it" in note.inner_text()

        # The server restarts mid-lesson: the class, its step and its answers are all still there.
        process.terminate()
        process.wait(10)
        process, url2 = start_server(env)
        classroom_state = state(url2, code)
        assert classroom_state["step"] == 7 and classroom_state["students"] == STUDENTS
        assert classroom_state["tally"]["counts"][:2] == [0, 3] and classroom_state["revealed"]
        page = students[0]
        page.goto(f"{url2}/lesson?class={code}")
        following(page, 7)
        for p in [teacher, *students]:
            assert exceptions(p) == []
    finally:
        for c in contexts:
            c.close()
        process.terminate()
