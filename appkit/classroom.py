"""The live class on the Lesson page (attnviz.classroom holds the logic). Three surfaces of one class:

- the projector (`present=1`): the step, a slim class strip (the join code, a small QR code, who is here, a full-screen
  join slide on demand) and the open question in the step's type, with its results once the teacher shows them;
- the teacher's console (`console=1`, the same laptop in another window, or a phone through the presenter link): the
  controls (ask, show the results, lock, a second round after discussion, a timer, reveal), the answer key, the live
  tallies, who is connected, the concept quiz and the class's record;
- a student's page (`class=CODE`): follows the class, answers, and reads the results once shown.

Starting a class takes the teacher key (attnviz.classroom.teacher): the teacher link the server prints at start
carries it (`teacher=KEY`), or the teacher types it. The presenter's secret is never rendered: it lives in the
presenter's session, in an HttpOnly cookie (so a new window, or the same window after a server restart, is still the
presenter), and in the presenter link, which the console copies without showing. The projector and the console both
drive the class, and follow it: the step and the lesson's values are published when the presenter moves, before the
step is computed, and a presenter link or a restart takes the class's step, never resetting it."""

from __future__ import annotations

import io
import urllib.parse

import streamlit as st

from attnviz import web
from attnviz.classroom import live, quiz as quizzes, report, teacher
from attnviz.classroom.http import COOKIE, PATH
from attnviz.classroom.questions import Question
from attnviz.classroom.store import ClassError, Record, clean_code, shared_store
from attnviz.urlstate import parse_params
from appkit.common import md_escape
from appkit.interactive import _mount
from appkit.present import CHART_FONT_PX, PRESENT, chart

CLASS, TEACH, CONSOLE, QUIZ = "class", "teach", "console", "quiz"  # URL parameters (QUIZ: the concept quiz alone)
ROLE = "_class"  # session: {"code", "secret" and "surface" ("projector" or "console") for the presenter}
ADOPT = "_class_adopt"  # session: this session has just taken its class: its step and values come from the class
LEFT = "_class_left"  # session: the class this session left (its cookie no longer makes it the presenter)
KEY = "_class_teacher_key"  # session: the teacher key this session was given
OFFERED = "_class_offered"  # session: this run's step's questions
PUBLISHED = "_class_published"  # session: the (code, step, params) this session and the class last agreed on
QUIZ_FILE = "_class_quiz"  # session: the presenter's own quiz (its JSON value)
SLIDE = "_class_slide"  # session: the projector shows the full-screen join slide
ERROR = "_class_error"
HELD = "_lesson_held"  # session: what this run holds back (appkit.lesson.common.held reads it)
PRESENTER_PANEL_PX = 22  # the projector's type (appkit.present's PRESENTER_CSS)

_panel = st.components.v2.component("attnviz_class", js=web.bundle("streamlit/classroom.mjs"), css=web.css(),
                                    isolate_styles=False)


def store():
    return shared_store()


def url() -> str:
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return (f"/{base}" if base else "") + PATH


def role() -> dict | None:
    """This session's class: {"code", "secret", "surface"} for the presenter, {"code"} for a student, or None.

    A link's `teacher` gives the session the teacher key; `class` joins: as the presenter with a right `teach` (the
    presenter link) or with this browser's presenter cookie for that class, else as a student. A session that takes
    a class adopts its step and values (adopt_class)."""
    params = st.query_params
    if teacher.PARAM in params:
        if teacher.is_key(params[teacher.PARAM]):
            st.session_state[KEY] = params[teacher.PARAM]
        else:
            st.error("This teacher link's key is not this server's: open the link the server printed when it started.")
        del st.query_params[teacher.PARAM]  # never left in the address bar a projector shows
    if CLASS not in params:
        return st.session_state.get(ROLE)
    try:
        code = clean_code(params[CLASS])
    except ClassError as error:
        st.session_state.pop(ROLE, None)
        st.error(str(error))
        return None
    surface = "console" if params.get(CONSOLE) == "1" else "projector"
    held = st.session_state.get(ROLE)
    secret, linked = None, TEACH in params
    if linked:
        secret = params[TEACH]
        del st.query_params[TEACH]  # never left in the address bar
    elif st.session_state.get(LEFT) != code:
        secret = cookie_secret(code)
    if secret is not None and not (held and held.get("secret") == secret and held["code"] == code):
        try:
            store().check_secret(code, secret)
            take({"code": code, "secret": secret, "surface": surface})
        except ClassError as error:
            if linked:  # a stale cookie says nothing: this browser just joins as a student
                st.error(str(error))
    held = st.session_state.get(ROLE)
    if held and held["code"] == code and "secret" in held:
        held["surface"] = surface
    elif not held or held["code"] != code:
        take({"code": code})
    return st.session_state.get(ROLE)


def cookie_secret(code: str) -> str | None:
    """The presenter's secret this browser's cookie holds for class `code` (set by POST …/console), or None."""
    value = (st.context.cookies or {}).get(COOKIE, "")
    held_code, _, secret = value.partition(".")
    return secret if held_code == code and secret else None


def take(held: dict) -> None:
    st.session_state[ROLE] = held
    st.session_state[ADOPT] = True
    st.session_state.pop(PUBLISHED, None)


def presenting(held: dict | None) -> bool:
    return bool(held and "secret" in held)


def kept_params() -> dict:
    """What the page's link keeps besides its controls: the class, and the console's surface."""
    held = st.session_state.get(ROLE)
    if not held:
        return {}
    return {CLASS: held["code"], **({CONSOLE: "1"} if held.get("surface") == "console" else {})}


def lesson_params(schema: dict) -> dict[str, str]:
    """Every lesson value but the step, as a link writes it (defaults included, so two pages compare name by name)."""
    return {name: param.encode(st.session_state.get(name, param.default)) for name, param in schema.items()
            if name != "step"}


def adopt(state: dict, schema: dict) -> None:
    """The class's step and lesson values, put into this session before the page draws them."""
    params = state.get("params") if isinstance(state.get("params"), dict) else {}
    values = parse_params({k: v for k, v in params.items() if isinstance(v, str)}, schema)
    values["step"] = parse_params({"step": str(state.get("step"))}, {"step": schema["step"]})["step"]
    for name, value in values.items():
        st.session_state[name] = value


def adopt_class(schema: dict) -> None:
    """Before the page's controls are drawn: a session that has just taken its class (a student's first visit, a
    presenter link, the presenter's window after a server restart) takes the class's step and values, so nobody's
    arrival moves the class."""
    held = st.session_state.get(ROLE)
    if not held or not st.session_state.pop(ADOPT, False):
        return
    try:
        record = store().get(held["code"])
    except ClassError:
        return  # said by panel()
    adopt(record.state, schema)
    agreed(held["code"], schema)


def publish(schema: dict) -> bool:
    """Before the step is computed: a presenter who moved (a step, a sentence, a slider) publishes it now, so the room
    moves while this page computes the step. Whether it moved the class to another step."""
    held = st.session_state.get(ROLE)
    if not presenting(held):
        return False
    step, params = st.session_state.step, lesson_params(schema)
    if st.session_state.get(PUBLISHED) == (held["code"], step, params):
        return False
    try:
        record = store().get(held["code"])
    except ClassError:
        return False  # said by panel()
    changes = {"params": params}
    if record.state["step"] != step:
        changes.update(step=step, view={})
    act(held["code"], held["secret"], **changes)
    agreed(held["code"], schema)
    return "step" in changes


def agreed(code: str, schema: dict) -> None:
    st.session_state[PUBLISHED] = (code, st.session_state.step, lesson_params(schema))


def current() -> Record | None:
    """This session's class as this run reads it (once: what the step holds back and the panel come from it), or None;
    a class that has ended is said so, and the session leaves it."""
    held = st.session_state.get(ROLE)
    if not held:
        return None
    try:
        return store().get(held["code"])
    except ClassError as error:
        st.warning(str(error))
        st.session_state.pop(ROLE, None)
        return None


def holding(step: int, record: Record | None) -> tuple[str, ...]:
    """What this page holds back of `step` (the open question's `holds`): on a student's page and the projector, while a
    question of this step is open and not revealed, so the room predicts before it sees. The console holds nothing."""
    if record is None or st.session_state[ROLE].get("surface") == "console":
        return ()
    question = record.state.get("question")
    if not question or record.state.get("revealed") or question.get("step") != step:
        return ()
    return tuple(question.get("holds", ("figure", "result")))


def offer(questions: list[Question]) -> None:
    """The step's questions, for the presenter to ask (each step calls this with its own numbers)."""
    st.session_state[OFFERED] = list(questions)


def act(code: str, secret: str, **changes) -> None:
    try:
        store().act(code, secret, **changes)
    except ClassError as error:
        st.session_state[ERROR] = str(error)


# ---------------------------------------------------------------- the surfaces


def panel(where, step: int, schema: dict, record: Record | None) -> None:
    """The class at the top of the Lesson (`record`: current()'s): starting one (presenter mode), the projector's
    strip, the console, or a student's panel."""
    held = st.session_state.get(ROLE)
    if held is None or record is None:
        if held is None and st.session_state.get(PRESENT):
            starter(where)
        return
    if not presenting(held):
        student(where, record, step, schema)
    elif held.get("surface") == "console":
        console(where, record, held, schema)
    else:
        projector(where, record, held, schema)


def starter(where) -> None:
    """"Start a class", with the teacher key: from the teacher link, or typed here."""
    if st.session_state.get(KEY) and teacher.is_key(st.session_state[KEY]):
        where.button("Start a class", icon=":material/groups:", key="class_start", on_click=start,
                     help="Students join from their phones with a code or a QR code, and follow this screen.")
    else:  # one button's height on the projector; the key is asked for inside it
        with where.popover("Start a class", icon=":material/groups:"), st.form("class_key", border=False):
            typed = st.text_input("Teacher key", type="password", key="class_key_typed",
                                  help="Printed by the server when it started, with a teacher link that fills it in.")
            if st.form_submit_button("Start the class"):
                if teacher.is_key(typed):
                    st.session_state[KEY] = typed
                    start()
                    st.rerun()
                st.error("That is not this server's teacher key. The server printed it when it started (in its "
                         "terminal, or its log), in a teacher link that fills it in.")
    if ERROR in st.session_state:
        where.error(st.session_state.pop(ERROR))


def start() -> None:
    try:
        code, secret = store().create()
    except ClassError as error:
        st.session_state[ERROR] = str(error)
        return
    st.session_state[ROLE] = {"code": code, "secret": secret, "surface": "projector"}
    st.session_state.pop(PUBLISHED, None)  # the next publish() sends this page's step to the new class


def links(code: str, secret: str) -> tuple[str, str, str]:
    """(join link, console link, presenter link) on this server's address as the presenter's browser reached it. The
    console link holds no secret (this browser's cookie makes it the presenter); the presenter link does."""
    parts = urllib.parse.urlsplit(st.context.url or "http://localhost:8501/lesson")
    base = parts.path.rsplit("/", 1)[0]
    origin = f"{parts.scheme}://{parts.netloc}{base}/lesson"
    return (f"{origin}?{CLASS}={code}", f"{origin}?{CLASS}={code}&{CONSOLE}=1",
            f"{origin}?{CLASS}={code}&{CONSOLE}=1&{TEACH}={urllib.parse.quote(secret)}")


@st.cache_data(max_entries=64, show_spinner=False)
def qr_png(link: str) -> bytes:
    import segno

    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=8, border=2)
    return buffer.getvalue()


def join_slide() -> bool:
    """Whether the projector shows the full-screen join slide instead of the step."""
    held = st.session_state.get(ROLE)
    return presenting(held) and held.get("surface") == "projector" and bool(st.session_state.get(SLIDE))


def draw_join_slide(where) -> None:
    held = st.session_state[ROLE]
    join, _, _ = links(held["code"], held["secret"])
    left, right = where.columns([3, 2], vertical_alignment="center")
    left.markdown(f"# Join the class\n\n## {md_escape(join.split('?')[0])}\n\n# Code: {held['code']}")
    with left:
        _mount(_panel, {"role": "projector", "code": held["code"], "url": url(), "secret": held["secret"],
                        "step": st.session_state.step, "params": {}, "count": True, "font_px": PRESENTER_PANEL_PX},
               key="class_slide_live")
    left.button("Back to the step", key="class_slide_off", on_click=lambda: st.session_state.pop(SLIDE, None))
    right.image(qr_png(join), width=480, caption=f"Join class {held['code']}",
                alt=f"QR code of the link that joins class {held['code']}")


def projector(where, record, held: dict, schema: dict) -> None:
    """The room's screen: a slim strip pinned above the page (the code, the join link, a small QR code, the join slide
    and the console), which takes none of the step's height; then, in the page, the open question, drawn by the
    browser (nothing while none is open)."""
    join, console_link, _ = links(record.code, held["secret"])
    presenting_type = bool(st.session_state.get(PRESENT))
    with where.container(key="class_strip"):
        code_column, qr_column, slide, console_button = st.columns([9, 1, 2, 2], vertical_alignment="center")
        code_column.caption(f"Join code **{record.code}** · {join}")
        qr_column.image(qr_png(join), width=52, alt=f"QR code of the link that joins class {held['code']}")
        slide.button("Join slide", icon=":material/qr_code_2:", key="class_slide", width="stretch",
                     on_click=lambda: st.session_state.update({SLIDE: True}),
                     help="The join code and a large QR code on the whole screen.")
        console_button.link_button("Console", console_link, icon=":material/tune:", width="stretch",
                                   help="Your controls, the answer key and the live answers, in a window of their own "
                                        "(or on a phone: the console's Copy the presenter link).")
    with where:
        _mount(_panel, {"role": "projector", "code": record.code, "url": url(), "secret": held["secret"],
                        "step": st.session_state.step, "params": lesson_params(schema),
                        "held": bool(st.session_state.get(HELD)),
                        "font_px": PRESENTER_PANEL_PX if presenting_type else 15},
               key="class_live", on_follow_change=lambda: follow("class_live", schema))


def console(where, record, held: dict, schema: dict) -> None:
    """The teacher's controls: the live part in the browser (each click a POST to the class), the quiz and the
    record here."""
    join, _, presenter_link = links(record.code, held["secret"])
    with where.container(border=True, key="class_console"):
        st.subheader(f"Teacher's console · class {record.code}")
        st.caption(f"Students join at {join}. This page is yours: keep it off the projector (it shows the answer key).")
        if urllib.parse.urlsplit(join).hostname in ("localhost", "127.0.0.1", "::1", "0.0.0.0"):
            st.caption("Students' devices cannot reach this machine as localhost: start the app with "
                       "`--server.address 0.0.0.0` and open it by this machine's network address.")
        _mount(_panel, {"role": "console", "code": record.code, "url": url(), "secret": held["secret"],
                        "console": store().console_token(record.code, held["secret"]),
                        "presenter_link": presenter_link, "step": st.session_state.step, "params": lesson_params(schema),
                        "offered": [q.full() for q in st.session_state.get(OFFERED, [])], "font_px": 15},
               key="class_live", on_follow_change=lambda: follow("class_live", schema))
        with st.expander("Concept quiz", expanded=bool(record.state.get("quiz"))):
            quiz_controls(record, held)
        results(record)
        st.button("Leave the class", key="class_leave", on_click=leave,
                  help="This browser stops presenting; the class stays open (the presenter link takes it back).")
        if ERROR in st.session_state:
            st.error(st.session_state.pop(ERROR))


def leave() -> None:
    held = st.session_state.pop(ROLE, None)
    if held:
        st.session_state[LEFT] = held["code"]


def current_quiz() -> quizzes.Quiz:
    data = st.session_state.get(QUIZ_FILE)
    return quizzes.parse(data) if data else quizzes.load()


def open_test(code: str, secret: str, phase: str) -> None:
    """Open the pre- or post-test with this presenter's quiz, read only when the button is pressed."""
    act(code, secret, quiz=phase, quiz_items=current_quiz().to_dict(), question=None)


def quiz_controls(record, held: dict) -> None:
    phase = record.state.get("quiz")
    st.markdown(f"**Concept quiz**{f': the {phase}-test is open' if phase else ''}")
    left, middle, right = st.columns(3)
    for column, name in ((left, "pre"), (middle, "post")):
        column.button(f"Open the {name}-test", key=f"class_quiz_{name}", disabled=phase == name, width="stretch",
                      on_click=open_test, args=(record.code, held["secret"], name))
    right.button("Close the test", key="class_quiz_close", disabled=not phase, width="stretch",
                 on_click=act, args=(record.code, held["secret"]), kwargs={"quiz": None})
    upload = st.file_uploader("Your own quiz (JSON: docs/pages.md#teach-a-class)", type=["json"], key="class_quiz_file")
    if upload is not None:
        try:
            st.session_state[QUIZ_FILE] = quizzes.loads(upload.getvalue()).to_dict()
            st.caption(f"Your quiz: {len(current_quiz().items)} items.")
        except quizzes.QuizError as error:
            st.error(f"This quiz file cannot be used. {error}")


def results(record) -> None:
    """The quiz's measures and charts, and the class's record as three CSV files."""
    answers = store().all_answers(record.code)
    quiz = live.quiz_of(record) or current_quiz()
    nicknames = {s.id: s.nickname for s in store().roster(record.code)} if record.state.get("nicknames") else None
    if any(a.question.startswith("quiz:") for a in answers):
        found = quizzes.results(quiz, answers)
        if found.gain is None:
            st.markdown(f"Pre-test: {len(found.pre)} students; post-test: {len(found.post)}. The gain needs students "
                        "who took both" + (" and a pre-test below 100%." if found.matched else "."))
        else:
            d = "undefined" if found.cohen_d is None else f"{found.cohen_d:.2f}"
            mean_g = "undefined" if found.mean_g is None else f"{found.mean_g:.2f}"
            st.markdown(f"**Normalised gain ⟨g⟩ = {found.gain:.2f}** over the {found.matched} students who took both: "
                        f"(post {found.post_mean:.0f}% − pre {found.pre_mean:.0f}%) / (100 − {found.pre_mean:.0f}%). "
                        f"Mean of each student's g: {mean_g}; Cohen's d: {d}.")
        from attnviz.figures import quiz_figures

        scores, items = quiz_figures(found, quiz)
        chart(st, scores, key="class_quiz_scores")
        chart(st, items, key="class_quiz_items")
    if not answers:
        return
    asked = store().asked(record.code)
    files = st.columns(3)
    files[0].download_button("Every answer (CSV)", report.answers_csv(answers, asked, quiz, nicknames),
                             f"attnviz_class_{record.code}_answers.csv", "text/csv", on_click="ignore", key="class_csv")
    files[1].download_button("Each student's scores (CSV)", report.students_csv(answers, quiz, nicknames),
                             f"attnviz_class_{record.code}_students.csv", "text/csv", on_click="ignore",
                             key="class_students_csv")
    files[2].download_button("The class's measures (CSV)", report.summary_csv(answers, quiz),
                             f"attnviz_class_{record.code}_summary.csv", "text/csv", on_click="ignore",
                             key="class_summary_csv")


def student(where, record, step: int, schema: dict) -> None:
    key = "class_follow"
    with where:
        _mount(_panel, {"role": "student", "code": record.code, "url": url(), "step": step,
                        "params": lesson_params(schema), "held": bool(st.session_state.get(HELD)),
                        "font_px": CHART_FONT_PX if st.session_state.get(PRESENT) else 15},
               key=key, on_follow_change=lambda: follow(key, schema))


def follow(key: str, schema: dict) -> None:
    """The class's step and lesson values, taken into this session before the rerun draws them (a presenter's too:
    the projector follows the console, and the console the projector)."""
    sent = st.session_state[key].get("follow")
    if not isinstance(sent, dict):
        return
    adopt(sent, schema)
    held = st.session_state.get(ROLE)
    if held:
        agreed(held["code"], schema)


def solo_quiz() -> None:
    """The concept quiz alone (/lesson?quiz=1): answer, then see the score and each right answer."""
    try:
        quiz = quizzes.load()
    except quizzes.QuizError as error:
        st.error(str(error))
        return
    st.header(md_escape(quiz.title))
    st.write("One answer per question. Your answers stay in this page: nothing is stored.")
    with st.form("solo_quiz"):
        chosen = {item.id: st.radio(f"{n}. {md_escape(item.prompt)}", range(len(item.shown)), index=None,
                                    format_func=lambda i, item=item: md_escape(item.shown[i]), key=f"solo_{item.id}")
                  for n, item in enumerate(quiz.items, 1)}
        sent = st.form_submit_button("Check my answers")
    if sent:
        answers = {k: quiz.item(k).order[v] for k, v in chosen.items() if v is not None}  # the options' identities
        score = quiz.score(answers)
        st.subheader(f"{round(score * len(quiz.items))} of {len(quiz.items)} right ({score:.0%})")
        for n, item in enumerate(quiz.items, 1):
            mark = "✓" if answers.get(item.id) == item.answer else "✗"
            st.markdown(f"{mark} **{n}.** {md_escape(item.options[item.answer])}. {md_escape(item.why)}")
