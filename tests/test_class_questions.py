"""Each lesson step's questions: the truth against the step's computation written out (numpy, GloVe), and the quiz
file's schema, scores and normalised gain."""

import json
import math
import time

import numpy as np
import pytest

from attnviz.classroom import questions as q
from attnviz.classroom import quiz as quizzes
from attnviz.embeddings import tokenize
from attnviz.pooling import salary_data
from attnviz.retrieval import PRESETS, retrieve, value_matrix

DOG = "When he saw his owner, the dog was happy, so he wagged his tail"


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rows(glove, text):
    words = tokenize(text)
    return words, np.stack([glove[w] for w in words]).astype(np.float64)  # (n, 50)


def test_steps_1_to_3_retrieval(glove):
    records = PRESETS["Surnames → first names"][0]
    keys, values = [k for k, _ in records], [v for _, v in records]
    (exact,) = q.exact_lookup("Li", keys, values, [keys.index("Li")])
    assert exact.options[int(exact.answer)] == "Li → Mu"
    (none,) = q.exact_lookup("Lu", keys, values, [])
    assert none.options[int(none.answer)] == "no record"
    kept = [(k, v) for k, v in records if k != "Li"]
    keys, values = [k for k, _ in kept], [v for _, v in kept]
    result = retrieve(["Li"], keys, value_matrix(values, "text")[0], encoder="ngram", similarity="cosine", temperature=1.0)
    (hard,) = q.hard_retrieval("Li", keys, values, result.scores[0])
    assert hard.options[int(hard.answer)] == "Lipton → Zachary"  # "Li" is most like "Lipton"
    cold, hot = q.soft_retrieval(result.scores[0])
    assert cold.options[int(cold.answer)] == "all of it on the most similar key"
    assert hot.options[int(hot.answer)] == "equal on every record"
    (tied,) = q.soft_retrieval(np.array([0.5, 0.5, 0.1]))[:1]  # two best keys tie: neither takes it all
    assert tied.options[int(tied.answer)] == "about as they are at τ = 1"


def test_step_4_a_wide_kernel_predicts_the_mean():
    x, y = salary_data(40, 3000, "saturating", 0)
    (wide,) = q.kernel_regression(x, y)
    assert wide.options[int(wide.answer)] == "the mean of all 40 salaries"


def test_steps_5_to_8_against_the_formulas(glove):
    sharp, flat = np.array([[0.97, 0.01, 0.02]]), np.array([[0.3, 0.4, 0.3]])
    (peaked,) = q.similarity_functions(["flat", "sharp"], [flat, sharp])
    assert peaked.answer == 1
    words, x = rows(glove, DOG)
    scale, total = q.why_sqrt_d(x)
    plain, scaled = softmax(x @ x.T), softmax(x @ x.T / math.sqrt(50))
    entropy = lambda w: float(-(w * np.log(np.maximum(w, 1e-300))).sum(-1).mean())  # noqa: E731
    assert scale.options[int(scale.answer)] == ("more peaked than with √d" if entropy(plain) < entropy(scaled) else "flatter than with √d")
    assert total.correct(1.0) and not total.correct(2.0) and total.kind == "number"
    query = words.index("happy")
    (word, row_sum) = q.self_attention(scaled, words, query)
    assert word.answer == int(np.argmax(scaled[query])) and row_sum.correct(1.0)
    assert word.options[query] == "happy" and "he (#2)" in word.options  # a repeated word names its position
    back = scaled[::-1, ::-1].copy()  # the reversed sentence's weights without positions: P α Pᵀ
    (same,) = q.order_matters(scaled, back, positions=False)
    assert same.answer == 0
    (other,) = q.order_matters(scaled, softmax(np.random.default_rng(0).normal(size=scaled.shape)), positions=True)
    assert other.answer == 1


def test_steps_9_to_13_shapes_and_counts():
    (shape,) = q.projections(16, 50, (16, 4))
    assert shape.options[int(shape.answer)] == "16 × 4"
    n = 6
    causal = np.tril(np.full((n, n), 1.0 / n))
    (zeros,) = q.masks(causal)
    assert zeros.answer == n * (n - 1) / 2 and zeros.correct(15) and not zeros.correct(14)
    (rows_,) = q.encoder_decoder(7, 7, 7, 6)
    assert rows_.answer == 0
    weights = np.array([[0.5, 0.5, 0.0], [0.3, 0.7, 0.0], [0.4, 0.6, 0.0]])  # key 2 is padding
    (pad,) = q.padding(weights, np.array([True, True, False]))
    assert pad.answer == 0 and pad.correct(0) and not pad.correct(0.1)
    (t,) = q.batches((3, 9, 9))
    assert t.answer == 9
    w = np.stack([np.full((4, 4), 0.25), np.eye(4)])
    (head,) = q.heads(w)
    assert head.answer == 1


def test_steps_14_to_21_from_their_runs():
    w = np.array([[1.0, 0, 0], [0.9, 0.1, 0], [0.2, 0.7, 0.1]])
    (piece,) = q.trained(w, ["a", "b", "c"], 2, 1, 3)
    assert piece.options[int(piece.answer)] == "b"
    probs, names = np.array([0.1, 0.5, 0.2]), [" sad", " happy", " tired"]
    (nxt,) = q.decoder(probs, names)
    assert nxt.options[int(nxt.answer)] == " happy" and list(nxt.options) == [" happy", " sad", " tired"]
    ids = [5, 6, 7, 5, 6, 7]
    induction = np.zeros((6, 6))
    induction[0, 0] = induction[1, 0] = induction[2, 0] = 1
    induction[3, 1], induction[4, 2], induction[5, 0] = 1, 1, 1  # 3 → 1, 4 → 2: the piece after the first copy
    (copy,) = q.copy(induction, ids)
    assert copy.options[int(copy.answer)] == "at the piece after that piece's first occurrence"
    (off,) = q.head_off(np.array([0.8, 0.1, 0.7]))
    assert off.answer == 0
    (agrees,) = q.importance({"raw": 0.2, "rollout": None, "grad": 0.6}, {"raw": "raw attention"})
    assert agrees.options[int(agrees.answer)] == "grad" and len(agrees.options) == 2
    (part,) = q.write([1, 2, 3, 4], [1, 2, 9, 4])
    (same,) = q.write([1, 2], [1, 2])
    assert part.answer == 3 and same.options[int(same.answer)] == "no"
    events = np.zeros((4, 5))
    events[1, 2] = 3
    (share,) = q.needle(events)
    assert share.answer == 5.0 and share.correct(9.9) and not share.correct(10.1)
    assert q.why(True)[0].answer == 0 and q.why(False)[0].answer == 1


def test_a_question_is_offered_only_where_its_answer_stands_apart_at_the_shown_precision():
    """The reveal prints weights, entropies, probabilities and ρ to 2 decimals: a right answer that prints as its
    runner-up does (step 13's heads 0.004 nats apart) is no question; a lead of 0.01 printed is."""
    assert q.apart([0.30, 0.52, 0.49]) == (1, pytest.approx(0.03)) and q.apart([2.731, 2.735, 2.9], largest=False)[1] == 0
    tied = np.array([[[0.40, 0.35, 0.25]] * 3, [[0.405, 0.345, 0.25]] * 3])  # entropies 1.0805 and 1.0798: both print 1.08
    assert mean_entropy_printed(tied[0]) == mean_entropy_printed(tied[1]) and q.heads(tied) == []
    apart_heads = np.stack([np.full((3, 3), 1 / 3), np.eye(3), np.full((3, 3), 1 / 3)])
    (head,) = q.heads(apart_heads)
    assert head.options == ("head 0", "head 1") and head.answer == 1 and head.margin >= head.precision
    close = np.array([[0.401, 0.397, 0.202]])
    assert [x.id for x in q.self_attention(close, ["a", "b", "c"], 0)] == ["s7-sum"]  # 0.40 against 0.40: not asked
    (same,) = q.head_off(np.array([0.8, 0.301, 0.304]))  # both print 0.30
    assert same.options[int(same.answer)] == "the same as with the control off"
    (agrees,) = q.importance({"attention": 0.2, "occlusion": 1.0, "gradient": 0.6}, {})
    assert "occlusion" not in agrees.options and agrees.options[int(agrees.answer)] == "gradient"


def mean_entropy_printed(weights) -> float:
    w = np.asarray(weights, np.float64)
    return round(float(-(w * np.log(w)).sum(-1).mean()), 2)


def test_an_answer_is_checked_against_its_question():
    pick = q.Question("x", 1, "pick", "p", ("a", "b"), 1)
    number = q.Question("y", 1, "number", "p", (), 1.0, 0.1)
    for bad in (True, "1", None, 2, -1, 0.5, [1]):
        with pytest.raises(ValueError):
            pick.check(bad)
    for bad in (float("nan"), float("inf"), 1e300, "3"):
        with pytest.raises(ValueError):
            number.check(bad)
    assert pick.check(1.0) == 1 and number.check(3) == 3.0
    assert "answer" not in pick.public() and pick.full()["answer"] == 1


def test_the_built_in_quiz_covers_the_lesson_and_its_options_are_shuffled():
    quiz = quizzes.load()
    assert 10 <= len(quiz.items) <= 12
    assert {"what τ does", "why scores are divided by √d", "a large weight is not importance"} <= {i.topic for i in quiz.items}
    assert len({i.right for i in quiz.items}) > 1  # the file lists the right answer first; the pages do not
    for item in quiz.items:
        assert item.shown[item.right] == item.options[item.answer]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema="x"), "Field 'schema'"),
    (lambda d: d["items"][2].pop("prompt"), "Item 3 ('hard-soft'): field 'prompt'"),
    (lambda d: d["items"][0].update(answer=9), "Item 1 ('row-sum'): field 'answer'"),
    (lambda d: d["items"][1].update(options=["only one"]), "Item 2 ('sqrt-d'): field 'options'"),
    (lambda d: d["items"][3].update(id="row-sum"), "Item 4 ('row-sum'): field 'id' repeats"),
    (lambda d: d["items"][4].update(colour="red"), "Item 5 ('tau'): unknown field 'colour'"),
    (lambda d: d.update(items=[]), "Field 'items'"),
])
def test_a_malformed_quiz_file_names_the_item_and_the_field(change, message):
    data = quizzes.load().to_dict()
    change(data)
    with pytest.raises(quizzes.QuizError, match=message.replace("(", r"\(").replace(")", r"\)")):
        quizzes.loads(json.dumps(data))
    for bad in (b"\xff\xfe{", b"not json", b"[1, 2]", b"x" * (quizzes.FILE_LIMIT + 1)):
        with pytest.raises(quizzes.QuizError):
            quizzes.loads(bad)


def quiz_rows(phase: str, student: str, answers: dict, at: float = 0.0) -> list:
    from attnviz.classroom.store import Answer

    return [Answer(f"quiz:{phase}:{k}", 1, student, v, at) for k, v in answers.items()]


def test_the_class_measures_over_the_students_who_took_both():
    """⟨g⟩ from class averages, the mean of per-student g, Cohen's d (against scipy's standard deviations written out)
    and each item's share, on four students with different scores; a student with one test is not matched."""
    from scipy import stats

    quiz = quizzes.load()
    n = len(quiz.items)
    ids = [i.id for i in quiz.items]
    right = {i.id: i.answer for i in quiz.items}  # as the class keeps them: the option's index in the file
    wrong = {i.id: (i.answer + 1) % len(i.options) for i in quiz.items}

    def first(k: int) -> dict:  # the first k items right, the rest wrong
        return {item: (right if m < k else wrong)[item] for m, item in enumerate(ids)}

    scores = {"s1": (0, n), "s2": (n // 2, n // 2), "s3": (3, n - 1), "s4": (n - 2, n)}  # items right before, after
    rows = [row for s, (a, b) in scores.items() for row in quiz_rows("pre", s, first(a)) + quiz_rows("post", s, first(b))]
    rows += quiz_rows("pre", "s5", right)  # took only the pre-test
    found = quizzes.results(quiz, rows)
    pre = np.array([100 * a / n for a, _ in scores.values()])
    post = np.array([100 * b / n for _, b in scores.values()])
    assert found.matched == 4 and found.pre_mean == pytest.approx(pre.mean()) and found.post_mean == pytest.approx(post.mean())
    assert found.gain == pytest.approx((post.mean() - pre.mean()) / (100 - pre.mean()))
    assert found.mean_g == pytest.approx(np.mean((post - pre) / (100 - pre)))
    pooled = np.sqrt((stats.tstd(pre) ** 2 + stats.tstd(post) ** 2) / 2)
    assert found.cohen_d == pytest.approx((post - pre).mean() / pooled)
    assert found.items[ids[0]] == (pytest.approx(4 / 5), 1.0)  # s2, s3, s4, s5 right before; all four after
    empty = quizzes.results(quiz, [])
    assert (empty.gain, empty.mean_g, empty.cohen_d) == (None, None, None)


def test_the_quiz_keeps_the_options_identity_whatever_order_a_page_showed():
    quiz = quizzes.load()
    for item in quiz.items:
        assert quiz.check({item.id: item.right}) == {item.id: item.answer}
        shown_wrong = (item.right + 1) % len(item.options)
        assert item.options[quiz.check({item.id: shown_wrong})[item.id]] == item.shown[shown_wrong]


def test_the_class_record_reads_without_attnviz():
    """The three CSV files, read back with the csv module alone: each answer's option text, right or wrong, round,
    step and time; each student's scores; the class's measures, equal to results()'."""
    import csv
    import io

    from attnviz.classroom import report
    from attnviz.classroom.questions import Question
    from attnviz.classroom.store import Answer

    quiz = quizzes.load()
    item = quiz.items[0]
    question = Question("s7-word", 7, "pick", "=Which word?", ("dog", "-happy", "tail"), 1, explain="")
    asked = {"s7-word": question.full(), "s12-T": Question("s12-T", 12, "number", "T?", (), 9.0, 0).full()}
    answers = [Answer("s7-word", 1, "aaaa", 0, 1795000000.0), Answer("s7-word", 2, "aaaa", 1, 1795000060.0),
               Answer("s12-T", 1, "bbbb", 9.0, 1795000100.0), Answer("gone", 1, "aaaa", 0, 0.0),
               *quiz_rows("pre", "aaaa", {item.id: item.answer}, 1795000200.0)]
    rows = list(csv.DictReader(io.StringIO(report.answers_csv(answers, asked, quiz))))
    assert [(r["kind"], r["step"], r["question"], r["round"], r["answer"], r["right"]) for r in rows] == [
        ("question", "7", "s7-word", "1", "dog", "no"), ("question", "7", "s7-word", "2", "'-happy", "yes"),
        ("question", "12", "s12-T", "1", "9", "yes"), ("pre-test", "", item.id, "", item.options[item.answer], "yes")]
    assert rows[0]["prompt"] == "'=Which word?" and rows[0]["time"] == time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1795000000))
    assert rows[0]["student"] == "aaaa" and "nickname" not in rows[0]
    named = list(csv.DictReader(io.StringIO(report.answers_csv(answers, asked, quiz, {"aaaa": "=Ada"}))))
    assert named[0]["nickname"] == "'=Ada" and named[2]["nickname"] == ""

    ids = [i.id for i in quiz.items]
    wrong = {i.id: (i.answer + 1) % len(i.options) for i in quiz.items}
    right = {i.id: i.answer for i in quiz.items}
    taken = quiz_rows("pre", "s1", wrong) + quiz_rows("post", "s1", right)
    taken += quiz_rows("pre", "s2", {**wrong, ids[0]: right[ids[0]]}) + quiz_rows("post", "s2", right)
    students = list(csv.DictReader(io.StringIO(report.students_csv(taken, quiz))))
    assert [(s["student"], s["pre %"], s["post %"], s["g"]) for s in students] == [
        ("s1", "0.0", "100.0", "1.0000"), ("s2", f"{100 / len(ids):.1f}", "100.0", "1.0000")]
    found = quizzes.results(quiz, taken)
    summary = {r["measure"]: r["value"] for r in csv.DictReader(io.StringIO(report.summary_csv(taken, quiz)))}
    assert summary["matched N"] == "2" and float(summary["<g>"]) == pytest.approx(found.gain, abs=1e-4)
    assert float(summary["Cohen's d"]) == pytest.approx(found.cohen_d, abs=1e-4)
    assert summary[f"item {ids[0]}: share right before"] == "0.5000"


def test_the_quiz_figures_draw_what_the_results_say():
    from attnviz.figures import quiz_figures

    quiz = quizzes.load()
    right = {i.id: i.answer for i in quiz.items}
    rows = quiz_rows("post", "s1", right) + quiz_rows("pre", "s1", {quiz.items[0].id: right[quiz.items[0].id]})
    scores, items = quiz_figures(quizzes.results(quiz, rows), quiz)
    pre, post = scores.data
    assert sum(pre.y) == 1 and sum(post.y) == 1 and post.x[list(post.y).index(1)] == 100
    assert pre.x[list(pre.y).index(1)] == pytest.approx(100 / len(quiz.items))  # one item of 12 right
    before, after = items.data
    assert list(after.x) == [100.0] * len(quiz.items) and before.x[0] == 100.0 and before.x[1] is None
