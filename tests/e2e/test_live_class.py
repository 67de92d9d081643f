"""A live class in Chromium: a presenter and three students, each in a browser context of their own. The students
follow the presenter's step, answer a question whose histogram the projector counts, see the reveal, and one steps
away and comes back; then the server restarts mid-lesson and the class resumes with every answer kept."""

import json
import re
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from driver import exceptions, settle, shown_value, start_server, until

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
        # The code's heading and the QR code may still be drawing when the join line shows: wait for each.
        expect(teacher.get_by_role("heading", name=code)).to_have_count(1)  # the code in large type
        assert "teach=" not in teacher.url  # the secret never shows in the projector's address bar
        expect(teacher.locator('[data-testid="stImage"] img')).to_have_count(1, timeout=10_000)  # the QR code
        for page in students:
            page.goto(f"{url}/lesson?class={code}")
            following(page, 7)
            assert "teach" not in page.content()
        until(teacher, PANEL, lambda p: p and p["students"] == STUDENTS)

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
        # A changed mind: still one answer. "Answer sent" already shows from the first one, so wait for the new
        # choice to be acknowledged, then for the projector's tally to move.
        students[0].locator(".av-class-option").nth(1).click()
        expect(students[0].locator(".av-class-option").nth(1)).to_have_attribute("aria-pressed", "true", timeout=10_000)
        shown = until(teacher, PANEL, lambda p: p and p["tally"] and p["tally"]["counts"][:2] == [0, 3],
                      what="the changed answer never reached the projector")
        assert shown["tally"]["answered"] == STUDENTS

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


ONE_HOT = """() => { const roots = Array.from(document.querySelectorAll('.av-compare .av-root'));
    if (!roots.length || !roots[0].attnviz) return null;
    return roots[0].attnviz.weights().every(row => Math.max(...row) === 1); }"""


def start_class(page, url: str, step: int) -> str:
    page.goto(f"{url}/lesson?present=1&step={step}")
    settle(page)
    page.get_by_role("button", name="Start a class").click()
    settle(page)
    return re.search(r"/lesson\?class=([A-Z0-9]{6})", page.get_by_text("Join code").first.inner_text()).group(1)


def take_quiz(page, phase: str, answers: dict) -> None:
    page.locator(".av-class-quiz").wait_for(timeout=20_000)
    for item, index in answers.items():
        page.locator(f'input[name="quiz-{phase}-{item}"][value="{index}"]').check()
    page.get_by_role("button", name="Send my answers").click()
    page.get_by_text(f"Sent: {len(answers)} of").wait_for(timeout=10_000)


def test_the_presenters_heatmap_view_reaches_the_students_and_the_quiz_measures_the_gain(browser, classroom):
    from attnviz.classroom import quiz as quizzes

    url, _, _ = classroom
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(3)]
    try:
        teacher, *students = [c.new_page() for c in contexts]
        code = start_class(teacher, url, 6)  # step 6: Compare A | B, drawn in the browser
        for page in students:
            page.goto(f"{url}/lesson?class={code}")
            following(page, 6)
            assert until(page, ONE_HOT, lambda v: v is not None) is False  # soft weights to begin with
        teacher.locator(".av-compare .av-root").first.locator("label.av-control", has_text="Hard").locator("input").check()
        for page in students:  # applied in each student's page, with no rerun
            assert until(page, ONE_HOT, lambda v: v is True)
        assert state(url, code)["view"]["hard"] is True

        quiz = quizzes.load()
        right = {item.id: item.right for item in quiz.items}
        wrong = {item.id: (item.right + 1) % len(item.options) for item in quiz.items}
        teacher.get_by_text("The class: concept quiz").click()
        teacher.get_by_role("button", name="Open the pre-test").click()
        settle(teacher)
        take_quiz(students[0], "pre", wrong)  # 0 % before
        take_quiz(students[1], "pre", right)  # 100 % before
        teacher.get_by_role("button", name="Open the post-test").click()
        settle(teacher)
        take_quiz(students[0], "post", right)
        take_quiz(students[1], "post", right)
        teacher.get_by_role("button", name="Close the test").click()
        settle(teacher)
        # pre 50 %, post 100 % over the 2 who took both: ⟨g⟩ = (100 − 50) / (100 − 50) = 1
        teacher.get_by_text("Normalised gain ⟨g⟩ = 1.00 over the 2 students").wait_for(timeout=20_000)
        expect(teacher.get_by_role("button", name="Answers (CSV, anonymous)")).to_have_count(1, timeout=10_000)
        for page in [teacher, *students]:
            assert exceptions(page) == []
    finally:
        for c in contexts:
            c.close()
