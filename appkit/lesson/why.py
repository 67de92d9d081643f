"""Lesson step 21, why the copying head of step 16 looks where it does: its score of the piece it copies, taken apart into
what wrote the query's and the key's parts of the stream (attnviz.effects.score_parts_of), on step 16's sequence."""

import numpy as np

from attnviz import effects, figures, heads, models
from attnviz.effects.why import part_position
from attnviz.export import Matrix
from appkit.common import md_escape
from appkit.lesson.models import copying_head
from appkit.served import induction_work, shared
from appkit.lesson.common import FIGURE_COLUMN, explore, held
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import chart


def score_parts_for(model, result, seed: int, layer: int, head: int):
    """(the last piece, the key the head looks at most from it, that score taken apart, its strongest parts with the
    rest folded, every head's previous-piece score on the sequence (L, H)), once for every session."""
    query = len(result.pieces) - 1
    key = int(np.argmax(result.weights[layer, head, query]))  # where it looks most from the last piece

    def compute():
        found = effects.score_parts_of(model, result, layer, head, query, key)
        previous = heads.pattern_score(result.weights, heads.previous_pattern(len(result.pieces)))  # (L, H)
        return found, found.strongest(6), previous

    found, strongest, previous = shared(("smollm2", "score parts", seed, layer, head, query, key), compute, nbytes=2**20)
    return query, key, found, strongest, previous


def why_step(text, figure):
    text.write("Step 16's head looks, from each piece of the second copy, at the piece that followed its first "
               "occurrence. **Why there?** Its score q·k/√d is a sum: the query and the key are each made from the "
               "residual stream, and the stream is the embeddings plus what every earlier head and MLP wrote. Take the "
               "score apart, one query-side part against one key-side part a cell, and see who made them agree.")
    text.latex(r"a = \sum_{a,b} \frac{q_a \cdot k_b}{\sqrt{d}}")  # two lines: the text column is narrow on a laptop
    text.latex(r"q_a = R_i\big(\mathrm{norm}(x_a)\,W_q\big)")
    seed = text.selectbox("Random sequence", list(range(10)), key="copyseed", format_func=lambda s: f"seed {s}")
    try:
        if induction_work("smollm2").ready(figure) is None:
            return
        model, scores, (layer, head), _, result = copying_head(seed)
    except (models.ModelError, heads.HeadsError) as error:
        text.info(str(error))
        return
    query, key, found, (rows, cols, table), previous = score_parts_for(model, result, seed, layer, head)
    labels = result.pieces.labels()
    key_side = found.key_shares()
    top_key = max(key_side, key=lambda name: abs(key_side[name]))
    position = part_position(top_key)  # (layer, head) from 0, or None for the embeddings, an MLP, the bias
    textbook = position is not None and previous[position] >= 0.3
    offer(questions.why(textbook))
    if held(text, "result") | held(figure):
        return
    chart(figure, figures.matrix_heatmap(table, [f"q: {r}" for r in rows], [f"k: {c}" for c in cols],
                                         title=f"Layer {layer + 1}, head {head + 1}: its score of “{labels[key]}” from "
                                               f"the last piece, taken apart", width=FIGURE_COLUMN),
          key="lesson_why", matrix=Matrix(table, [f"q: {r}" for r in rows], [f"k: {c}" for c in cols],
                                          corner="query part \\ key part"))
    types = {"previous": previous, **scores}
    text.write(f"From the last piece, “{md_escape(labels[query])}”, the head looks most at piece {key}, "
               f"“{md_escape(labels[key])}”, weight {result.weights[layer, head, query, key]:.2f}, score "
               f"{found.score:.2f}. " + found.sentence(types))
    text.write("The textbook story, that an earlier previous-piece head writes into each key which piece came before "
               "it, so the query finds the key whose predecessor matches it, "
               + ("is what the measurement finds here: the key side's largest part is such a head." if textbook else
                  "is not what the largest part shows here: the key side's largest part is not a previous-piece head "
                  "on this sequence. The story can still hold spread over several heads; the table shows which."))
    text.caption("A part named like L3H5 is layer 3's head 5, both counted from 1 as everywhere on the pages. Each norm's "
                 "scale is frozen at the whole stream's value, so every cell is exact "
                 "and the cells sum to the score. The previous-piece scores are measured on this sequence.")
    with text:
        explore("decoder", "Decoder", "Take any score apart", {"layer": layer + 1, "head": head + 1, "why": 1})
