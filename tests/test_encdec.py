import numpy as np
import pytest
import torch

from attnviz.functional import attend, make_projections, multi_head
from attnviz.encdec import alignment, bmm_items, decoder_mask, encoder_decoder, layer_stack, pad_batch, padding_mask, rollout
from attnviz.figures import FADED, HEAD_COLOURS, line_view

torch.manual_seed(0)


def batch(lengths, d=6):
    return pad_batch([np.random.default_rng(n).normal(size=(n, d)).astype(np.float32) for n in lengths])


def test_masks_have_the_notes_shapes():
    x_in, valid_in = batch([5, 3])
    x_out, valid_out = batch([4, 2])
    views = encoder_decoder(x_in, valid_in, x_out, valid_out)
    assert views.encoder_mask.shape == (2, 1, 5, 5)
    assert views.decoder_mask.shape == (2, 1, 4, 4)
    assert views.cross_mask.shape == (2, 1, 4, 5) and views.cross.shape == (2, 1, 4, 5)


def test_causal_weights_above_the_diagonal_are_zero():
    x_out, valid_out = batch([6])
    views = encoder_decoder(*batch([4]), x_out, valid_out)
    assert torch.all(views.decoder[0, 0].triu(1) == 0)
    assert torch.all(decoder_mask(valid_out)[0, 0] == torch.ones(6, 6, dtype=torch.bool).tril())


def test_padding_keys_get_zero_weight():
    x, valid = batch([5, 2, 3])
    result = attend(x, x, x, mask=padding_mask(valid, valid)[:, 0])
    for b, n in enumerate([5, 2, 3]):
        assert torch.all(result.weights[b, :, n:] == 0)
        torch.testing.assert_close(result.weights[b, :n].sum(-1), torch.ones(n))
    assert valid.tolist()[1] == [True, True, False, False, False]


def test_cross_attention_rows_sum_to_one_and_ignore_source_padding():
    x_in, valid_in = batch([5, 3])
    x_out, valid_out = batch([4, 4])
    views = encoder_decoder(x_in, valid_in, x_out, valid_out)
    torch.testing.assert_close(views.cross.sum(-1), torch.ones(2, 1, 4))
    assert torch.all(views.cross[1, 0, :, 3:] == 0)


def test_bmm_walkthrough_equals_torch_bmm():
    q, k = torch.randn(3, 4, 5), torch.randn(3, 5, 2)
    torch.testing.assert_close(torch.stack(bmm_items(q, k)), torch.bmm(q, k))


def test_rollout_equals_the_written_out_product():
    a = [torch.softmax(torch.randn(4, 4, dtype=torch.float64), -1) for _ in range(3)]
    eye = torch.eye(4, dtype=torch.float64)
    mixed = [0.5 * m + 0.5 * eye for m in a]
    torch.testing.assert_close(rollout(a), mixed[2] @ mixed[1] @ mixed[0])
    torch.testing.assert_close(rollout(a).sum(-1), torch.ones(4, dtype=torch.float64))


def test_one_layer_rollout_is_half_attention_plus_half_identity():
    x = torch.randn(5, 8)
    weights = layer_stack(x, 1)
    torch.testing.assert_close(rollout(weights), 0.5 * weights[0] + 0.5 * torch.eye(5))
    torch.testing.assert_close(weights[0], attend(x, x, x).weights)


def test_layer_stack_applies_residual_and_layer_norm():
    x = torch.randn(5, 8)
    first_layer = make_projections(8, mode="random", d_k=8, seed=1)
    second_layer = make_projections(8, mode="random", d_k=8, seed=2)
    h = torch.nn.functional.layer_norm(x + multi_head(x, x, first_layer).output, (8,))  # (5, 8)
    _, second = layer_stack(x, 2, mode="random", seed=1)
    torch.testing.assert_close(second, multi_head(h, h, second_layer).attention.weights[0])


def test_alignment_top_k_and_entropy():
    rows = alignment(np.array([[0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3]]), ["a", "b", "a"], k=2)
    assert rows[0]["top"] == [(0, "a", 0.7), (1, "b", 0.2)]
    assert [j for j, _, _ in rows[1]["top"]] == [0, 1]  # ties: the earlier position
    assert rows[1]["entropy"] == pytest.approx(np.log(3))


def test_line_view_colours_heads_distinctly_and_isolates_a_query():
    w = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 5))  # (H, n, n)
    fig = line_view(w, ["a", "b", "c", "d", "e"])
    colours = {t.line.color for t in fig.data if t.mode == "lines"}
    assert colours == set(HEAD_COLOURS[:3])
    alone = line_view(w, ["a", "b", "c", "d", "e"], query=2)
    lines = [t for t in alone.data if t.mode == "lines" and t.showlegend is False]
    assert {y for t in lines if t.name != FADED for y in t.y[0::3]} == {2}  # its lines stand out
    assert {y for t in lines if t.name == FADED for y in t.y[0::3]} == {0, 1, 3, 4}  # the others fade
    assert max(t.opacity for t in lines if t.name == FADED) <= 0.12 < max(t.opacity for t in lines if t.name != FADED)
    with pytest.raises(ValueError, match="distinct"):
        line_view(np.ones((9, 2, 2)) / 2, ["a", "b"])
