"""A class's record, readable without attnviz: every answer with its step, question, round, option text, right or
wrong, time and the student's pseudonym; each student's pre- and post-test scores; and the class's measures (matched
N, ⟨g⟩ from class averages, the mean of per-student g, Cohen's d on matched students, each quiz item's share right
before and after). Plain CSV, one table a file. No streamlit here.

A pseudonym is the first 12 hex digits of the SHA-256 of the student's random token: the same student in every file,
and no name unless the teacher asked the class for nicknames."""

from __future__ import annotations

import csv
import datetime
import io

from attnviz.classroom.questions import Question
from attnviz.classroom.quiz import PHASES, Quiz, results

ANSWER_COLUMNS = ["kind", "step", "question", "prompt", "round", "answer", "right", "time", "student"]
STUDENT_COLUMNS = ["student", "pre %", "post %", "g"]
PHASE_NAMES = {"pre": "pre-test", "post": "post-test"}


def cell(text: str) -> str:
    """Text as a spreadsheet shows it, never as a formula (a leading =, +, -, @ or tab is quoted with ')."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat(timespec="seconds") if at else ""


def answer_rows(answers, asked: dict[str, dict], quiz: Quiz | None, nicknames: dict[str, str] | None = None) -> list[dict]:
    """One row per answer (store.Answer), by kind, step, question, round and student."""
    rows = []
    for answer in answers:
        row = question_row(answer, asked) if not answer.question.startswith("quiz:") else quiz_row(answer, quiz)
        if row is None:
            continue
        row.update(time=when(answer.at), student=answer.student)
        if nicknames is not None:
            row["nickname"] = cell(nicknames.get(answer.student, ""))
        rows.append(row)
    order = {"question": 0, "pre-test": 1, "post-test": 2}
    return sorted(rows, key=lambda r: (order[r["kind"]], r["step"] or 0, r["question"], r["round"] or 0, r["student"]))


def question_row(answer, asked: dict[str, dict]) -> dict | None:
    data = asked.get(answer.question)
    if data is None:
        return None
    question = Question.from_dict(data)
    shown = f"{answer.value:g}" if question.kind == "number" else question.options[int(answer.value)]
    return {"kind": "question", "step": question.step, "question": question.id, "prompt": cell(question.prompt),
            "round": answer.round, "answer": cell(shown), "right": "yes" if question.correct(answer.value) else "no"}


def quiz_row(answer, quiz: Quiz | None) -> dict | None:
    _, phase, item_id = answer.question.split(":", 2)
    item = quiz.item(item_id) if quiz else None
    if item is None or phase not in PHASES:
        return None
    return {"kind": PHASE_NAMES[phase], "step": None, "question": item.id, "prompt": cell(item.prompt), "round": None,
            "answer": cell(item.options[answer.value]), "right": "yes" if answer.value == item.answer else "no"}


def student_rows(answers, quiz: Quiz, nicknames: dict[str, str] | None = None) -> list[dict]:
    """Each student who took a test: their pre and post scores (% right) and their own g where both exist."""
    found = results(quiz, answers)
    rows = []
    for student in sorted(set(found.pre) | set(found.post)):
        pre, post = found.pre.get(student), found.post.get(student)
        row = {"student": student, "pre %": pct(pre), "post %": pct(post), "g": number(found.student_gains.get(student))}
        if nicknames is not None:
            row["nickname"] = cell(nicknames.get(student, ""))
        rows.append(row)
    return rows


def summary_rows(answers, quiz: Quiz) -> list[dict]:
    """The class's measures, each with its definition, then each item's share right before and after."""
    found = results(quiz, answers)
    rows = [
        {"measure": "matched N", "value": found.matched, "definition": "students who took both the pre- and the post-test"},
        {"measure": "pre mean %", "value": number(found.pre_mean), "definition": "the matched students' mean pre-test score"},
        {"measure": "post mean %", "value": number(found.post_mean), "definition": "the matched students' mean post-test score"},
        {"measure": "<g>", "value": number(found.gain),
         "definition": "normalised gain from class averages (Hake 1998): (post % - pre %) / (100 - pre %)"},
        {"measure": "mean g", "value": number(found.mean_g),
         "definition": f"the mean of each matched student's own g, over the {len(found.student_gains)} below 100 % before"},
        {"measure": "Cohen's d", "value": number(found.cohen_d),
         "definition": "(mean post - mean pre) / sqrt((s_pre^2 + s_post^2) / 2), s with n - 1, matched students"},
    ]
    for item in quiz.items:
        before, after = found.items[item.id]
        rows.append({"measure": f"item {item.id}: share right before", "value": number(before), "definition": cell(item.topic)})
        rows.append({"measure": f"item {item.id}: share right after", "value": number(after), "definition": cell(item.topic)})
    return rows


def pct(share: float | None) -> str:
    return "" if share is None else f"{100 * share:.1f}"


def number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def to_csv(rows: list[dict], columns: list[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def answers_csv(answers, asked, quiz, nicknames=None) -> str:
    return to_csv(answer_rows(answers, asked, quiz, nicknames), ANSWER_COLUMNS + (["nickname"] if nicknames is not None else []))


def students_csv(answers, quiz, nicknames=None) -> str:
    return to_csv(student_rows(answers, quiz, nicknames), STUDENT_COLUMNS + (["nickname"] if nicknames is not None else []))


def summary_csv(answers, quiz) -> str:
    return to_csv(summary_rows(answers, quiz), ["measure", "value", "definition"])
