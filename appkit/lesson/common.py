"""The Lesson's shared pieces: its examples (the dog sentence, the surname records, the batch), its URL schema, and
the helpers its steps share (links to the full pages, the sentence box, the browser's compact Compare, the batch)."""

from dataclasses import replace

import streamlit as st

from attnviz.embeddings import embed, tokenize
from attnviz.encdec import pad_batch
from attnviz.retrieval import PRESETS
from attnviz.sentence import Config, run, temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, coerce, encode_bool, int_range, nearest
from appkit.classroom import HELD  # session: what this run holds back (the open question's `holds`)
from appkit.common import glove, page_link
from appkit.explorer import Request, compare_downloads, compute, live_compare
from appkit.interactive import screen_sizes

NOTED = "_lesson_noted"  # session: the containers that said so this run


DOG = "When he saw his owner, the dog was happy, so he wagged his tail"
RECORDS = PRESETS["Surnames → first names"][0]  # Zhang→Aston, Lipton→Zachary, Li→Mu, Smola→Alex, Hu→Rachel, Werness→Brent
BATCH = ["the dog wagged its tail", "a cat sat", "when he saw his owner the dog was happy"]
SOURCE, TARGET = "the black cat sat on the mat", "a cat sat on a black mat"
SENTENCE_CHARS, MAX_TOKENS = 300, 64
SIGMAS = [0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
DIMS = [2, 4, 8, 16, 32, 64, 128, 256, 512]
STEP_COUNT = 22  # the lesson's steps (pages/lesson.py's STEPS)
FIGURE_COLUMN = "three_fifths"  # the share of the page a step's figure column gives a figure (figures.PLOT_PX)
SCHEMA = {
    "step": Param(1, int_range(1, STEP_COUNT)),
    "q": Param("Li", bounded_text(40)),
    "tau": Param(0.1, nearest(temperature_grid())),
    "sigma": Param(0.1, nearest(SIGMAS)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "text": Param(DOG, bounded_text(SENTENCE_CHARS)),
    "query": Param(9, int_range(0, MAX_TOKENS - 1)),
    "dk": Param(4, int_range(1, 16)),
    "mask": Param("causal", choice(["causal", "padding"])),
    "scoring": Param("dot", choice(["dot", "scaled_dot", "cosine"])),
    "item": Param(0, int_range(0, len(BATCH) - 1)),
    "heads": Param(4, int_range(1, 8)),
    "copyseed": Param(0, int_range(0, 9)),  # steps 16, 17 and 21: which random sequence
    "copyshuffle": Param(False, boolean, encode_bool),  # step 16: its second copy shuffled
    "writeseed": Param(0, int_range(0, 9)),  # step 19: the sampler's seed
    "hhead": Param(0, int_range(0, 8)),  # step 13: the head drawn whole (H: their average)
    "layer": Param(1, int_range(1, 6)),
    "head": Param(3, int_range(1, 12)),
    "order": Param("dog bites man", bounded_text(120)),  # step 8: a sentence, and its words backwards
    "opos": Param(False, boolean, encode_bool),  # step 8: sinusoidal positions added
    # The comparison of steps 6, 8 and 10, drawn in the browser: each side's τ, hard and mask ("step": the step's own).
    "ctemp": Param(1.0, nearest(temperature_grid())),
    "chard": Param(False, boolean, encode_bool),
    "cmask": Param("step", choice(["step", "none", "causal"])),
    "cb_temp": Param(1.0, nearest(temperature_grid())),
    "cb_hard": Param(False, boolean, encode_bool),
    "cb_mask": Param("step", choice(["step", "none", "causal"])),
}
COMPARE_NAMES = {"temp": "ctemp", "hard": "chard", "mask": "cmask", "b_temp": "cb_temp", "b_hard": "cb_hard",
                 "b_mask": "cb_mask", "query": "query"}  # the browser's names → the lesson's


def held(where, part: str = "figure") -> bool:
    """Whether `part` of the step ("figure": its figures, "result": the sentences that state what it finds) answers the
    class's open question, so this page draws it only at the reveal; a held figure's place says so once."""
    if part not in st.session_state.get(HELD, ()):
        return False
    noted = st.session_state.setdefault(NOTED, set())
    if part == "figure" and id(where) not in noted:
        noted.add(id(where))
        where.info("Predict first: the figure appears when the teacher reveals the answer.",
                   icon=":material/visibility_off:")
    return True


def explore(page: str, title: str, text: str = "Explore this", state: dict | None = None) -> None:
    """A link to the full page for this idea; it keeps the session (and presenter mode), and opens the page in the
    step's `state` (that page's URL names)."""
    page_link(page, f"{text} in {title}", query_params=state)


def sentence_input(where) -> str:
    return where.text_input("Sentence", key="text", max_chars=SENTENCE_CHARS)


def toy_view(sentence: str, config: Config):
    """attnviz.sentence.run on the sentence's GloVe rows under `config`, from the views every session shares
    (appkit.explorer.compute): a class on the step computes it once. Scores too large for the softmax raise as run's."""
    view = compute(glove(), Request("glove", sentence, False, "zero", config, MAX_TOKENS)).view
    return view if view is not None else run(embed(tokenize(sentence), glove()).vectors, config)


def embedded_sentence(sentence: str, where):
    """The sentence's tokens and GloVe rows, or None after saying why there are none."""
    tokens = tokenize(sentence)
    if not tokens or len(tokens) > MAX_TOKENS:
        where.info(f"Type a sentence of 1 to {MAX_TOKENS} words.")
        return None
    embedded = embed(tokens, glove())
    if all(embedded.oov):
        where.info("None of these words are in GloVe. Try ordinary English words.")
        return None
    return embedded


def draw_comparison(sentence: str, a: Config, b: Config, where, b_sentence: str | None = None) -> None:
    """Compare mode for one sentence under two settings (or, with `b_sentence`, B's own sentence), in `where`, drawn in
    the browser from each side's raw scores: τ, hard and the mask of each side (a's and b's masks to start with)
    redraw at once; the link and the downloads follow once the person pauses."""
    if held(where):
        return
    state = st.session_state
    configs = []
    for config, temp, hard, mask in ((a, "ctemp", "chard", "cmask"), (b, "cb_temp", "cb_hard", "cb_mask")):
        configs.append(replace(config, temperature=state[temp], hard=state[hard],
                               mask=config.mask if state[mask] == "step" else state[mask]))
    raw = [Request("glove", text, False, "zero", replace(config, mask="none"), MAX_TOKENS)
           for text, config in ((sentence, a), (b_sentence or sentence, b))]
    views = [{"temp": c.temperature, "hard": c.hard, "mask": c.mask, "hide": [], "scale": "max", "palette": "viridis",
              "query": state.query} for c in configs]
    with where:
        sides = live_compare(glove(), *raw, views, key="lesson_compare", clean=clean_comparison, compact=True,
                             taus=temperature_grid(), **screen_sizes())
        if sides:
            compare_downloads(glove(), *(replace(r, config=c) for r, c in zip(raw, configs)), "viridis", "max",
                              key="lesson_compare")


def clean_comparison(sent: dict) -> dict:
    """The comparison's view as the browser sent it, under the lesson's names, checked as a link's values are."""
    return coerce({COMPARE_NAMES[name]: value for name, value in sent.items() if name in COMPARE_NAMES}, SCHEMA)


def batch():
    """The lesson's batch: padded GloVe rows (B, T, d), valid (B, T), and each sentence's tokens."""
    sentences = [embed(tokenize(line), glove(), oov="drop") for line in BATCH]
    x, valid = pad_batch([s.vectors for s in sentences])  # (B, T, d), (B, T)
    return x, valid, [s.tokens for s in sentences]
