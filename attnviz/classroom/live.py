"""What a class's pages are sent: its state without the secrets (the open question's answer stays on the server until
the reveal, its results until the teacher shows them), with the answers counted; and what the teacher's console is
sent besides. One function each for the JSON endpoint and the event stream alike."""

from __future__ import annotations

import time

from attnviz.classroom.questions import Question
from attnviz.classroom.quiz import Item, Quiz, QuizError, parse
from attnviz.classroom.store import Answer, ClassStore, Record


def question_of(record: Record) -> Question | None:
    data = record.state.get("question")
    return Question.from_dict(data) if data else None


def quiz_of(record: Record) -> Quiz | None:
    """The quiz the class takes (the presenter's, kept in the state as the file's JSON value)."""
    data = record.state.get("quiz_items")
    try:
        return parse(data) if data else None
    except QuizError:
        return None


def tally(question: Question, answers: dict) -> dict:
    """The answers counted: per option (pick, choice), or per value given, smallest first (number)."""
    if question.kind == "number":
        counts: dict[float, int] = {}
        for value in answers.values():
            counts[float(value)] = counts.get(float(value), 0) + 1
        return {"answered": len(answers), "values": [[value, counts[value]] for value in sorted(counts)]}
    counts = [0] * len(question.options)
    for value in answers.values():
        counts[int(value)] += 1
    return {"answered": len(answers), "counts": counts}


def rounds(answers: list[Answer], record: Record, question: Question) -> list[dict]:
    """{pseudonym: answer} of each round so far of the open question (one, or two after discussion), from the class's
    answers (store.all_answers)."""
    found = [dict() for _ in range(record.state.get("round", 1))]
    for answer in answers:
        if answer.question == question.id and answer.round <= len(found):
            found[answer.round - 1][answer.student] = answer.value
    return found


def truth(question: Question, given: list[dict]) -> dict:
    """The right answer, how many got it in the last round (`right`, `share`: as before rounds) and in each round."""
    rounds = [{"right": sum(question.correct(v) for v in answers.values()), "answered": len(answers)} for answers in given]
    for one in rounds:
        one["share"] = one["right"] / one["answered"] if one["answered"] else None
    return {"answer": question.answer, "tolerance": question.tolerance, "explain": question.explain,
            "right": rounds[-1]["right"], "share": rounds[-1]["share"], "rounds": rounds}


def public_state(store: ClassStore, record: Record, answers: list[Answer] | None = None) -> dict:
    """The state as GET /_attnviz/class/{code} and the event stream send it to every page: the results only once the
    teacher shows them (or reveals), the truth only at the reveal. `answers`: the class's, where the caller read them."""
    state = record.state
    answers = store.all_answers(record.code) if answers is None else answers
    out = {"code": record.code, "step": state["step"], "params": state["params"], "view": state["view"],
           "question": None, "round": state["round"], "shown": bool(state["shown"]), "locked": bool(state["locked"]),
           "deadline": state["deadline"], "revealed": bool(state["revealed"]), "quiz": state.get("quiz"),
           "students": record.students, "joins": bool(state["joins"]), "nicknames": bool(state["nicknames"]),
           "version": record.version, "seq": record.seq, "expires": record.expires, "now": time.time()}
    question = question_of(record)
    if question is not None:
        given = rounds(answers, record, question)
        out["question"] = question.public()
        out["answered"] = len(given[-1])
        out["tally"] = {"answered": len(given[-1])}  # the open round's count; what was chosen once shown
        if state["shown"] or state["revealed"]:
            out["results"] = [tally(question, answers) for answers in given]
            out["tally"] = out["results"][-1]
        if state["revealed"]:
            out["truth"] = truth(question, given)
    quiz = quiz_of(record)
    if quiz is not None and state.get("quiz"):
        out["quiz_items"] = [item.public() for item in quiz.items]
        done = {a.student for a in answers if a.question.startswith(f"quiz:{state['quiz']}:")}
        out["quiz_done"] = len(done)
    return out


def console_state(store: ClassStore, record: Record, answers: list[Answer] | None = None) -> dict:
    """What the teacher's console receives besides: every round's results and the answer key before the reveal, and
    who is in the class."""
    answers = store.all_answers(record.code) if answers is None else answers
    out = public_state(store, record, answers)
    question = question_of(record)
    if question is not None:
        given = rounds(answers, record, question)
        out["results"] = [tally(question, answers) for answers in given]
        out["key"] = truth(question, given)
    now = time.time()
    out["roster"] = [{"id": s.id, "nickname": s.nickname, "present": s.present(now)} for s in store.roster(record.code, now)]
    out["console"] = True
    return out


def quiz_item(record: Record, item_id: str) -> Item | None:
    quiz = quiz_of(record)
    return quiz.item(item_id) if quiz else None
