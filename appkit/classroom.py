"""The live class on the Lesson page (attnviz.classroom holds the logic): the presenter starts a class, the projector
shows its join code, link and QR code, the class's size and its answers live; the presenter's step, sentence and
heatmap view reach every student's page; the presenter asks a step's question, then reveals; the concept quiz runs
before and after, with its results. A student's page at /lesson?class=CODE follows, answers, and may step away.

The presenter's secret lives in the presenter's session and in a presenter link (…&teach=SECRET) that reopens the
class on another device; it is never in the join link, and never in the address bar on the projector."""

from __future__ import annotations

import io
import urllib.parse

import streamlit as st

from attnviz import web
from attnviz.classroom import live, quiz as quizzes
from attnviz.classroom.http import PATH
from attnviz.classroom.questions import Question
from attnviz.classroom.store import ClassError, clean_code, shared_store
from attnviz.urlstate import parse_params
from appkit.common import md_escape
from appkit.interactive import _mount
from appkit.present import CHART_FONT_PX, PRESENT, chart

CLASS, TEACH, QUIZ = "class", "teach", "quiz"  # URL parameters: the class to join, the presenter's secret, a quiz alone
ROLE = "_class"  # session: {"code", "secret" (the presenter's only)}
OFFERED = "_class_offered"  # session: this run's step's questions
PUBLISHED = "_class_published"  # session: the (step, params) last sent to the class
QUIZ_FILE = "_class_quiz"  # session: the presenter's own quiz (its JSON value)

_panel = st.components.v2.component("attnviz_class", js=web.bundle("streamlit/classroom.mjs"), css=web.css(),
                                    isolate_styles=False)


def store():
    return shared_store()


def url() -> str:
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return (f"/{base}" if base else "") + PATH


def role() -> dict | None:
    """This session's class: {"code", "secret"} for the presenter, {"code"} for a student, or None. A link's
    `class` joins (as a student, or as the presenter with a right `teach`); the session keeps it after."""
    params = st.query_params
    if CLASS in params:
        try:
            code = clean_code(params[CLASS])
        except ClassError as error:
            st.session_state.pop(ROLE, None)
            st.error(str(error))
            return None
        held = st.session_state.get(ROLE)
        if TEACH in params:
            try:
                store().check_secret(code, params[TEACH])
                st.session_state[ROLE] = {"code": code, "secret": params[TEACH]}
            except ClassError as error:
                st.error(str(error))
            del st.query_params[TEACH]  # never left in the address bar a projector shows
        elif not held or held["code"] != code:
            st.session_state[ROLE] = {"code": code}
    return st.session_state.get(ROLE)


def kept_params() -> dict:
    """What the page's link keeps besides its controls: the class a student follows."""
    held = st.session_state.get(ROLE)
    return {CLASS: held["code"]} if held else {}


def offer(questions: list[Question]) -> None:
    """The step's questions, for the presenter to ask (each step calls this with its own numbers)."""
    st.session_state[OFFERED] = list(questions)


def panel(where, step: int, schema: dict) -> None:
    """The class's panel at the top of the Lesson: the presenter's (start, join, questions, quiz) or a student's."""
    held = st.session_state.get(ROLE)
    if held is None:
        if st.session_state.get(PRESENT):
            where.button("Start a class", icon=":material/groups:", key="class_start", on_click=start,
                         help="Students join from their phones with a code or a QR code, and follow this screen.")
        return
    try:
        record = store().get(held["code"])
    except ClassError as error:
        where.warning(str(error))
        st.session_state.pop(ROLE, None)
        return
    if "secret" in held:
        publish(record, held, step, schema)
        presenter(where, record, held)
    else:
        student(where, record, step, schema)


def start() -> None:
    try:
        code, secret = store().create()
    except ClassError as error:
        st.session_state["_class_error"] = str(error)
        return
    st.session_state[ROLE] = {"code": code, "secret": secret}
    st.session_state.pop(PUBLISHED, None)


def links(code: str, secret: str) -> tuple[str, str]:
    """(join link, presenter link) on this server's address as the presenter's browser reached it."""
    parts = urllib.parse.urlsplit(st.context.url or "http://localhost:8501/lesson")
    base = parts.path.rsplit("/", 1)[0]
    origin = f"{parts.scheme}://{parts.netloc}{base}/lesson"
    return f"{origin}?{CLASS}={code}", f"{origin}?{CLASS}={code}&{TEACH}={urllib.parse.quote(secret)}&{PRESENT}=1"


@st.cache_data(max_entries=64, show_spinner=False)
def qr_png(link: str) -> bytes:
    import segno

    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=8, border=2)
    return buffer.getvalue()


def lesson_params(schema: dict) -> dict[str, str]:
    """Every lesson value but the step, as a link writes it (defaults included, so two pages compare name by name)."""
    return {name: param.encode(st.session_state.get(name, param.default)) for name, param in schema.items()
            if name != "step"}


def publish(record, held: dict, step: int, schema: dict) -> None:
    """The presenter's step and lesson values, sent to the class when they changed (a new step clears the view)."""
    params = lesson_params(schema)
    if st.session_state.get(PUBLISHED) == (record.code, step, params):
        return
    changes = {"params": params}
    if record.state["step"] != step:
        changes.update(step=step, view={})
    store().act(record.code, held["secret"], **changes)
    st.session_state[PUBLISHED] = (record.code, step, params)


PRESENTER_PANEL_PX = 22  # the projector's type (appkit.present's PRESENTER_CSS)


def presenter(where, record, held: dict) -> None:
    """The projector's class panel: the join code, link and QR code, the live count and answers, the step's questions;
    the quiz, the presenter link and leaving fold into an expander."""
    join, teach = links(record.code, held["secret"])
    presenting = st.session_state.get(PRESENT)
    with where.container(border=True):
        code_column, qr_column, live_column = st.columns([2, 1, 4], vertical_alignment="center")
        code_column.markdown(f"# {record.code}")
        code_column.caption(f"Join code · {join}")
        if urllib.parse.urlsplit(join).hostname in ("localhost", "127.0.0.1", "::1", "0.0.0.0"):
            code_column.caption("Students' devices cannot reach this machine as localhost: start the app with "
                                "`--server.address 0.0.0.0` and open it by this machine's network address.")
        qr_column.image(qr_png(join), width=130 if presenting else 110)
        with live_column:
            _mount(_panel, {"role": "presenter", "code": record.code, "url": url(), "secret": held["secret"],
                            "step": record.state["step"], "params": record.state["params"],
                            "font_px": PRESENTER_PANEL_PX if presenting else 15}, key="class_live")
        questions(record, held)
        results(record)  # on the projector itself, once the class has taken the quiz
        with st.expander("The class: concept quiz, presenter link, leave", expanded=bool(record.state.get("quiz"))):
            quiz_controls(record, held)
            st.caption("The presenter link (keep it private) reopens this class as its presenter on another device.")
            st.code(teach, language=None)
            st.button("Leave the class", key="class_leave", on_click=lambda: st.session_state.pop(ROLE, None),
                      help="This screen stops driving the class; the class stays open for 12 hours, and the presenter "
                           "link takes it back.")


def act(code: str, secret: str, **changes) -> None:
    try:
        store().act(code, secret, **changes)
    except ClassError as error:
        st.session_state["_class_error"] = str(error)


def questions(record, held: dict) -> None:
    offered = st.session_state.get(OFFERED, [])
    open_question = live.question_of(record)
    columns = st.columns(max(1, len(offered)) + 2)
    for i, question in enumerate(offered):
        columns[i].button(f"Ask: {md_escape(question.prompt)}", key=f"class_ask_{question.id}", width="stretch",
                          help=md_escape(question.prompt),
                          on_click=act, args=(record.code, held["secret"]), kwargs={"question": question.full()},
                          type="primary" if open_question and open_question.id == question.id else "secondary")
    if open_question is not None:
        columns[-2].button("Reveal", key="class_reveal", disabled=record.state["revealed"], width="stretch",
                           on_click=act, args=(record.code, held["secret"]), kwargs={"revealed": True})
        columns[-1].button("Close the question", key="class_close", width="stretch",
                           on_click=act, args=(record.code, held["secret"]), kwargs={"question": None})
    if "_class_error" in st.session_state:
        st.error(st.session_state.pop("_class_error"))


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
    rows = store().all_answers(record.code)
    if not any(question.startswith("quiz:") for question, _, _ in rows):
        return  # no quiz taken: no file read, nothing drawn
    quiz = live.quiz_of(record) or current_quiz()
    found = quizzes.results(quiz, rows)
    if found.gain is None:
        st.markdown(f"Pre-test: {len(found.pre)} students; post-test: {len(found.post)}. The gain needs students who "
                    "took both" + (" and a pre-test below 100%." if found.matched else "."))
    else:
        st.markdown(f"**Normalised gain ⟨g⟩ = {found.gain:.2f}** over the {found.matched} students who took both: "
                    f"(post {found.post_mean:.0f}% − pre {found.pre_mean:.0f}%) / (100 − {found.pre_mean:.0f}%).")
    from attnviz.figures import quiz_figures

    scores, items = quiz_figures(found, quiz)
    chart(st, scores, key="class_quiz_scores")
    chart(st, items, key="class_quiz_items")
    st.download_button("Answers (CSV, anonymous)", quizzes.answers_csv(rows), f"attnviz_class_{record.code}.csv",
                       "text/csv", on_click="ignore", key="class_csv")


def student(where, record, step: int, schema: dict) -> None:
    key = "class_follow"
    with where:
        _mount(_panel, {"role": "student", "code": record.code, "url": url(), "step": step,
                        "params": lesson_params(schema),
                        "font_px": CHART_FONT_PX if st.session_state.get(PRESENT) else 15},
               key=key, on_follow_change=lambda: follow(key, schema))


def follow(key: str, schema: dict) -> None:
    """The class's step and lesson values, taken into this student's session before the rerun draws them."""
    sent = st.session_state[key].get("follow")
    if not isinstance(sent, dict):
        return
    step, params = sent.get("step"), sent.get("params")
    if not isinstance(params, dict):
        params = {}
    values = parse_params({k: v for k, v in params.items() if isinstance(v, str)}, schema)
    values["step"] = parse_params({"step": str(step)}, {"step": schema["step"]})["step"]
    for name, value in values.items():
        st.session_state[name] = value


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
        answers = {k: v for k, v in chosen.items() if v is not None}
        score = quiz.score(answers)
        st.subheader(f"{round(score * len(quiz.items))} of {len(quiz.items)} right ({score:.0%})")
        for n, item in enumerate(quiz.items, 1):
            given = answers.get(item.id)
            mark = "✓" if given == item.right else "✗"
            st.markdown(f"{mark} **{n}.** {md_escape(item.shown[item.right])}. {md_escape(item.why)}")
