"""What a class's pages are sent: its state without the secrets (the open question's answer stays on the server until
the reveal), with the answers counted. One function for the JSON endpoint and the event stream alike."""

from __future__ import annotations

from attnviz.classroom.questions import Question
from attnviz.classroom.quiz import Item, Quiz, QuizError, parse
from attnviz.classroom.store import ClassStore, Record


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
    """The answers counted: per option (pick, choice), or the numbers given (number), and how many answered."""
    if question.kind == "number":
        return {"answered": len(answers), "values": sorted(float(v) for v in answers.values())}
    counts = [0] * len(question.options)
    for value in answers.values():
        counts[int(value)] += 1
    return {"answered": len(answers), "counts": counts}


def public_state(store: ClassStore, record: Record) -> dict:
    """The state as GET /_attnviz/class/{code} and the event stream send it."""
    state = record.state
    out = {"code": record.code, "step": state["step"], "params": state["params"], "view": state["view"],
           "question": None, "revealed": bool(state["revealed"]), "quiz": state.get("quiz"), "students": record.students,
           "version": record.version, "seq": record.seq, "expires": record.expires}
    question = question_of(record)
    if question is not None:
        answers = store.answers(record.code, question.id)
        out["question"] = question.public()
        out["tally"] = tally(question, answers)
        if state["revealed"]:
            right = sum(question.correct(v) for v in answers.values())
            out["truth"] = {"answer": question.answer, "tolerance": question.tolerance, "explain": question.explain,
                            "right": right, "share": right / len(answers) if answers else None}
    quiz = quiz_of(record)
    if quiz is not None and state.get("quiz"):
        out["quiz_items"] = [item.public() for item in quiz.items]
        done = {student for q, student, _ in store.all_answers(record.code) if q.startswith(f"quiz:{state['quiz']}:")}
        out["quiz_done"] = len(done)
    return out


def quiz_item(record: Record, item_id: str) -> Item | None:
    quiz = quiz_of(record)
    return quiz.item(item_id) if quiz else None
