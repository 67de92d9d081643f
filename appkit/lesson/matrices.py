"""Lesson steps 9–12, matrices: Q, K, V with weights and biases, masks, encoder–decoder and cross-attention, batches.
Each step is one function of (text column, figure column)."""

import streamlit as st
import torch

from attnviz import figures
from attnviz.functional import attend, causal_mask
from attnviz.embeddings import embed, tokenize
from attnviz.encdec import bmm_items, encoder_decoder, pad_batch, padding_mask
from attnviz.export import Matrix
from attnviz.sentence import Config, steps
from appkit.common import glove, md_escape
from appkit.served import shared
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import PRESENT, chart
from appkit.lesson.common import (FIGURE_COLUMN, toy_view, SOURCE, TARGET, batch, draw_comparison, embedded_sentence, explore, held,
                                  sentence_input)


def projections(text, figure):
    text.write("A real layer does not compare the raw vectors. It learns three matrices and three biases, and makes "
               "a query, a key and a value of every word. Here they are random (seeded), d_k wide.")
    sentence = sentence_input(text)
    embedded = embedded_sentence(sentence, figure)
    if embedded is None:
        return
    dk = text.slider("d_k", 1, 16, key="dk")
    view = toy_view(sentence, Config(projection="random", d_k=dk, bias=True))
    n, d = view.x.shape
    text.latex(r"Q = XW_q + b_q,\ K = XW_k + b_k")
    text.latex(r"V = XW_v + b_v")
    labels = figures.labels(embedded.tokens, embedded.oov)
    matrices = steps(view)[:4]  # X, Q, K, V
    offer(questions.projections(n, d, matrices[1].matrix.shape))
    if held(text, "result") | held(figure):
        return
    text.latex(r"\small (%d \times %d)(%d \times %d) + (1 \times %d) \to %d \times %d" % (n, d, d, dk, dk, n, dk))
    if st.session_state.get(PRESENT):  # Q, K, V in one row, X under them: two rows of 16 words at 16 px overflow 1080 px
        row = figure.columns(3)
        places = {1: (row[0], "third"), 2: (row[1], "third"), 3: (row[2], "third"), 0: (figure, FIGURE_COLUMN)}
    else:  # two by two
        grid = figure.columns(2)
        places = {i: (grid[i % 2], "third") for i in range(4)}
    for i, (where, width) in places.items():
        step, cols = matrices[i], figures.dims(matrices[i].matrix.shape[1])
        chart(where, lambda step=step, cols=cols, width=width: figures.matrix_heatmap(
                  step.matrix, labels, cols, title=step.title.split(" (")[0], width=width, height=300),
              key=f"lesson_proj_{i}", matrix=Matrix(step.matrix, labels, cols, corner="token \\ dimension"),
              same_for=(sentence, dk))
    with text:
        explore("self_attention", "Self-attention", "Q, K, V and heads")


def masks(text, figure):
    kind = text.radio("Mask", ["causal", "padding"], key="mask", horizontal=True)
    if kind == "causal":
        text.write("A decoder writes one word at a time, so a word may only look at itself and the words before it. "
                   "The **causal** mask blocks the future: weight exactly 0 above the diagonal (B).")
        text.latex(r"\alpha_{ij} = 0 \text{ for } j > i")
        embedded = embedded_sentence(sentence_input(text), figure)
        if embedded is not None:
            n = len(embedded.tokens)
            allowed = causal_mask(n, n).float().numpy()  # (n, n) 1 = may attend
            offer(questions.masks(toy_view(st.session_state.text, Config(mask="causal")).weights[0]))
            text.latex(r"M \in \{0,1\}^{T \times T} = %d \times %d" % (n, n))
            draw_comparison(st.session_state.text, Config(), Config(mask="causal"), figure)
            if held(text, "result"):
                return
            chart(text, figures.matrix_heatmap(allowed, embedded.tokens, embedded.tokens, width="third", height=440,
                                               title="Mask M: 1 = attend", bounded=True, scale_bar=False),
                  key="lesson_causal", matrix=Matrix(allowed, embedded.tokens, embedded.tokens))
            text.caption("M's yellow cells are 1 (may attend), its dark cells 0 (masked).")
    else:
        text.write("A batch holds sentences of different lengths, padded with zeros to the longest. The **padding** "
                   "mask hides the padding keys, so no word attends to them.")
        lengths = draw_batch_mask(text, figure)
        text.latex(r"\text{mask} \in \{0,1\}^{B \times 1 \times T_q \times T_k} = %d \times 1 \times %d \times %d"
                   % (len(lengths), max(lengths), max(lengths)))
    explore("batches", "Batches", "Padding masks")


def draw_batch_mask(text, figure) -> list[int]:
    x, valid, tokens = batch()
    B, T, _ = x.shape
    names, places = [f"sentence {b}" for b in range(B)], [str(t) for t in range(T)]
    chart(text, figures.matrix_heatmap(valid.float().numpy(), names, places, title="Padding mask (1 = real)", bounded=True, height=260),
          key="lesson_padding", matrix=Matrix(valid.float().numpy(), names, places, corner="sentence \\ position"))
    result = attend(x, x, x, mask=padding_mask(valid, valid)[:, 0])  # weights (B, T, T)
    padded = tokens[1] + ["⟨pad⟩"] * (T - len(tokens[1]))
    weights = result.weights[1].numpy()  # (T, T)
    offer(questions.padding(weights, valid[1].numpy()))
    if held(figure):
        return [len(t) for t in tokens]
    chart(figure, figures.attention_heatmap(weights, padded, title=f"Sentence 1, padded to {T}: padding columns get 0", scale="max",
                                            width=FIGURE_COLUMN),
          key="lesson_padded", matrix=Matrix(weights, padded, padded))
    return [len(t) for t in tokens]


def translation(scoring: str):
    """(the source's and the target's embedded words, the encoder-decoder's weights, the cross weights of a target one
    word shorter (1, 1, T_out − 1, T_in)) for step 11's sentences, once for every session."""
    def compute():
        source, target = embed(tokenize(SOURCE), glove()), embed(tokenize(TARGET), glove())
        x_in, valid_in = pad_batch([source.vectors])
        x_out, valid_out = pad_batch([target.vectors])
        x_short, valid_short = pad_batch([target.vectors[:-1]])
        shorter = encoder_decoder(x_in, valid_in, x_short, valid_short, scoring=scoring).cross  # (1, 1, T_out − 1, T_in)
        return source, target, encoder_decoder(x_in, valid_in, x_out, valid_out, scoring=scoring), shorter

    return shared(("glove", "translation", scoring), compute)


def encoder_decoder_step(text, figure):
    text.write("A translator has two parts. The **encoder** reads the source sentence, every word seeing every word. "
               "The **decoder** reads the target so far under the causal mask, then looks at the encoder's output through "
               "**cross-attention**: its queries are target words, its keys and values source words.")
    scoring = text.radio("Scoring", ["dot", "scaled_dot", "cosine"], key="scoring", horizontal=True)
    source, target, views, shorter = translation(scoring)
    t_in, t_out = len(source.tokens), len(target.tokens)
    offer(questions.encoder_decoder(views.cross.shape[-2], t_out, t_in, shorter.shape[-2]))
    if held(text, "result") | held(figure):
        return
    text.latex(r"\text{mask } (B, 1, T_q, T_k):\ \text{encoder } (1, 1, %d, %d),\ \text{decoder } (1, 1, %d, %d),\ "
               r"\text{cross } (1, 1, %d, %d)" % (t_in, t_in, t_out, t_out, t_out, t_in))
    panels = figure.columns(3)
    for column, (name, weights, rows, cols) in zip(panels, (
            ("encoder", views.encoder, source.tokens, source.tokens), ("decoder (causal)", views.decoder, target.tokens, target.tokens),
            ("cross", views.cross, target.tokens, source.tokens))):
        w = weights[0, 0].numpy()  # (T_q, T_k)
        chart(column, lambda w=w, rows=rows, cols=cols, name=name: figures.attention_heatmap(w, rows, cols, title=name, width="third"),
              key=f"lesson_{name.split()[0]}", matrix=Matrix(w, rows, cols), same_for=(scoring,))
    with text:
        explore("encoder_decoder", "Encoder–decoder")


def batches_step(text, figure):
    x, valid, tokens = batch()
    B, T, d = x.shape
    text.write(f"A GPU computes a whole batch at once. The batch's {B} sentences are padded with zeros to one length T, "
               f"each word d = {d} numbers, and one batch matrix multiplication computes every sentence's QKᵀ together.")
    for n, sentence in enumerate(tokens):
        text.markdown(f"{n}. {md_escape(' '.join(sentence))}")
    text.latex(r"\mathrm{BMM}:\ (n, a, b)\cdot(n, b, c) \to (n, a, c)")
    keys_t = x.transpose(1, 2)  # (B, d, T)
    offer(questions.batches(tuple(torch.bmm(x, keys_t).shape)))
    if held(text, "result") | held(figure):
        return
    text.latex(r"\small Q\,K^\top:\ (%d, %d, %d)\cdot(%d, %d, %d) \to (%d, %d, %d)" % (B, T, d, B, d, T, B, T, T))
    item = text.select_slider("Batch item", list(range(B)), key="item")
    product = bmm_items(x, keys_t)[item].numpy()  # (T, T)
    padded = tokens[item] + ["⟨pad⟩"] * (T - len(tokens[item]))
    gap = float((torch.bmm(x, keys_t)[item] - torch.from_numpy(product)).abs().max())
    text.caption(f"torch.bmm on the whole batch gives the same numbers for item {item}: largest difference {gap:.1e}.")
    chart(figure, figures.matrix_heatmap(product, padded, padded, title=f"Item {item}: Q{item} K{item}ᵀ", width=FIGURE_COLUMN),
          key="lesson_bmm", matrix=Matrix(product, padded, padded, corner="token \\ token"))
    with text:
        explore("batches", "Batches")
