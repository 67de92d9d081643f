"""Predict, then reveal: one question or more for each of the Lesson's 22 steps. Each question's right answer is
computed from what the step computes (its weights, scores, probabilities), never typed in: a step's builder below takes
the step's own numbers. No streamlit here; tests/test_class_questions.py checks every truth against the step's
computation written out.

Three kinds: "pick" (a word, a record, a head: one of `options`), "choice" (multiple choice) and "number" (within
`tolerance`).

A question that picks the largest (or smallest) of several measures says how far its right answer stands from the
runner-up as the reveal prints them (`margin`, at `precision`): a builder offers it only where that margin is at least
the precision, so the class can tell the two apart on the screen. No option is the yardstick a question measures
against."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

KINDS = ("pick", "choice", "number")
NUMBER_LIMIT = 1e12  # a number answer beyond this is refused as malformed


@dataclass(frozen=True)
class Question:
    id: str  # unique within the lesson: "s7-word"
    step: int  # the lesson step, from 1
    kind: str  # one of KINDS
    prompt: str
    options: tuple[str, ...] = ()  # pick and choice
    answer: float = 0  # the right option's index, or the number
    tolerance: float = 0.0  # number: |given − answer| ≤ tolerance counts as right
    explain: str = ""  # shown at the reveal, beside the step's figure
    holds: tuple[str, ...] = ("figure", "result")  # what its step holds back until the reveal: its figures, its result
    margin: float | None = None  # the right answer's lead over the runner-up, as printed at the reveal
    precision: float | None = None  # the step the reveal prints that measure in

    def public(self) -> dict:
        """What a student's page receives before the reveal: everything but the answer and its explanation."""
        return {"id": self.id, "step": self.step, "kind": self.kind, "prompt": self.prompt, "options": list(self.options),
                "holds": list(self.holds)}

    def full(self) -> dict:
        return {**asdict(self), "options": list(self.options), "holds": list(self.holds)}

    @classmethod
    def from_dict(cls, data: dict) -> "Question":
        return cls(**{**data, "options": tuple(data.get("options", ())),
                      "holds": tuple(data.get("holds", ("figure", "result")))})

    def check(self, value) -> float | int:
        """The answer `value` as stored, or ValueError saying what a valid answer is."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("An answer is a number: an option's index, or the value asked for.")
        if not math.isfinite(value):
            raise ValueError("An answer must be a finite number: an option's index, or the value asked for.")
        if self.kind == "number":
            if abs(value) > NUMBER_LIMIT:
                raise ValueError(f"A number answer must be finite and at most {NUMBER_LIMIT:g} in size.")
            return float(value)
        if value != int(value) or not 0 <= value < len(self.options):
            raise ValueError(f"Pick one of the {len(self.options)} options (an index from 0 to {len(self.options) - 1}).")
        return int(value)

    def correct(self, value) -> bool:
        if self.kind == "number":
            return abs(float(value) - self.answer) <= self.tolerance
        return int(value) == int(self.answer)


PRINTED = 0.01  # the reveal prints weights, entropies, probabilities and ρ to 2 decimals


def apart(values, largest: bool = True, precision: float = PRINTED) -> tuple[int, float]:
    """(the index of the largest value, or the smallest, and its lead over the runner-up as printed at `precision`)."""
    digits = round(-math.log10(precision))
    v = np.array([float(f"{float(x):.{digits}f}") for x in values])  # (N,) as the reveal prints them
    order = np.argsort(-v if largest else v, kind="stable")
    best = int(np.argmax(values) if largest else np.argmin(values))
    lead = float(abs(v[order[0]] - v[order[1]])) if len(v) > 1 else float("inf")
    return best, round(lead, 10)


def told_apart(questions: list["Question"]) -> list["Question"]:
    """The questions whose right answer the class can tell from the runner-up at the precision the reveal shows."""
    return [q for q in questions if q.margin is None or q.margin >= q.precision]


def labelled(tokens: list[str]) -> tuple[str, ...]:
    """Tokens as options: a word that appears twice gets its position, so every option names one column."""
    counts = {t: tokens.count(t) for t in tokens}
    return tuple(f"{t} (#{i + 1})" if counts[t] > 1 else t for i, t in enumerate(tokens))


def softmax(scores: np.ndarray, tau: float = 1.0) -> np.ndarray:
    z = np.asarray(scores, np.float64) / tau
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def mean_entropy(weights: np.ndarray) -> float:
    w = np.asarray(weights, np.float64)
    return float(-(np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0)).sum(-1).mean())


def shape_of(weights: np.ndarray) -> str:
    """A row of weights described: on one key, equal on every key, or neither."""
    w = np.asarray(weights, np.float64)
    if w.max() > 0.99:
        return "one"
    return "equal" if w.max() - w.min() < 1e-3 else "spread"


# ---------------------------------------------------------------- steps 1–4: retrieval


def exact_lookup(query: str, keys: list[str], values: list[str], found: list[int]) -> list[Question]:
    options = tuple(f"{k} → {v}" for k, v in zip(keys, values)) + ("no record",)
    return [Question("s1-record", 1, "pick", f"An exact lookup of “{query}”: which record answers?", options,
                     found[0] if found else len(keys), explain="Only a key equal to the query answers; any other "
                     "query gets nothing.")]


def hard_retrieval(query: str, keys: list[str], values: list[str], similarities: np.ndarray) -> list[Question]:
    options = tuple(f"{k} → {v}" for k, v in zip(keys, values))
    best, margin = apart(similarities)
    return told_apart([Question("s2-record", 2, "pick", f"Li → Mu is gone. Which record does hard retrieval return for "
                                f"“{query}”?", options, best,
                                explain=f"The most similar key, “{keys[best]}”, cos = {similarities[best]:.2f}.",
                                margin=margin, precision=PRINTED)])


LIMIT_OPTIONS = ("all of it on the most similar key", "equal on every record", "about as they are at τ = 1")
LIMITS = {"one": 0, "equal": 1, "spread": 2}


def soft_retrieval(similarities: np.ndarray) -> list[Question]:
    """The limits of softmax(a/τ) for this query's similarities (N,), computed at τ = 10⁻⁴ and τ = 10⁴."""
    cold, hot = softmax(similarities, 1e-4), softmax(similarities, 1e4)
    return [Question("s3-cold", 3, "choice", "As τ → 0, the weights α become …", LIMIT_OPTIONS, LIMITS[shape_of(cold)],
                     explain=f"At τ = 10⁻⁴ the largest weight is {cold.max():.3f}: hard retrieval."),
            Question("s3-hot", 3, "choice", "As τ grows very large, the weights α become …", LIMIT_OPTIONS,
                     LIMITS[shape_of(hot)], explain=f"At τ = 10⁴ they run from {hot.min():.4f} to {hot.max():.4f}: "
                     "the plain average.")]


def kernel_regression(x: np.ndarray, y: np.ndarray, query: float = 3.5) -> list[Question]:
    """f̂(query) as σ grows very large (σ = 10³, computed), against three candidates."""
    weights = softmax(-(query - np.asarray(x, np.float64)) ** 2 / (2 * 1e3 ** 2))
    wide = float(weights @ y)
    candidates = (float(np.mean(y)), float(y[np.argmin(np.abs(x - query))]), 0.0)
    options = ("the mean of all 40 salaries", f"the salary of the GPA nearest {query}", "0")
    return [Question("s4-wide", 4, "choice", f"As σ grows very large, the prediction f̂({query}) becomes …", options,
                     int(np.argmin([abs(wide - c) for c in candidates])),
                     explain=f"At σ = 1,000 every weight is about 1/40: f̂ = {wide:,.0f}, the mean {candidates[0]:,.0f}.")]


# ---------------------------------------------------------------- steps 5–8: scores


def similarity_functions(names: list[str], weights: list[np.ndarray]) -> list[Question]:
    entropies = [mean_entropy(w) for w in weights]
    best, margin = apart(entropies, largest=False)
    return told_apart([Question("s5-peaked", 5, "pick", "Which scoring function gives the most peaked weights (the "
                                "lowest entropy, averaged over the queries)?", tuple(names), best,
                                explain=", ".join(f"{n}: {h:.2f} nats" for n, h in zip(names, entropies)) + ".",
                                margin=margin, precision=PRINTED)])


SCALE_OPTIONS = ("more peaked than with √d", "flatter than with √d", "the same as with √d")


def why_sqrt_d(x: np.ndarray) -> list[Question]:
    """Unscaled against scaled dot products of the sentence's GloVe rows x (n, d)."""
    x = np.asarray(x, np.float64)
    raw = x @ x.T  # (n, n)
    plain, scaled = mean_entropy(softmax(raw)), mean_entropy(softmax(raw / math.sqrt(x.shape[1])))
    answer = 2 if abs(plain - scaled) < 1e-6 else 0 if plain < scaled else 1
    row = softmax(raw / math.sqrt(x.shape[1]))[0]
    return [Question("s6-scale", 6, "choice", "Without dividing by √d (A), each row of α is …", SCALE_OPTIONS, answer,
                     explain=f"Mean entropy {plain:.2f} nats without the scale, {scaled:.2f} with it."),
            Question("s6-sum", 6, "number", "What do the weights of one row of α add up to?", (), float(row.sum()), 0.01,
                     explain="A softmax's outputs always sum to 1, whatever the scores.")]


def self_attention(weights: np.ndarray, tokens: list[str], query: int) -> list[Question]:
    row = np.asarray(weights)[query]  # (n,)
    best, margin = apart(row)
    return told_apart([Question("s7-word", 7, "pick", f"Which word does “{tokens[query]}” attend to most?",
                                labelled(tokens), best, explain=f"“{tokens[best]}”, weight {row[best]:.2f}: with X's own "
                                "rows as queries and keys, a word's vector is usually most like itself.",
                                margin=margin, precision=PRINTED)]) + [
        Question("s7-sum", 7, "number", f"What do the weights of “{tokens[query]}”'s row add up to?", (),
                 float(row.sum()), 0.01, explain="Every row of α is a softmax: it sums to 1.")]


ORDER_OPTIONS = ("the same numbers, moved to the new rows and columns", "different numbers", "equal everywhere")


def order_matters(forward: np.ndarray, backward: np.ndarray, positions: bool) -> list[Question]:
    """The weights of a sentence (n, n) and of its words backwards (n, n), both computed by the step's engine."""
    moved = np.asarray(forward)[::-1, ::-1]  # P α_A Pᵀ for P the reversal
    answer = 0 if np.allclose(moved, backward, atol=1e-5) else 2 if np.ptp(backward) < 1e-6 else 1
    said = "with" if positions else "without"
    return [Question(f"s8-{'with' if positions else 'without'}", 8, "choice", f"Read backwards, {said} positions, the "
                     "weights are …", ORDER_OPTIONS, answer,
                     explain=f"Largest |P α_A Pᵀ − α_B|: {np.abs(moved - backward).max():.2g}.")]


# ---------------------------------------------------------------- steps 9–12: matrices


def projections(n: int, d: int, query_shape: tuple[int, int]) -> list[Question]:
    rows, cols = query_shape
    options = tuple(dict.fromkeys([f"{rows} × {cols}", f"{d} × {cols}", f"{rows} × {d}", f"{cols} × {rows}"]))
    return [Question("s9-shape", 9, "choice", f"X is {n} × {d}. What shape is Q = XW_q + b_q?", options,
                     options.index(f"{rows} × {cols}"), explain=f"One row per word, d_k = {cols} columns.")]


def masks(causal_weights: np.ndarray) -> list[Question]:
    w = np.asarray(causal_weights)
    n = w.shape[-1]
    return [Question("s10-zeros", 10, "number", f"Under the causal mask, how many of the {n} × {n} weights are exactly 0?",
                     (), float((w == 0).sum()), 0,
                     explain=f"Every cell above the diagonal: n(n − 1)/2 = {n * (n - 1) // 2}.")]


def padding(weights: np.ndarray, valid: np.ndarray) -> list[Question]:
    """weights (T, T) of one padded sentence and valid (T,): the largest weight a real word gives a padding key."""
    w, real = np.asarray(weights), np.asarray(valid, bool)
    largest = float(w[np.ix_(real, ~real)].max()) if (~real).any() else 0.0
    return [Question("s10-padding", 10, "number", "What weight does a real word give to a padding position?", (),
                     largest, 0.001, explain="Exactly 0: the padding mask sets those scores to −∞ before the softmax.")]


CROSS_OPTIONS = ("one per target word (the decoder's queries)", "one per source word (the encoder's keys)")


def encoder_decoder(cross_rows: int, target_words: int, source_words: int, shorter_rows: int) -> list[Question]:
    """The cross-attention's rows for the step's target, and for that target one word shorter (both computed): the
    rows follow the target when they shrink with it."""
    follows_target = shorter_rows == cross_rows - 1
    return [Question("s11-rows", 11, "choice", "Cross-attention's weight matrix has one row …", CROSS_OPTIONS,
                     0 if follows_target else 1,
                     explain=f"{cross_rows} rows for {target_words} target words and {source_words} source words; "
                             f"{shorter_rows} for a target one word shorter.")]


def batches(product_shape: tuple[int, ...]) -> list[Question]:
    b, t, _ = product_shape
    return [Question("s12-T", 12, "number", f"QKᵀ for the whole batch is ({b}, T, T). What is T?", (), float(t), 0,
                     explain="The longest sentence's length: the others are padded to it.")]


# ---------------------------------------------------------------- steps 13–16: models


def heads(weights: np.ndarray) -> list[Question]:
    """weights (H, n, n) of the step's random heads: of the sharpest and the flattest, which is which (close heads
    cannot be told apart on the screen; these two can, where any two can)."""
    entropies = [mean_entropy(w) for w in weights]
    if len(entropies) < 2:
        return []
    pair = sorted((int(np.argmin(entropies)), int(np.argmax(entropies))))
    best, margin = apart([entropies[h] for h in pair], largest=False)
    return told_apart([Question("s13-peaked", 13, "pick", f"Head {pair[0]} or head {pair[1]}: which looks more sharply "
                                "(the lower entropy, averaged over the words)?", tuple(f"head {h}" for h in pair), best,
                                explain=", ".join(f"head {h}: {e:.2f}" for h, e in enumerate(entropies)) + " nats.",
                                margin=margin, precision=PRINTED)])


def trained(weights: np.ndarray, labels: list[str], query: int, layer: int, head: int) -> list[Question]:
    """weights (n, n) of one head of the trained encoder; layer and head counted from 1, as the page shows them."""
    row = np.asarray(weights)[query]
    best, margin = apart(row)
    return told_apart([Question("s14-piece", 14, "pick", f"Layer {layer}, head {head}: which piece does “{labels[query]}” "
                                "attend to most?", labelled(labels), best, explain=f"“{labels[best]}”, weight "
                                f"{row[best]:.2f}.", margin=margin, precision=PRINTED)])


def decoder(probs: np.ndarray, names: list[str]) -> list[Question]:
    """The step's 8 most likely next pieces (probabilities and names), offered in alphabetical order."""
    order = sorted(range(len(names)), key=lambda i: names[i].strip().lower())
    best, margin = apart(probs)
    return told_apart([Question("s15-next", 15, "pick", "Which piece does the model find most likely next?",
                                tuple(names[i] for i in order), order.index(best),
                                explain=f"“{names[best]}”, p = {probs[best]:.2f}.", margin=margin, precision=PRINTED)])


COPY_OPTIONS = ("at itself", "at the piece just before it", "at the piece after that piece's first occurrence",
                "at the first piece")


def copy(weights: np.ndarray, ids: list[int]) -> list[Question]:
    """Which of four patterns the copying head's weights (n, n) follow most, scored on the rows each pattern covers."""
    from attnviz import heads as head_types

    n = len(ids)
    patterns = (np.eye(n), head_types.previous_pattern(n), head_types.induction_pattern(ids),
                head_types.column_pattern(n, 0, 1))
    scores = [head_types.pattern_score(np.asarray(weights)[None], p) for p in patterns]
    shares = [float(s[0]) if s is not None else 0.0 for s in scores]
    best, margin = apart(shares)  # printed as whole percents: 0.01
    return told_apart([Question("s16-where", 16, "choice", "From a piece of the second copy, where does the copying head "
                                "look most?", COPY_OPTIONS, best, explain="Its weight on each pattern: "
                                + ", ".join(f"{o}: {s:.0%}" for o, s in zip(COPY_OPTIONS, shares)) + ".",
                                margin=margin, precision=PRINTED)])


# ---------------------------------------------------------------- steps 17–21: experiments


OFF_OPTIONS = ("falls further than with the control off", "falls less than with the control off",
               "the same as with the control off")


def head_off(p: np.ndarray) -> list[Question]:
    """p(repeat) of the model, without the copying head, without the control (3,)."""
    intact, off, control = (float(v) for v in p)
    shown_off, shown_control = round(off, 2), round(control, 2)  # as the bars' labels and the reveal print them
    answer = 2 if shown_off == shown_control else 0 if shown_off < shown_control else 1
    return [Question("s17-off", 17, "choice", "Turn the copying head off. p(the repeat) …", OFF_OPTIONS, answer,
                     explain=f"p = {intact:.2f} intact, {off:.2f} without the copying head, {control:.2f} without the "
                             "control.")]


YARDSTICK = "occlusion"  # what step 18's measures are ranked against


def importance(agreement: dict[str, float | None], names: dict[str, str]) -> list[Question]:
    """Each measure's Spearman ρ with occlusion (None: undefined). Occlusion itself, the yardstick, is no option."""
    known = [(k, r) for k, r in agreement.items() if r is not None and k != YARDSTICK]
    if len(known) < 2:
        return []
    best, margin = apart([r for _, r in known])
    return told_apart([Question("s18-agrees", 18, "pick", "Which measure ranks the pieces most like occlusion does (the "
                                "largest ρ)?", tuple(names.get(k, k) for k, _ in known), best,
                                explain=", ".join(f"{names.get(k, k)}: ρ = {r:.2f}" for k, r in known) + ".",
                                margin=margin, precision=PRINTED)])


def write(greedy_ids: list[int], sampled_ids: list[int]) -> list[Question]:
    parting = next((k for k, (a, b) in enumerate(zip(greedy_ids, sampled_ids)) if a != b), None)
    if parting is None:
        return [Question("s19-same", 19, "choice", "Do the greedy and the sampled text differ anywhere?", ("yes", "no"),
                         1, explain="Not with this seed: the sampler drew the most likely piece at every step.")]
    return [Question("s19-part", 19, "number", "At which step do the greedy and the sampled text first choose "
                     "different pieces?", (), float(parting + 1), 0,
                     explain=f"Step {parting + 1}: before it the sampler drew the most likely piece each time.")]


def needle(events: np.ndarray) -> list[Question]:
    """events (L, H): each head's retrievals while the model copied the needle."""
    share = 100.0 * float((np.asarray(events) > 0).sum()) / np.asarray(events).size
    return [Question("s20-share", 20, "number", "What share of the model's heads, in %, looked straight at the piece "
                     "being copied at least once?", (), round(share, 1), 5.0,
                     explain=f"{share:.1f}%: retrieval heads are few.")]


def census(short: float) -> list[Question]:
    """short: the share of the heads (0 to 1) that read no further than a window and the first pieces (step 22)."""
    share = round(100.0 * float(short), 1)
    return [Question("s22-short", 22, "number", "What share of the model's heads, in %, read no further than the "
                     "first pieces and a window of the latest ones, over a long document?", (), share, 5.0,
                     explain=f"{share:.1f}%: those heads need only a sliver of the KV cache.")]


def why(textbook: bool) -> list[Question]:
    """Whether the key side's largest part is an earlier previous-piece head (measured by the step)."""
    return [Question("s21-story", 21, "choice", "Is the key side's largest part an earlier head that looks at the "
                     "previous piece?", ("yes", "no"), 0 if textbook else 1,
                     explain="The table's largest key-side part, and that head's previous-piece score on this sequence.")]
