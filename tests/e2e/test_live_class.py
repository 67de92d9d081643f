"""A live class in Chromium, as a room runs it: a projector and the teacher's console in one browser, students each in
a browser of their own, and a phone that takes the class over through the presenter link. The students follow the
class, vote with the results hidden, see them once the teacher shows them, vote again after discussion, and read the
reveal; Next clears the question everywhere; no page ever renders the presenter's secret; the server restarts and the
presenter's next click applies, every answer kept."""

import json
import re
import time
import urllib.request
from contextlib import contextmanager

import pytest
from playwright.sync_api import expect

from driver import TEACHER_KEY, exceptions, free_port, settle, shown_value, start_server, until

STUDENTS = 3
PANEL = "() => { const r = document.querySelector('.av-class'); return r && r.attnviz ? r.attnviz : null; }"
BANNER = ".av-class-banner"


@pytest.fixture
def classroom(tmp_path):
    env = {"ATTNVIZ_CLASS_STORE": str(tmp_path / "classes.sqlite")}
    port = free_port()
    process, url = start_server(env, port=port)
    running = {"process": process}
    yield url, env, port, running
    running["process"].terminate()
    running["process"].wait(10)


def step_of(page) -> str:
    return shown_value(page, "stSelectbox", "Lesson step").split(" of ")[0]


def following(page, step: int, timeout=20):
    page.locator(BANNER).filter(has_text=f"following the teacher, step {step}").wait_for(timeout=timeout * 1000)
    deadline = time.time() + timeout
    while step_of(page) != str(step) and time.time() < deadline:
        page.wait_for_timeout(100)
    settle(page)
    assert step_of(page) == str(step)


def state(url: str, code: str) -> dict:
    return json.load(urllib.request.urlopen(f"{url}/_attnviz/class/{code}", timeout=10))


def start_class(page, url: str, step: int) -> str:
    """A class started from the projector's teacher link at `step`: its code."""
    page.goto(f"{url}/lesson?present=1&step={step}&teacher={TEACHER_KEY}")
    settle(page)
    assert "teacher=" not in page.url  # the key leaves the address bar at once
    page.get_by_role("button", name="Start a class").click()
    settle(page)
    return re.search(r"/lesson\?class=([A-Z0-9]{6})", page.get_by_text("Join code").first.inner_text()).group(1)


def open_console(context, url: str, code: str):
    """The teacher's console in the presenter's browser (its cookie makes it the presenter)."""
    console = context.new_page()
    console.goto(f"{url}/lesson?class={code}&console=1")
    console.get_by_text(f"Teacher's console · class {code}").wait_for(timeout=20_000)
    return console


def join(contexts, url: str, code: str, step: int) -> list:
    """A page for each student's browser, following the class on `step`."""
    pages = [context.new_page() for context in contexts]
    for page in pages:
        page.goto(f"{url}/lesson?class={code}")
        following(page, step, timeout=60)  # a student's first page load, on a machine the suite loads; each step
        # the class follows after it is held to following's 20 s
    return pages


@contextmanager
def one_student(browser, url: str, step: int, projector_size=(1280, 800)):
    """A class started on `step` with its console in the teacher's browser and one student following in a browser of
    their own: (projector, console, student), both browsers closed after."""
    teacher = browser.new_context(viewport=dict(zip(("width", "height"), projector_size)))
    student_context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        projector = teacher.new_page()
        code = start_class(projector, url, step)
        console = open_console(teacher, url, code)
        (student,) = join([student_context], url, code, step)
        yield projector, console, student
    finally:
        teacher.close()
        student_context.close()


def secret_of(context) -> str:
    """The presenter's secret, as the HttpOnly cookie holds it (no page's script can read it)."""
    return next(c["value"] for c in context.cookies() if c["name"] == "attnviz_teach").split(".", 1)[1]


def assert_no_secret(page, secret: str) -> None:
    """Neither the page's text nor any attribute (links, images, data) holds the secret, nor its address bar."""
    assert secret not in page.content() and secret not in page.url
    assert page.evaluate("s => !document.body.innerText.includes(s)", secret)


def qr_modules(image_bytes: bytes, modules: int) -> list[list[bool]]:
    """The dark modules of a QR code of `modules` × `modules` drawn with a 2-module border (as the app draws it, at
    whatever size the page sends), read off the image's pixels at each module's centre: equal to segno's matrix for a
    payload only if the payload is that one."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(image_bytes)).convert("L")
    scale = image.width / (modules + 4)
    return [[image.getpixel((int((c + 2.5) * scale), int((r + 2.5) * scale))) < 128 for c in range(modules)]
            for r in range(modules)]


def test_a_room_votes_twice_sees_the_results_when_shown_and_survives_a_restart(browser, classroom):
    import segno

    url, env, port, running = classroom
    teacher = browser.new_context(viewport={"width": 1920, "height": 1080})
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(STUDENTS)]
    try:
        projector = teacher.new_page()
        code = start_class(projector, url, 7)
        secret = secret_of(teacher)
        join_link = projector.get_by_text("Join code").first.inner_text().split("· ")[-1].strip()
        qr = projector.locator('[data-testid="stImage"] img').first
        qr.wait_for(timeout=10_000)
        drawn = projector.request.get(url + qr.get_attribute("src").removeprefix(url)).body()
        expected = [[bool(v) for v in row] for row in segno.make(join_link, error="m").matrix]
        assert qr_modules(drawn, len(expected)) == expected
        console = open_console(teacher, url, code)
        students = join(contexts, url, code, 7)
        until(projector, PANEL, lambda p: p and p["students"] == STUDENTS)
        for page in [projector, console, *students]:
            assert_no_secret(page, secret)

        console.get_by_role("button", name=re.compile("^Ask: Which word does")).click()
        for page in (projector, students[0]):  # predict first: the step's setup, not its figure
            page.get_by_text("Predict first").first.wait_for(timeout=20_000)
            assert page.locator(".js-plotly-plot").count() == 0
        assert console.locator(".js-plotly-plot").count() > 0  # the teacher sees everything
        for page, choice in zip(students, (0, 1, 1)):
            page.locator(".av-class-option").nth(choice).click()
            page.get_by_text("Answer sent").wait_for(timeout=10_000)
        shown = until(projector, PANEL, lambda p: p and p["answered"] == STUDENTS)
        assert shown["results"] is None  # the projector counts the votes and hides what they are
        assert students[0].locator(".av-class-results").count() == 0
        hidden = until(console, PANEL, lambda p: p and p["results"] and p["results"][0]["answered"] == STUDENTS)
        assert hidden["results"][0]["counts"][:2] == [1, 2]
        expect(console.locator(".av-class-key")).to_contain_text("Key (not on the projector)")
        assert projector.locator(".av-class-key").count() == 0

        console.get_by_role("button", name="Show the results").click()
        assert until(projector, PANEL, lambda p: p and p["results"])["results"][0]["counts"][:2] == [1, 2]
        for page in students:  # every student reads the class's answers as text
            expect(page.locator(".av-class-results")).to_contain_text("Round 1: 3 answered", timeout=10_000)

        console.get_by_role("button", name="Talk to your neighbour, then vote again").click()
        for page in students:
            page.get_by_text("Round 2").first.wait_for(timeout=10_000)
            page.locator(".av-class-option").nth(1).click()
            expect(page.locator(".av-class-option").nth(1)).to_have_attribute("aria-pressed", "true", timeout=10_000)
        assert until(projector, PANEL, lambda p: p and p["answered"] == STUDENTS)["results"] is None  # hidden again
        console.get_by_role("button", name="Lock answers").click()
        students[0].get_by_text("Answers are locked").first.wait_for(timeout=10_000)
        assert students[0].locator(".av-class-option").first.is_disabled()
        console.get_by_role("button", name="Reveal").click()
        rounds = until(projector, PANEL, lambda p: p and p["results"] and len(p["results"]) == 2)["results"]
        assert [r["counts"][:2] for r in rounds] == [[1, 2], [0, 3]]  # round 1 beside round 2
        truth = state(url, code)["truth"]
        for page in students:
            note = page.get_by_text(re.compile("^Answer: ")).first
            note.wait_for(timeout=10_000)
            assert f"{round(100 * truth['share'])}% of the class got it" in note.inner_text()  # the last round's
        for page in (projector, students[0]):  # the reveal shows the rest
            page.locator(".st-key-lesson_matrix .js-plotly-plot").wait_for(timeout=20_000)
            assert page.get_by_text("Predict first").count() == 0

        projector.get_by_role("button", name="Next").click()  # the question leaves every screen
        for page in students:
            following(page, 8)
            assert page.locator(".av-class-question").count() == 0
        until(console, "() => document.querySelector('h2') && document.querySelector('h2').innerText",
              lambda h: h and h.startswith("8."), what="the console never followed the projector")

        # The server restarts mid-lesson (same address): the presenter's next click applies, nothing is lost.
        running["process"].terminate()
        running["process"].wait(10)
        running["process"], _ = start_server(env, port=port)
        until(projector, PANEL, lambda p: p and p["students"] == STUDENTS, timeout=30,
              what="the projector never reconnected")
        projector.get_by_role("button", name="Next").click()
        until(projector, f"() => fetch('/_attnviz/class/{code}').then(r => r.json()).then(s => s.step)",
              lambda step: step == 9, what="the presenter's first click after the restart did not apply")
        for page in students:
            following(page, 9)
        kept = state(url, code)
        assert kept["students"] == STUDENTS and kept["step"] == 9

        # A phone opens the presenter link: the console, on the class's step (never a reset to step 1).
        phone = browser.new_context(viewport={"width": 400, "height": 860}).new_page()
        phone.goto(f"{url}/lesson?class={code}&console=1&teach={secret}")
        phone.get_by_text(f"Teacher's console · class {code}").wait_for(timeout=20_000)
        settle(phone)
        assert "teach=" not in phone.url and step_of(phone) == "9" and state(url, code)["step"] == 9
        for page in [projector, console, phone, *students]:
            assert_no_secret(page, secret)
            assert exceptions(page) == []
        phone.context.close()
    finally:
        teacher.close()
        for c in contexts:
            c.close()


ONE_HOT = """() => { const roots = Array.from(document.querySelectorAll('.av-compare .av-root'));
    if (!roots.length || !roots[0].attnviz) return null;
    return roots[0].attnviz.weights().every(row => Math.max(...row) === 1); }"""


def take_quiz(page, phase: str, answers: dict) -> None:
    page.locator(".av-class-quiz").wait_for(timeout=20_000)
    for item, index in answers.items():
        page.locator(f'input[name="quiz-{phase}-{item}"][value="{index}"]').check()
    page.get_by_role("button", name="Send my answers").click()
    page.get_by_text(f"Sent: {len(answers)} of").wait_for(timeout=10_000)


def test_the_presenters_heatmap_view_reaches_the_students_and_the_quiz_measures_the_gain(browser, classroom):
    """The projector's heatmap view reaches each student's page without a rerun; the console runs the concept quiz
    before and after, shows ⟨g⟩, and its record reads with the csv module alone."""
    import csv

    from attnviz.classroom import quiz as quizzes

    url, _, _, _ = classroom
    teacher_context = browser.new_context(viewport={"width": 1280, "height": 800})
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(2)]
    try:
        teacher = teacher_context.new_page()
        students = [c.new_page() for c in contexts]
        code = start_class(teacher, url, 6)  # step 6: Compare A | B, drawn in the browser
        for page in students:
            page.goto(f"{url}/lesson?class={code}")
            following(page, 6)
            assert until(page, ONE_HOT, lambda v: v is not None) is False  # soft weights to begin with
        teacher.locator(".av-compare .av-root").first.locator("label.av-control", has_text="Hard").locator("input").check()
        for page in students:  # applied in each student's page, with no rerun
            assert until(page, ONE_HOT, lambda v: v is True)
        assert state(url, code)["view"]["hard"] is True

        console = open_console(teacher_context, url, code)
        quiz = quizzes.load()
        right = {item.id: item.right for item in quiz.items}  # as each page shows the options
        wrong = {item.id: (item.right + 1) % len(item.options) for item in quiz.items}
        console.get_by_text("Concept quiz", exact=True).first.click()
        console.get_by_role("button", name="Open the pre-test").click()
        settle(console)
        take_quiz(students[0], "pre", wrong)  # 0 % before
        take_quiz(students[1], "pre", right)  # 100 % before
        console.get_by_role("button", name="Open the post-test").click()
        settle(console)
        take_quiz(students[0], "post", right)
        take_quiz(students[1], "post", right)
        console.get_by_role("button", name="Close the test").click()
        settle(console)
        # pre 50 %, post 100 % over the 2 who took both: ⟨g⟩ = (100 − 50) / (100 − 50) = 1
        console.get_by_text("Normalised gain ⟨g⟩ = 1.00 over the 2 students").wait_for(timeout=20_000)
        with console.expect_download() as download:
            console.get_by_role("button", name="Every answer (CSV)").click()
        rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
        assert len(rows) == 4 * len(quiz.items)
        first = quiz.items[0]
        post = [r for r in rows if r["kind"] == "post-test" and r["question"] == first.id]
        assert [r["answer"] for r in post] == [first.options[first.answer]] * 2 and {r["right"] for r in post} == {"yes"}
        pre = sorted((r["right"], r["answer"]) for r in rows if r["kind"] == "pre-test" and r["question"] == first.id)
        assert pre[0] == ("no", first.shown[(first.right + 1) % len(first.options)])  # the option's text, not an index
        for page in [teacher, console, *students]:
            assert exceptions(page) == []
    finally:
        teacher_context.close()
        for c in contexts:
            c.close()


FOCUSED = "() => document.activeElement && document.activeElement.className"


def test_a_student_answers_by_keyboard_alone_and_hears_the_reveal(browser, classroom):
    """Tab reaches the options, Enter answers (the choice is pressed and its status said), and the live region reads
    the question when it is asked and the answer at the reveal: what a screen reader says."""
    url, _, _, _ = classroom
    with one_student(browser, url, 2) as (_, console, student):
        console.get_by_role("button", name=re.compile("^Ask: Li → Mu is gone")).click()
        live = student.locator(".av-class-live")
        expect(live).to_have_text(re.compile("^Question: Li → Mu is gone"), timeout=10_000)
        student.evaluate("() => document.activeElement && document.activeElement.blur()")  # start from the page
        for _ in range(80):
            student.keyboard.press("Tab")
            if "av-class-option" in (student.evaluate(FOCUSED) or ""):
                break
        else:
            raise AssertionError("Tab never reached the question's options")
        student.keyboard.press("Tab")  # the second option
        chosen = student.evaluate("() => document.activeElement.textContent")
        student.keyboard.press("Enter")
        pressed = student.locator('.av-class-option[aria-pressed="true"]')
        expect(pressed).to_have_text(chosen, timeout=10_000)
        expect(student.locator(".av-class-question [role=status]")).to_contain_text("Answer sent")
        assert "av-class-option" in student.evaluate(FOCUSED)  # focus stays on the answer, not lost to <body>
        console.get_by_role("button", name="Reveal").click()
        expect(live).to_have_text(re.compile("^Answer: "), timeout=10_000)
        assert exceptions(student) == []
