"""Lesson steps 13–16, models: several heads, a trained model's real heads, a decoder predicting the next word, and a
head that copies.
Each step is one function of (text column, figure column)."""

import numpy as np
import streamlit as st
import torch

from attnviz import figures, heads, models
from attnviz.export import Matrix
from attnviz.sentence import Config
from appkit.served import induction_work, model as loaded_model, run as model_run, shared
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import chart
from appkit.lesson.common import DOG, FIGURE_COLUMN, embedded_sentence, explore, held, sentence_input, toy_view


def heads_step(text, figure):
    text.write("One head gives one way of looking. Several heads, each with its own W_q, W_k, W_v of size d_k = 16, "
               "look in several ways at once; their outputs are joined and mixed by W_o. The last panel averages them.")
    text.latex(r"\mathrm{head}_h = \mathrm{softmax}\Big(\frac{Q_h K_h^\top}{\sqrt{d_k}}\Big) V_h")
    text.latex(r"O = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W_o")
    sentence = sentence_input(text)
    embedded = embedded_sentence(sentence, figure)
    if embedded is None:
        return
    heads = text.slider("Heads H", 1, 8, key="heads")
    view = toy_view(sentence, Config(projection="random", heads=heads, d_k=16))
    offer(questions.heads(view.weights))
    if held(figure):
        return
    # Every head small (the patterns side by side), and the one chosen drawn with every word's label.
    chart(figure, lambda: figures.head_grid(view.weights, embedded.tokens, oov=embedded.oov, width=FIGURE_COLUMN, cols=5,
                                            labelled=False, panel_px=130), key="lesson_heads", same_for=(sentence, heads))
    st.session_state.hhead = min(st.session_state.hhead, heads)
    names = [f"head {h}" for h in range(heads)] + ["average"]
    chosen = text.radio("Head to read", range(heads + 1), format_func=names.__getitem__, key="hhead", horizontal=True)
    weights = view.mean_weights if chosen == heads else view.weights[chosen]  # (n, n)
    title = "Average over heads" if chosen == heads else f"Head {chosen}"
    chart(figure, lambda: figures.attention_heatmap(weights, embedded.tokens, row_oov=embedded.oov, col_oov=embedded.oov,
                                                    title=title, width=FIGURE_COLUMN, height=520),
          key="lesson_head", matrix=Matrix(weights, embedded.tokens, embedded.tokens), same_for=(sentence, heads, chosen))
    with text:
        explore("heads", "Heads and layers")


def trained_step(text, figure):
    text.write("Everything so far used random or no projections. A trained transformer learned its W_q, W_k, W_v. "
               "Here is all-MiniLM-L6-v2 (6 layers × 12 heads) on the same sentence, run by attnviz's own engine.")
    text.latex(r"\alpha = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{32}}\Big)")
    text.latex(r"Q = XW_q + b_q,\ K = XW_k + b_k")
    sentence = sentence_input(text)
    try:
        result = model_run("minilm", sentence)
    except (models.TextError, models.ModelError) as error:
        text.info(str(error))
        return
    left, right = text.columns(2)
    layer = left.selectbox("Layer", list(range(1, 7)), key="layer")
    head = right.selectbox("Head", list(range(1, 13)), key="head")
    labels = result.pieces.labels()
    weights = result.weights[layer - 1, head - 1]  # (n, n)
    offer(questions.trained(weights, labels, len(labels) - 1, layer, head))
    if held(figure):
        return
    if (layer, head) == (1, 3) and not held(text, "result"):
        text.write("Layer 1, head 3 looks almost only at the previous piece.")
    chart(figure, figures.attention_heatmap(weights, labels, row_oov=result.pieces.unknown, title=f"Layer {layer}, head {head}",
                                            width=FIGURE_COLUMN),
          key="lesson_trained", matrix=Matrix(weights.copy(), labels, labels))
    with text:
        explore("trained", "Trained model", "All 72 heads")


DECODER_PROMPT = DOG.split(" happy")[0]  # "When he saw his owner, the dog was"


def decoder_step(text, figure):
    text.write("The encoder of step 14 (all-MiniLM-L6-v2) reads the whole sentence at once. A **decoder** (here SmolLM2-135M, 30 layers of 9 "
               "heads) reads left to right: the causal mask of step 10, for real, so every head's upper triangle is "
               "empty. From the last piece's hidden state it predicts the next piece: the final norm, then the "
               "output matrix, then a softmax.")
    text.latex(r"\begin{gathered} z = \mathrm{RMSNorm}(h_n^{(30)})\, E^\top \\ p(x_{n+1} \mid x_{\le n}) = \mathrm{softmax}(z) \end{gathered}")
    prompt = DECODER_PROMPT
    text.write(f"“{prompt} …”: which word comes next?")
    try:
        result = model_run("smollm2", prompt)
    except models.ModelError as error:
        text.info(str(error))
        return
    model = loaded_model("smollm2")
    probs, top, names = likeliest(("smollm2", prompt), model, result)
    offer(questions.decoder(probs[top], names))
    if held(figure):
        return
    chart(figure, lambda: figures.weight_bars(probs[top], names, title="The next piece: the 8 most likely (T = 1)",
                                              axis="probability"),
          key="lesson_decoder", matrix=Matrix(probs[top][None].copy(), ["next"], names, corner="after the text \\ piece"),
          same_for=("smollm2", prompt))
    labels = result.pieces.labels()
    weights = result.weights[0].mean(0)  # (n, n) layer 1, the average of its heads
    chart(figure, lambda: figures.attention_heatmap(weights, labels, title="Layer 1, the average of its 9 heads: causal",
                                                    width=FIGURE_COLUMN, height=420,
                                                    allowed=model.allowed(len(labels), layer=0)),
          key="lesson_decoder_heads", matrix=Matrix(weights, labels, labels), same_for=("smollm2", prompt))
    with text:
        explore("decoder", "Decoder", "All 270 heads")


COPY_PIECES = 20  # the random pieces of step 16's sequence; the second copy stops COPY_CUT short of its end
COPY_CUT = 3


def copying_head(seed: int, shuffled: bool = False):
    """(SmolLM2, its induction scores, its strongest induction head (layer, head) from 0, step 16's probe, the run on
    it): what steps 16 and 21 draw."""
    from appkit.served import induction, probe_run

    model = loaded_model("smollm2")
    scores, _ = induction("smollm2")
    layer, head = (int(v) for v in np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape))
    probe, result = probe_run("smollm2", COPY_PIECES, 1000 + seed, shuffled, COPY_CUT)
    return model, scores, (layer, head), probe, result


def repeats_of(model, probe, result, seed: int, shuffled: bool) -> tuple[int, int, int | None]:
    """heads.repeats_predicted on step 16's probe, once for every session."""
    return shared(("smollm2", "repeats", seed, shuffled),
                  lambda: heads.repeats_predicted(model, result, probe.lead, COPY_PIECES))


def likeliest(key: tuple, model, result, count: int = 8):
    """(p of every next piece (vocab,), the `count` likeliest pieces' ids, their labels) after `result`'s last piece,
    softmax at T = 1, once for every session."""
    def compute():
        probs = models.next_distribution(torch.from_numpy(result.next_logits)).numpy()  # (vocab,)
        top, names = models.top_pieces(model, probs, count)
        return probs, top, names

    return shared((*key, "likeliest", count), compute, nbytes=4 * len(result.next_logits) + 4096)


def copy_step(text, figure):
    text.write("Some heads **copy**. Give SmolLM2 random pieces of its vocabulary, then the same pieces again. Scoring "
               "its 270 heads on such sequences finds induction heads: on the second copy, a piece looks at the piece "
               "that came right after its own first occurrence, and the model often predicts that piece next.")
    text.latex(r"\alpha_{ij}\ \text{large where}\ x_{j-1} = x_i,\ j \le i")
    seed = text.selectbox("Random sequence", list(range(10)), key="copyseed", format_func=lambda s: f"seed {s}")
    shuffled = text.toggle("Shuffle the second copy", key="copyshuffle",
                           help="The same pieces in another order: the pieces still repeat, their order does not.")
    try:
        if induction_work("smollm2").ready(figure) is None:
            return
        model, scores, (layer, head), probe, result = copying_head(seed, shuffled)
    except (models.ModelError, heads.HeadsError) as error:
        text.info(str(error))
        return
    ids = result.pieces.ids
    weights = result.weights[layer, head]  # (n, n)
    labels = result.pieces.labels()
    pattern = heads.induction_pattern(ids)  # (n, n) the piece after an earlier copy of each piece
    on_pattern = heads.pattern_score(weights[None], pattern)
    offer(questions.copy(weights, ids))
    if held(text, "result") | held(figure):
        return
    chart(figure, lambda: figures.attention_heatmap(weights, labels, title=f"Layer {layer + 1}, head {head + 1}: the "
                                                    f"strongest induction head (score {scores['induction'][layer, head]:.2f})",
                                                    width=FIGURE_COLUMN, height=560,
                                                    allowed=model.allowed(len(labels), layer=layer)),
          key="lesson_copy", matrix=Matrix(weights, labels, labels), same_for=("smollm2", seed, shuffled))
    hits, positions, expected = repeats_of(model, probe, result, seed, shuffled)
    share = f"{on_pattern[0]:.0%}" if on_pattern is not None else "none"
    text.write(f"On the second copy, {share} of this head's weight goes to the piece after each piece's first "
               f"occurrence. At {hits} of its {positions} positions, the model's most likely next piece is the one "
               "that followed it the first time."
               + (" Shuffled, the head still finds the piece after each first occurrence: it follows the pieces, not "
                  "their positions, so its cells leave the diagonal stripe." if shuffled else
                  " The bright stripe at the lower left, one key right of where each piece first appeared, is that look back."))
    probs, top, names = likeliest(("smollm2", "copy", seed, shuffled), model, result)
    mark = [i for i, t in enumerate(top) if t == expected]
    text.caption("The bars: the 8 most likely pieces after the last one"
                 + (f"; highlighted, the repeat ({probs[expected]:.0%})." if mark else
                    "; the repeat is not among them."))
    chart(figure, lambda: figures.weight_bars(probs[top], names, title="The next piece: the 8 most likely (T = 1)",
                                              axis="probability", highlight=mark[0] if mark else None),
          key="lesson_copy_next", matrix=Matrix(probs[top][None].copy(), ["next"], names, corner="after the text \\ piece"),
          same_for=("smollm2", seed, shuffled))
    with text:
        explore("decoder", "Decoder", "Every head's score", {"text": result.pieces.text, "layer": int(layer) + 1,
                                                              "head": int(head) + 1, "types": 1})
