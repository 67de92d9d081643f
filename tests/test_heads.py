"""What a head does (attnviz.heads): the scores as written on hand-made patterns, planted heads found first, the
value-weighted view against W_v, b_v and W_o by hand, and the induction head of SmolLM2 against a shuffled control."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz import heads, models
from tests.tiny_models import SENTENCES, byte_level_tokenizer, build


def rows_softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def causal_random(rng, shape) -> np.ndarray:
    n = shape[-1]
    scores = rng.normal(size=shape) * 2
    scores = np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf)
    return rows_softmax(scores)


# ---------------------------------------------------------------- the scores as written


def test_patterns_as_defined():
    ids = [5, 7, 5, 9, 7, 5]
    duplicate = heads.duplicate_pattern(ids)
    induction = heads.induction_pattern(ids)
    for i in range(6):
        for j in range(6):
            assert duplicate[i, j] == (j < i and ids[i] == ids[j])
            assert induction[i, j] == (j >= 1 and j - 1 < i and ids[j - 1] == ids[i])
            assert heads.previous_pattern(6)[i, j] == (j == i - 1)
            assert heads.local_pattern(6)[i, j] == (abs(i - j) <= 2)
    assert heads.patterns(ids, [False] * 6, encoder=False).keys() >= {"previous", "sink", "self", "local"}
    found = heads.patterns([1, 5, 2], [True, False, True], encoder=True)
    assert found["cls"][:, 0].all() and found["sep"][:, 2].all() and found["cls"].sum() == 3


def test_pattern_score_is_the_sum_over_marked_cells_over_the_rows_it_covers():
    rng = np.random.default_rng(0)
    weights = causal_random(rng, (2, 3, 7, 7))  # (L, H, n, n)
    ids = [3, 4, 3, 5, 4, 3, 6]
    for pattern in (heads.previous_pattern(7), heads.duplicate_pattern(ids), heads.induction_pattern(ids)):
        covered = [i for i in range(7) if pattern[i].any()]
        for l in range(2):
            for h in range(3):
                on = sum(weights[l, h, i, j] for i in covered for j in range(7) if pattern[i, j])
                assert heads.pattern_score(weights, pattern)[l, h] == pytest.approx(on / len(covered), rel=1e-6)
                # rows="all" is TransformerLens's "mul": Σ α∘P / Σ α over every row (each row sums to 1)
                every = (weights[l, h] * pattern).sum() / weights[l, h].sum()
                assert heads.pattern_score(weights, pattern, "all")[l, h] == pytest.approx(every, rel=1e-6)
    assert heads.pattern_score(weights, np.zeros((7, 7), bool)) is None


def test_a_head_that_does_the_pattern_exactly_scores_one():
    n = 6
    previous = np.zeros((1, 1, n, n))
    previous[0, 0, 0, 0] = 1
    previous[0, 0, np.arange(1, n), np.arange(n - 1)] = 1
    assert heads.pattern_score(previous, heads.previous_pattern(n))[0, 0] == pytest.approx(1)
    assert heads.pattern_score(previous, heads.previous_pattern(n), "all")[0, 0] == pytest.approx((n - 1) / n)
    assert heads.pattern_score(previous, heads.column_pattern(n, 0, 1))[0, 0] == pytest.approx(1 / (n - 1))


def test_offset_profile_and_positional_score_as_written():
    rng = np.random.default_rng(1)
    a, b = causal_random(rng, (2, 2, 5, 5)), causal_random(rng, (2, 2, 8, 8))
    for weights in (a, b):
        n = weights.shape[-1]
        profile = heads.offset_profile(weights, span=10)  # (L, H, 19)
        for l in range(2):
            for h in range(2):
                for delta in range(-9, 10):
                    cells = [weights[l, h, i, i + delta] for i in range(n) if 0 <= i + delta < n]
                    assert profile[l, h, delta + 9] == pytest.approx(sum(cells) / n, abs=1e-9)
        assert np.allclose(profile.sum(-1), 1)
    pa, pb = heads.offset_profile(a, 10), heads.offset_profile(b, 10)
    mean = (pa + pb) / 2
    tv = 0.5 * (np.abs(pa - mean).sum(-1) + np.abs(pb - mean).sum(-1)) / 2
    assert np.allclose(heads.positional_score([pa, pb]), 1 - tv)
    # A previous-piece head looks at the same offsets whatever the sentence: near 1
    prev = [np.eye(n, k=-1)[None, None] + np.eye(n)[None, None] * (np.arange(n) == 0)[:, None] for n in (9, 12)]
    assert heads.positional_score([heads.offset_profile(p) for p in prev])[0, 0] > 0.94


def test_the_corpus_is_seeded_and_sentences_repeat_words():
    assert heads.corpus(50) == heads.corpus(50) and heads.corpus(50, seed=1) != heads.corpus(50)
    sentences = heads.corpus()
    assert len(sentences) == heads.CORPUS_SIZE == len(set(sentences)) or len(set(sentences)) > 200
    repeated = [s for s in sentences if len(set(w.strip(".,;") for w in s.split())) < len(s.split())]
    assert len(repeated) > len(sentences) / 2


# ---------------------------------------------------------------- planted heads


def hadamard(d: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def planted_gpt2(folder, strength: float = 40.0):
    """A GPT-2 of 2 layers × 2 heads whose layer 1 head 2 attends exactly to the previous piece and layer 1 head 1 to
    the first piece. Its embeddings are 0 and its positions are rows of a Hadamard matrix (mean 0, every entry ±1,
    so LayerNorm leaves them as they are); W_k sends position j to the one-hot e_j of its head, W_q sends position i
    to e_(i−1) (previous) or every position to e_0 (sink), times `strength`."""
    import transformers as T

    vocab = byte_level_tokenizer(folder)
    d, dh, n_pos = 64, 32, 32
    config = T.GPT2Config(vocab_size=vocab, n_embd=d, n_layer=2, n_head=2, n_positions=n_pos, bos_token_id=0,
                          eos_token_id=0)
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(config)
    rows = torch.tensor(hadamard(d)[1: n_pos + 1], dtype=torch.float32)  # (n_pos, d) each row's mean 0, norm² d
    with torch.no_grad():
        model.transformer.wte.weight.zero_()
        model.transformer.wpe.weight.copy_(rows)
        attn = model.transformer.h[0].attn.c_attn  # Conv1D: weight (d, 3d) = [W_q | W_k | W_v]
        w = attn.weight
        w[:, : 2 * d].zero_()
        attn.bias[: 2 * d].zero_()
        to_position = rows.T / d  # (d, n_pos): p_j ↦ e_j
        w[:, d: d + dh] = to_position * strength  # W_k of head 1: e_j
        w[:, d + dh: 2 * d] = to_position * strength  # W_k of head 2: e_j
        w[:, 0] = rows.sum(0) * 0  # head 1's W_q is 0; its bias points every query at e_0
        attn.bias[0] = strength
        shift = torch.zeros(d, dh)
        shift[:, : n_pos - 1] = rows[1:].T / d  # p_i ↦ e_(i−1)
        w[:, dh: 2 * dh] = shift * strength  # W_q of head 2
    model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return models.load(planted_gpt2(tmp_path_factory.mktemp("planted")), "cpu")


def test_planted_heads_score_above_099_and_rank_first(planted):
    short = [s for s in heads.corpus(60) + list(SENTENCES.values()) + [w for s in heads.corpus(60) for w in s.split(",")]
             if len(planted.tokenizer.encode(s).ids) <= planted.max_pieces]
    assert len(short) > 20
    found = heads.measure(planted, short + ["a sentence far longer than the thirty-two pieces this model reads " * 3],
                          probes=2)  # the long one is left out
    layer, head, score = found.top("previous", 1)[0]
    assert (layer, head) == (0, 1) and score >= 0.99
    layer, head, score = found.top("sink", 1)[0]
    assert (layer, head) == (0, 0) and score >= 0.99
    assert found.scores["previous"][0, 0] < 0.5 and found.scores["sink"][0, 1] < 0.5


def test_bad_input_gets_a_message(planted, tmp_path):
    with pytest.raises(heads.HeadsError, match="empty"):
        heads.measure(planted, ["", "   "])
    with pytest.raises(heads.HeadsError, match="two pieces"):
        heads.measure(planted, ["a"])  # one piece
    one_layer = models.load(one_layer_gpt2(tmp_path), "cpu")
    found = heads.measure(one_layer, ["the dog", "the cat sat"], probes=1)
    assert found.scores["previous"].shape == (1, 2)  # one layer is a model like any other
    assert all(np.isfinite(v).all() and (v >= 0).all() and (v <= 1 + 1e-6).all() for v in found.scores.values())
    assert "positional" not in heads.measure(one_layer, ["the dog"], probes=1).scores  # one sentence says nothing of it


def one_layer_gpt2(folder):
    import transformers as T

    config = T.GPT2Config(vocab_size=byte_level_tokenizer(folder), n_embd=16, n_layer=1, n_head=2, n_positions=64)
    T.GPT2LMHeadModel(config).save_pretrained(str(folder))
    return folder


# ---------------------------------------------------------------- the value-weighted view


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_moved_equals_alpha_times_the_norm_of_f_by_hand(family, tmp_path):
    model = models.load(build(family, tmp_path), "cpu")
    result = model.run(SENTENCES["dog"])
    layer = 1
    norms = heads.moved_norms(model, result, layer)  # (H, n)
    params = model.weights.layers[layer]
    x = result.traces[layer].x  # (n, d) what W_v multiplies
    dh = model.head_dim
    for h in range(model.heads):
        g = h // model.group
        w_v = params.w_value[:, g * dh: (g + 1) * dh]  # (d, dh)
        b_v = params.b_value[g * dh: (g + 1) * dh] if params.b_value is not None else 0
        w_o = params.w_out[h * dh: (h + 1) * dh]  # (dh, d)
        f = (x @ w_v + b_v) @ w_o  # (n, d)
        alpha = torch.from_numpy(result.weights[layer, h])  # (n, n)
        by_hand = torch.linalg.vector_norm(alpha[:, :, None] * f[None], dim=-1)  # (n, n) ‖α_ij f(x_j)‖
        assert np.allclose(heads.moved(result.weights[layer, h], norms[h]), by_hand.numpy(), rtol=1e-4, atol=1e-6)


def test_with_identity_values_and_output_each_head_moves_its_own_slice_of_x(tmp_path):
    """W_v = W_o = I and b_v = 0: f_h(x_j) is x_j's h-th slice of d_k dimensions, so ‖α_ij f_h(x_j)‖ is α_ij times
    that slice's norm."""
    model = models.load(build("bert", tmp_path), "cpu")
    params = model.weights.layers[0]
    d = model.d_model
    params.w_value, params.w_out = torch.eye(d), torch.eye(d)  # (d, d) each
    params.b_value = torch.zeros(d)
    result = model.run(SENTENCES["cat"])
    x = result.traces[0].x.numpy()  # (n, d)
    dh = model.head_dim
    for h in range(model.heads):
        slice_norms = np.linalg.norm(x[:, h * dh: (h + 1) * dh], axis=-1)  # (n,)
        norms = heads.moved_norms(model, result, 0)  # (H, n)
        np.testing.assert_allclose(norms[h], slice_norms, rtol=1e-5)
        np.testing.assert_allclose(heads.moved(result.weights[0, h], norms[h]), result.weights[0, h] * slice_norms,
                                   rtol=1e-5)


def test_equal_norms_make_the_two_shares_agree():
    rng = np.random.default_rng(2)
    weights = causal_random(rng, (3, 5, 5))  # (H, n, n)
    shares = heads.layer_shares(weights, np.ones((3, 5)))  # equal norms: the two shares agree
    assert np.allclose(shares.weight, shares.norm) and shares.weight.sum() == pytest.approx(1)


def test_the_sentence_names_the_key_that_takes_the_weight_and_moves_little():
    shares = heads.Shares(np.array([0.62, 0.2, 0.18]), np.array([0.04, 0.5, 0.46]))
    said = heads.disagreement(shares, ["<s>", "dog", "cat"], "layer 3")
    assert "'<s>' (piece 0) takes 62% of the weight and 4% of the norm" in said and "'dog' (50%)" in said


def test_an_encoder_decoder_is_not_measured_and_says_why(tmp_path):
    model = models.load(build("t5", tmp_path), "cpu")
    with pytest.raises(heads.HeadsError, match="encoder–decoder"):
        heads.measure(model, ["the dog"])


def test_transformers_models_say_why_moved_is_off(tmp_path):
    model = models.load(build("gptj", tmp_path), "cpu")
    with pytest.raises(heads.HeadsError, match="transformers"):
        heads.moved_norms(model, model.run("the dog"), 0)


# ---------------------------------------------------------------- a real model


@pytest.fixture(scope="module")
def smollm2():
    return models.load("smollm2", "cpu")


def test_probes_are_seeded_random_pieces_repeated_twice(smollm2):
    probes = heads.probes(smollm2, 3, 10)
    again = heads.probes(smollm2, 3, 10)
    for probe, same in zip(probes, again):
        ids = probe.repeated.ids[probe.lead:]
        assert ids[:10] == ids[10:20] == same.repeated.ids[same.lead:][:10]
        mixed = probe.shuffled.ids[probe.lead:]
        assert sorted(mixed[10:20]) == sorted(ids[:10]) and mixed[10:20] != ids[:10]


def test_smollm2_induction_head_follows_the_repeat_and_not_its_shuffle(smollm2):
    """The strongest induction head on the probe puts most of its weight on the piece after each piece's first copy;
    on the same pieces with the second copy shuffled, the same cells hold weight far under the threshold."""
    scores, control = heads.probe_scores(smollm2, 4, heads.PROBE_PIECES, heads.SEED)
    layer, head = np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape)
    threshold = 0.5
    assert scores["induction"][layer, head] > threshold
    assert control["repeat"][layer, head] > threshold > 4 * control["shuffled"][layer, head]
    assert control["shuffled"].max() < threshold  # no head finds the piece after the first copy once it is shuffled


# ---------------------------------------------------------------- on the pages


def test_the_lessons_copy_step_draws_the_induction_head_on_the_repeat(smollm2):
    """Step 16: the strongest induction head's weights on the sequence as the model computes them, the share of its
    weight on the piece after each first occurrence and the next-piece hits, recomputed here."""
    import json

    from streamlit.testing.v1 import AppTest

    from appkit.lesson.models import COPY_CUT, COPY_PIECES
    from page_support import lesson_computed
    from tests.test_decoder import z_of

    lesson_computed({"step": "16"})
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "lesson.py"), default_timeout=300)
    at.query_params["step"] = "16"
    at.run()
    assert not at.exception
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    title = figure["layout"]["title"]["text"]
    scores, _ = heads.probe_scores(smollm2, heads.PROBES, heads.PROBE_PIECES, heads.SEED)  # as heads.measure probes
    layer, head = np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape)
    assert title == (f"Layer {layer + 1}, head {head + 1}: the strongest induction head "
                     f"(score {scores['induction'][layer, head]:.2f})")  # the number the model pages and README give
    probe = heads.probes(smollm2, 1, COPY_PIECES, 1000)[0]
    ids = probe.repeated.ids[: len(probe.repeated) - COPY_CUT]
    result = smollm2.run_pieces(heads.pieces_of(smollm2.reader, ids, probe.repeated.special[: len(ids)]))
    weights = result.weights[layer, head]  # (n, n)
    np.testing.assert_allclose(z_of(figure["data"][0]["customdata"])[..., 0], weights, atol=1e-5)
    rows = [i for i in range(len(ids)) if any(ids[j - 1] == ids[i] for j in range(1, i + 1))]
    share = np.mean([sum(weights[i, j] for j in range(1, i + 1) if ids[j - 1] == ids[i]) for i in rows])
    predicted, _ = smollm2.logit_lens(result.hidden[-1:])  # (1, n, 1)
    start = probe.lead + COPY_PIECES
    hits = sum(int(predicted[0, i, 0]) == ids[i - COPY_PIECES + 1] for i in range(start, len(ids)))
    said = " ".join(m.value for m in at.markdown)
    assert f"{share:.0%} of this head's weight" in said and f"At {hits} of its {len(ids) - start} positions" in said
    assert share > 0.5 and hits > (len(ids) - start) / 3  # the head copies, and the model predicts the repeat


def test_the_decoder_page_lists_the_top_heads_and_colours_the_atlas_by_a_score(smollm2):
    import base64

    from appkit.served import head_types
    from tests.test_decoder import components, decoder_page

    heads.cached(smollm2)  # kept on disk by the model's content: the page reads them without measuring
    at, _ = decoder_page({"types": "1", "score": "sink", "bycolour": "1", "text": "the dog was"})
    assert not at.exception
    atlas = next(d for d in components(at) if "measure" in d)
    measured = head_types("smollm2")  # the cached measure the page drew (this process ran the page)
    # the thumbnails keep the heads' patterns; the score is each head's bar, from the measure the page drew
    assert atlas["score_bars"] and atlas["r"] == 3 and len(base64.b64decode(atlas["blocks"])) == 30 * 9 * 3 * 3
    np.testing.assert_allclose(np.reshape(atlas["measure"]["values"], (30, 9)), measured.scores["sink"], atol=5e-5)
    table = at.dataframe[0].value
    top = table[table["score"] == heads.SCORES["induction"]]
    assert [tuple(r) for r in top[["layer", "head"]].values] == [(l + 1, h + 1) for l, h, _ in measured.top("induction", 3)]
    # the sink heads are the heads whose weight on the first piece, averaged over the corpus, is the largest
    l, h, value = measured.top("sink", 1)[0]
    assert value > 0.95
