"""Lesson: the story of attention in twenty-two steps, one per screen, each a live figure with its formula, and a live
class: the presenter's step on every student's page, a question per step, the concept quiz (appkit/classroom).

Every step calls the same attnviz functions as the page it links to; the step is in the URL (?step=7).
"""

import streamlit as st

from appkit import classroom
from appkit.common import load_url_state, save_url_state
from appkit.present import IN_CLASS, announce
from appkit.served import in_turn, run_started
from appkit.lesson.common import COMPARE_NAMES, NOTED, SCHEMA, STEP_COUNT
from appkit.lesson.retrieval import exact_lookup, hard_retrieval, soft_retrieval, kernel_regression
from appkit.lesson.scores import similarity_functions, why_sqrt_d, self_attention, order_matters
from appkit.lesson.matrices import projections, masks, encoder_decoder_step, batches_step
from appkit.lesson.models import heads_step, trained_step, decoder_step, copy_step
from appkit.lesson.experiments import off_step, importance_step, write_step, needle_step
from appkit.lesson.why import why_step
from appkit.lesson.long import census_step
from appkit.lesson.ahead import ahead

WIDE = {encoder_decoder_step}  # steps whose figures take the page's width, under the text
NARROW_TEXT = {masks}  # steps whose two figures side by side need a wider figure column
STEPS = [
    ("A database answers a query exactly", exact_lookup),
    ("No exact match: hard retrieval", hard_retrieval),
    ("Soft retrieval: every record answers a little", soft_retrieval),
    ("GPA → salary: attention pooling", kernel_regression),
    ("Similarity functions", similarity_functions),
    ("Why divide by √d", why_sqrt_d),
    ("Self-attention", self_attention),
    ("Order matters", order_matters),
    ("Weights and biases: Q, K, V", projections),
    ("Masks: causal and padding", masks),
    ("Encoder, decoder and cross-attention", encoder_decoder_step),
    ("Batches: batch matrix multiplication", batches_step),
    ("Several heads", heads_step),
    ("A trained model's real heads", trained_step),
    ("A decoder predicts the next word", decoder_step),
    ("A head that copies", copy_step),
    ("Turn the copying head off", off_step),
    ("Weight is not importance", importance_step),
    ("Watch it write", write_step),
    ("Finding a needle", needle_step),
    ("Why the copying head looks there", why_step),
    ("How much of a long document each head needs", census_step),
]


assert len(STEPS) == STEP_COUNT, "the URL's step range (STEP_COUNT) names every step"


MOVED = "_lesson_moved"  # session: Previous or Next moved the step in its callback this run


def move(by: int) -> None:
    st.session_state.step = min(max(st.session_state.step + by, 1), len(STEPS))
    st.session_state[MOVED] = True
    new_step()


def picked(key: str) -> None:
    if key != picker_key():
        return  # the picker of a step this session has left: its old value, sent by a browser that has not drawn the new one
    st.session_state.step = st.session_state[key]
    new_step()


def picker_key() -> str:
    """The step picker is keyed by the step it shows: a rerun that the browser sends before it has drawn a new step (a
    click's callback or the class moved it) carries the old picker's value, which is no change of this picker's."""
    return f"step_picked_at_{st.session_state.step}"


def new_step() -> None:
    """Each step's comparison opens with the step's own settings; a presenter's click moves the room at once."""
    for name in set(COMPARE_NAMES.values()) - {"query"}:
        st.session_state[name] = SCHEMA[name].default
    moved()


def moved() -> None:
    """A presenter's move (a step, a value) published before this page computes anything, in the click's own callback
    where there is one; and the class's next step computed while the room is on this one."""
    if classroom.publish(SCHEMA):
        ahead(st.session_state.step, {name: st.session_state.get(name, SCHEMA[name].default) for name in SCHEMA})


if st.query_params.get(classroom.QUIZ) == "1":  # the concept quiz alone, from a link
    classroom.solo_quiz()
    st.stop()
st.session_state[IN_CLASS] = classroom.role() is not None
if st.session_state[IN_CLASS]:
    run_started()  # the class's bodies wait for its reruns to stop arriving (appkit.served.in_turn)
load_url_state(SCHEMA)
classroom.adopt_class(SCHEMA)  # a session that has just taken its class starts on the class's step
class_slot = st.container()  # filled after the step: the presenter's questions come from the step's own numbers
nav = st.container()  # Previous, the step and Next
moved()  # what no callback published: a value's change
# A student's page draws its navigation after the heading, which a class sees first. Everyone else's draws it first: a
# rerun that interrupts a run before its buttons are read takes their click with it, and after a server restart a
# presenter's click is read from its button alone (its callback is not this session's).
student = st.session_state[IN_CLASS] and not classroom.presenting(st.session_state.get(classroom.ROLE))


def navigation_row(after_heading: bool) -> None:
    back, picker, forward_button = nav.columns([1, 4, 1], vertical_alignment="bottom")
    went_back = back.button("Previous", icon=":material/arrow_back:", on_click=move, args=(-1,),
                            disabled=st.session_state.step == 1, key="previous", width="stretch")
    went_on = forward_button.button("Next", icon=":material/arrow_forward:", on_click=move, args=(1,),
                                    disabled=st.session_state.step == len(STEPS), key="next", width="stretch")
    if (went_back or went_on) and not st.session_state.pop(MOVED, False):
        move(-1 if went_back else 1)  # a click whose callback this session never registered: the server restarted
        if after_heading:
            st.rerun()  # the step drawn above was the one before the click
    st.session_state.pop(MOVED, None)
    pick = picker_key()
    picker.selectbox("Lesson step", list(range(1, len(STEPS) + 1)), index=st.session_state.step - 1, key=pick,
                     format_func=lambda i: f"{i} of {len(STEPS)} · {STEPS[i - 1][0]}", on_change=picked, args=(pick,))


if not student:
    navigation_row(after_heading=False)
if classroom.join_slide():
    classroom.draw_join_slide(class_slot)
    save_url_state(SCHEMA, kept=classroom.kept_params())
    st.stop()
number = st.session_state.step
title, draw = STEPS[number - 1]
st.header(f"{number}. {title}")
if student:
    navigation_row(after_heading=True)
if draw in WIDE:
    text_column, figure_column = st.container(), st.container()
else:
    text_column, figure_column = st.columns([1, 2] if draw in NARROW_TEXT else [2, 3], gap="large")
st.session_state[classroom.OFFERED] = []
record = classroom.current()
st.session_state[classroom.HELD] = classroom.holding(number, record)  # the room predicts first (lesson.common.held)
st.session_state.pop(NOTED, None)
# A class's students' runs one at a time, each heading sent first; the presenter's ahead of them (appkit.served.in_turn)
with in_turn(first=classroom.presenting(st.session_state.get(classroom.ROLE)), room=st.session_state[IN_CLASS]):
    draw(text_column, figure_column)
    classroom.panel(class_slot, number, SCHEMA, record)
save_url_state(SCHEMA, kept=classroom.kept_params())
announce("lesson", number, f"{number}. ", f"Step {number} of {len(STEPS)}: {title}")  # said, and its heading focused
