"""The concept quiz a class takes before and after the lesson, and the learning it measures: each item's share correct
before and after, the score distributions, and the class's normalised gain (Hake 1998),
⟨g⟩ = (post % − pre %) / (100 − pre %), over the students who took both. No streamlit here.

The items live in a JSON file (quiz.json beside this module; a teacher's own through ATTNVIZ_QUIZ or the presenter's
upload), checked against its schema on load: a malformed file gets QuizError naming the item and the field. Each item
has one right answer; its options are shown in an order fixed by the item's id (so the file can list the right one
first). A page posts the index it showed; the class keeps the option's identity (its index in the file), so an answer
reads the same whatever order any page showed."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

QUIZ_SETTING = "ATTNVIZ_QUIZ"
SCHEMA = "attnviz-quiz/1"
PHASES = ("pre", "post")
LIMITS = {"items": (1, 40), "options": (2, 8), "text": 500, "id": 40}
FILE_LIMIT = 256 * 1024  # bytes


class QuizError(ValueError):
    pass


@dataclass(frozen=True)
class Item:
    id: str
    topic: str
    prompt: str
    options: tuple[str, ...]  # as the file lists them
    answer: int  # index into the file's options
    why: str

    @property
    def order(self) -> tuple[int, ...]:
        """The file's option indices in the order shown: fixed by the id, so every page shows the same order."""
        return tuple(sorted(range(len(self.options)),
                            key=lambda i: hashlib.sha256(f"{self.id}:{i}".encode()).hexdigest()))

    @property
    def shown(self) -> tuple[str, ...]:
        return tuple(self.options[i] for i in self.order)

    @property
    def right(self) -> int:
        """The right answer's index among the shown options."""
        return self.order.index(self.answer)

    def public(self) -> dict:
        return {"id": self.id, "topic": self.topic, "prompt": self.prompt, "options": list(self.shown)}


@dataclass(frozen=True)
class Quiz:
    title: str
    items: tuple[Item, ...]

    def item(self, item_id: str) -> Item | None:
        return next((i for i in self.items if i.id == item_id), None)

    def score(self, answers: dict) -> float:
        """The share of items answered right (answers: {item id: the option's index in the file}); an item left out
        counts as wrong."""
        return sum(answers.get(i.id) == i.answer for i in self.items) / len(self.items)

    def check(self, answers) -> dict[str, int]:
        """A student's posted answers ({item id: the shown option's index}) as the options' indices in the file, or
        QuizError saying what is wrong."""
        if not isinstance(answers, dict) or not answers:
            raise QuizError("Send the answers as {item id: option index}.")
        checked = {}
        for item_id, value in answers.items():
            item = self.item(item_id)
            if item is None:
                raise QuizError(f"No quiz item {str(item_id)[:40]!r}.")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(item.options):
                raise QuizError(f"Item {item_id!r}: pick an option index from 0 to {len(item.options) - 1}.")
            checked[item_id] = item.order[value]
        return checked

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "title": self.title,
                "items": [{"id": i.id, "topic": i.topic, "prompt": i.prompt, "options": list(i.options),
                           "answer": i.answer, "why": i.why} for i in self.items]}


def _text(value, where: str, field: str, limit: int, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise QuizError(f"{where}: field '{field}' must be a non-empty string.")
    if len(value) > limit:
        raise QuizError(f"{where}: field '{field}' is longer than {limit} characters.")
    return value.strip()


def parse(data) -> Quiz:
    """A Quiz from the file's JSON value, or QuizError naming the item (by number and id) and the field."""
    if not isinstance(data, dict):
        raise QuizError("A quiz file is a JSON object with 'schema', 'title' and 'items'.")
    if data.get("schema") != SCHEMA:
        raise QuizError(f"Field 'schema' must be {SCHEMA!r}.")
    title = _text(data.get("title"), "The quiz", "title", LIMITS["text"])
    items = data.get("items")
    low, high = LIMITS["items"]
    if not isinstance(items, list) or not low <= len(items) <= high:
        raise QuizError(f"Field 'items' must be a list of {low} to {high} items.")
    parsed, seen = [], set()
    for number, raw in enumerate(items, 1):
        where = f"Item {number}"
        if not isinstance(raw, dict):
            raise QuizError(f"{where}: an item is an object with id, topic, prompt, options, answer and why.")
        item_id = _text(raw.get("id"), where, "id", LIMITS["id"])
        where = f"Item {number} ({item_id!r})"
        if item_id in seen:
            raise QuizError(f"{where}: field 'id' repeats an earlier item's id.")
        seen.add(item_id)
        unknown = set(raw) - {"id", "topic", "prompt", "options", "answer", "why"}
        if unknown:
            raise QuizError(f"{where}: unknown field {sorted(unknown)[0]!r}.")
        options = raw.get("options")
        low_o, high_o = LIMITS["options"]
        if not isinstance(options, list) or not low_o <= len(options) <= high_o:
            raise QuizError(f"{where}: field 'options' must be a list of {low_o} to {high_o} strings.")
        options = tuple(_text(o, where, f"options[{k}]", LIMITS["text"]) for k, o in enumerate(options))
        if len(set(options)) != len(options):
            raise QuizError(f"{where}: field 'options' lists the same option twice.")
        answer = raw.get("answer")
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
            raise QuizError(f"{where}: field 'answer' must be the right option's index, 0 to {len(options) - 1}.")
        parsed.append(Item(item_id, _text(raw.get("topic"), where, "topic", LIMITS["text"]),
                           _text(raw.get("prompt"), where, "prompt", LIMITS["text"]), options, answer,
                           _text(raw.get("why"), where, "why", LIMITS["text"], required=False)))
    return Quiz(title, tuple(parsed))


def loads(text: str | bytes) -> Quiz:
    """A Quiz from a file's bytes or text: JSON, parsed, never executed."""
    if len(text) > FILE_LIMIT:
        raise QuizError(f"A quiz file is at most {FILE_LIMIT // 1024} KB.")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise QuizError("A quiz file is UTF-8 text (JSON).") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise QuizError(f"This is not JSON: {error}.") from None
    return parse(data)


def load(path: str | os.PathLike | None = None) -> Quiz:
    """The quiz at `path`, else ATTNVIZ_QUIZ's, else the built-in one."""
    path = path or os.environ.get(QUIZ_SETTING) or Path(__file__).with_name("quiz.json")
    try:
        return loads(Path(path).read_bytes())
    except OSError as error:
        raise QuizError(f"The quiz file {str(path)!r} cannot be read: {error.strerror}.") from None


@dataclass(frozen=True)
class Results:
    pre: dict[str, float]  # student → share correct, pre-test
    post: dict[str, float]
    items: dict[str, tuple[float | None, float | None]]  # item id → (share correct before, after); None: nobody
    matched: int  # students who took both
    gain: float | None  # ⟨g⟩ from the matched students' class averages; None where undefined (none matched, or pre 100 %)
    pre_mean: float | None  # the matched students' mean pre %, and post %
    post_mean: float | None
    student_gains: dict[str, float]  # each matched student's own g, where their pre-test was below 100 %
    mean_g: float | None  # the mean of student_gains
    cohen_d: float | None  # (post − pre) over the pooled SD of the matched students' scores; None below 2 or at SD 0


def results(quiz: Quiz, rows) -> Results:
    """The class's results from the store's answers (store.Answer: question "quiz:{phase}:{item}", student, value the
    option's index in the file)."""
    answers: dict[str, dict[str, dict]] = {phase: {} for phase in PHASES}
    for row in rows:
        parts = row.question.split(":", 2)
        if len(parts) == 3 and parts[0] == "quiz" and parts[1] in PHASES:
            answers[parts[1]].setdefault(row.student, {})[parts[2]] = row.value
    scores = {phase: {s: quiz.score(a) for s, a in answers[phase].items()} for phase in PHASES}
    items = {}
    for item in quiz.items:
        shares = []
        for phase in PHASES:
            given = [a[item.id] for a in answers[phase].values() if item.id in a]
            shares.append(sum(v == item.answer for v in given) / len(given) if given else None)
        items[item.id] = tuple(shares)
    both = sorted(set(scores["pre"]) & set(scores["post"]))
    pre = [100 * scores["pre"][s] for s in both]
    post = [100 * scores["post"][s] for s in both]
    pre_mean = sum(pre) / len(both) if both else None
    post_mean = sum(post) / len(both) if both else None
    gain = (post_mean - pre_mean) / (100 - pre_mean) if both and pre_mean < 100 else None
    student_gains = {s: (b - a) / (100 - a) for s, a, b in zip(both, pre, post) if a < 100}
    mean_g = sum(student_gains.values()) / len(student_gains) if student_gains else None
    return Results(scores["pre"], scores["post"], items, len(both), gain, pre_mean, post_mean, student_gains, mean_g,
                   cohen_d(pre, post))


def cohen_d(pre: list[float], post: list[float]) -> float | None:
    """Cohen's d of matched scores: the mean change over the pooled standard deviation √((s_pre² + s_post²) / 2), each
    s with n − 1; None for fewer than 2 students or no spread."""
    n = len(pre)
    if n < 2:
        return None
    variance = [sum((v - sum(x) / n) ** 2 for v in x) / (n - 1) for x in (pre, post)]
    pooled = ((variance[0] + variance[1]) / 2) ** 0.5
    return (sum(post) - sum(pre)) / n / pooled if pooled > 0 else None
