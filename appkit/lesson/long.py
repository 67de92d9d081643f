"""Lesson step 22, how much of a long document each head needs: SmolLM2's census over a document of 2,000
pieces (attnviz.models.census), each head's class on the map, and what that leaves of a KV cache. One function of
(text column, figure column)."""

import numpy as np

from attnviz import figures
from attnviz.figures import long as drawn
from attnviz.models import census
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.interactive import census_map, screen_sizes
from appkit.lesson.common import explore, held
from appkit.served import census_document_work
from appkit.present import chart
from attnviz.export import Matrix

SHORT = ("previous", "local", "streaming")  # the classes that read a window and the first pieces at most


def census_step(text, figure):
    text.write("A long document puts every piece in every head's KV cache. Does every head read all of it? Over a "
               "document of about 2,000 pieces, take each head's weight from one scan: how much of each long row lands on the "
               "first 4 pieces (the sinks) and on the 256 before the query (a window), and how much further away.")
    text.latex(r"\text{near}_h = \frac{1}{|R|}\sum_{i \in R}\ \sum_{j < 4\ \text{or}\ i - j < 256} \alpha_h[i, j]")
    try:
        found = census_document_work("smollm2").ready(figure)
    except Exception as error:  # noqa: BLE001  a model not installed, a document that cannot be read
        text.info(str(error))
        return
    if found is None:
        return
    counts = found.counts()
    short = sum(counts[c] for c in SHORT) / sum(counts.values())
    offer(questions.census(short))
    if held(text, "result") | held(figure):
        return
    names = [census.CLASS_NAMES[c] for c in census.CLASSES]
    values = np.array([counts[c] for c in census.CLASSES], np.float32)
    chart(figure, lambda: figures.weight_bars(values, names, axis="heads", whole=True,
                                              title=f"SmolLM2's {int(values.sum())} heads over {found.n:,} pieces, by "
                                                    "what they read"),
          key="lesson_census", matrix=Matrix(values[None].copy(), ["heads"], names, corner="heads \\ class"),
          same_for=("smollm2", "census", found.n))
    with figure:
        census_map(drawn.census_data(found, (0, 0), font_px=screen_sizes()["font_px"], openable=False),
                   key="lesson_census_map")  # no head's evidence on this step: a cell opens nothing
    other = sum(counts.values()) - sum(counts[c] for c in SHORT)
    text.write(f"{short:.0%} of the heads put at least {found.rules.streaming:.0%} of each long row's weight on the "
               "sinks and the window, or read only the piece before or the pieces nearby: that much of their weight "
               f"lies in {found.rules.sinks + found.rules.recent} of the {found.n:,} keys and values. The other "
               f"{other:,} need the whole document: {counts['retrieval']:,} retrieval heads, whose weight lands far "
               f"away on few pieces (as the heads that found the needle in step 20 do), and {counts['dense']:,} dense "
               "ones that spread it over many. " + found.sentence().split(". ", 2)[-1])
    with text:
        explore("long_text", "Long text", "Take the census of your own document")
