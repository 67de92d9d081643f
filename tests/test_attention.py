import math

import pytest
import torch
import torch.nn.functional as F

from attnviz import functional as attention
from attnviz.functional import (
    Scorer, additive, attend, causal_mask, entropy, general, key_mask, make_projections, make_scorer, multi_head, xavier,
)

torch.manual_seed(0)


def qkv(b=2, tq=5, tk=7, d=8, dv=3, dtype=torch.float64):
    return torch.randn(b, tq, d, dtype=dtype), torch.randn(b, tk, d, dtype=dtype), torch.randn(b, tk, dv, dtype=dtype)


def written_out(q, k, v):
    """softmax(QKᵀ/√d)V one entry at a time, straight from the notes' α_ij formula."""
    d = q.shape[-1]
    out = torch.zeros(q.shape[0], v.shape[-1], dtype=q.dtype)
    alpha = torch.zeros(q.shape[0], k.shape[0], dtype=q.dtype)
    for i in range(q.shape[0]):
        e = [math.exp(float(q[i] @ k[j]) / math.sqrt(d)) for j in range(k.shape[0])]
        for j in range(k.shape[0]):
            alpha[i, j] = e[j] / sum(e)
            out[i] += alpha[i, j] * v[j]
    return alpha, out


def test_matches_written_out_formula():
    q, k, v = qkv(b=1)
    result = attend(q[0], k[0], v[0])
    alpha, out = written_out(q[0], k[0], v[0])
    torch.testing.assert_close(result.weights, alpha)
    torch.testing.assert_close(result.output, out)
    torch.testing.assert_close(result.scores, q[0] @ k[0].T / math.sqrt(8))


@pytest.mark.parametrize("case", ["plain", "bool_mask", "causal", "causal_rect", "mask_and_causal"])
def test_matches_sdpa(case):
    q, k, v = qkv(tq=6, tk=6 if case != "causal_rect" else 9)
    mask = None
    if case in ("bool_mask", "mask_and_causal"):
        mask = torch.rand(2, 6, 6) > 0.3
        mask[..., 0] = True  # keep every row attendable: SDPA gives NaN on fully masked rows
    is_causal = case.startswith("causal") or case == "mask_and_causal"
    ours = attend(q, k, v, mask=mask, is_causal=is_causal and mask is None)
    if case == "mask_and_causal":
        ours = attend(q, k, v, mask=mask, is_causal=True)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask & causal_mask(6, 6))
    else:
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    torch.testing.assert_close(ours.output, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["plain", "temperature", "mask", "causal", "fully_masked_row", "hard", "hard_masked"])
def test_without_scores_gives_the_same_weights_and_output(case, dtype):
    q, k, v = qkv(tq=6, tk=9, dtype=dtype)
    mask = torch.rand(2, 6, 9) > 0.4 if "mask" in case else None
    if case == "fully_masked_row":
        mask = torch.ones(6, 9, dtype=torch.bool)
        mask[3] = False
    kwargs = dict(mask=mask, is_causal=case == "causal", temperature=0.5 if case == "temperature" else 1.0,
                  hard=case.startswith("hard"))
    full = attend(q, k, v, **kwargs)
    lean = attend(q, k, v, need_scores=False, **kwargs)
    assert lean.scores is None
    torch.testing.assert_close(lean.weights, full.weights)
    torch.testing.assert_close(lean.output, full.output)
    if case in ("plain", "temperature", "causal"):  # independent check: SDPA's output, and softmax written out
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=case == "causal", scale=1 / math.sqrt(8) / kwargs["temperature"])
        torch.testing.assert_close(lean.output, expected)
    if case == "plain":
        logits = q @ k.transpose(-2, -1) / math.sqrt(8)
        torch.testing.assert_close(lean.weights, logits.exp() / logits.exp().sum(-1, keepdim=True))


@pytest.mark.parametrize("masked", [False, True])
def test_without_scores_handles_a_scorer_that_returns_a_strided_view(masked):
    q, k, v = qkv(dtype=torch.float32)
    transposed = Scorer("dot_transposed", "", lambda q, k: (k @ q.transpose(-2, -1)).transpose(-2, -1))  # not contiguous
    mask = torch.rand(2, 5, 7) > 0.4 if masked else None
    lean = attend(q, k, v, scoring=transposed, need_scores=False, mask=mask, temperature=0.5)
    full = attend(q, k, v, scoring="dot", mask=mask, temperature=0.5)
    torch.testing.assert_close(lean.weights, full.weights)
    torch.testing.assert_close(lean.output, full.output)


def test_gradients_flow_through_attend():
    q, k, v = (t.requires_grad_() for t in qkv())
    mask = torch.rand(2, 5, 7) > 0.3
    mask[..., 0] = True
    for kwargs in (dict(), dict(mask=mask, temperature=0.7), dict(is_causal=True, need_scores=False)):
        ours = attend(q, k, v, **kwargs).output.sum()
        expected = F.scaled_dot_product_attention(
            q, k, v, attn_mask=kwargs.get("mask"), is_causal=kwargs.get("is_causal", False),
            scale=1 / math.sqrt(8) / kwargs.get("temperature", 1.0)).sum()
        grads = torch.autograd.grad(ours, (q, k, v))
        for got, want in zip(grads, torch.autograd.grad(expected, (q, k, v))):
            torch.testing.assert_close(got, want)


def test_rows_sum_to_one_and_masked_weights_are_zero():
    q, k, v = qkv()
    mask = key_mask(7, [1, 4])
    result = attend(q, k, v, mask=mask, is_causal=True)
    torch.testing.assert_close(result.weights.sum(-1), torch.ones(2, 5, dtype=torch.float64))
    assert (result.weights[..., [1, 4]] == 0).all()
    assert (result.weights.triu(1) == 0).all()


def test_hard_picks_argmax_and_ties_go_left():
    q, k, v = qkv()
    result = attend(q, k, v, hard=True)
    expected = F.one_hot(result.scores.argmax(-1), 7).double()
    torch.testing.assert_close(result.weights, expected)
    torch.testing.assert_close(result.output, torch.gather(v, 1, result.scores.argmax(-1, keepdim=True).expand(-1, -1, 3)))
    # Two identical keys tie exactly: the first one wins.
    key = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    tie = attend(torch.tensor([[1.0, 0.0]]), key, torch.eye(3), hard=True)
    assert tie.weights.tolist() == [[0.0, 1.0, 0.0]]


def test_low_temperature_approaches_hard():
    q, k, v = qkv()
    hard = attend(q, k, v, hard=True).weights
    taus = (1.0, 0.1, 0.01, 0.001)
    gaps = [(attend(q, k, v, temperature=t).weights - hard).abs().max().item() for t in taus]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] > 0.01
    # A row's gap to the one-hot is at most Σ_{j≠best} exp(−(s_best − s_j)/τ): the bound written out, which a near tie
    # of random scores (unseeded, they come from whatever ran before) makes loose but never breaks.
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, tq, tk)
    below = scores.max(-1, keepdim=True).values - scores  # (b, tq, tk) ≥ 0, 0 at the best key
    for tau, gap in zip(taus, gaps):
        bound = (torch.exp(-below / tau).sum(-1) - 1).max().item()  # the best key's own term is 1
        assert gap <= bound + 1e-12


def test_temperature_divides_scores():
    q, k, v = qkv()
    torch.testing.assert_close(attend(q, k, v, temperature=2.0).weights, torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8) / 2.0, -1))


def test_fully_masked_rows_give_zero_not_nan():
    q, k, v = qkv()
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False
    for hard in (False, True):
        result = attend(q, k, v, mask=mask, hard=hard)
        assert not result.weights.isnan().any() and not result.output.isnan().any()
        assert (result.weights[:, 2] == 0).all() and (result.output[:, 2] == 0).all()
        torch.testing.assert_close(result.weights[:, 3].sum(-1), torch.ones(2, dtype=torch.float64))


def test_scoring_formulas():
    q, k, _ = qkv(b=1)
    q, k = q[0], k[0]
    torch.testing.assert_close(make_scorer("dot", 8, 8)(q, k), q @ k.T)
    cos = torch.stack([F.cosine_similarity(q[i : i + 1], k) for i in range(5)])
    torch.testing.assert_close(make_scorer("cosine", 8, 8)(q, k), cos)
    expected = torch.tensor([[-float(((q[i] - k[j]) ** 2).sum()) / (2 * 1.5**2) for j in range(7)] for i in range(5)], dtype=q.dtype)
    torch.testing.assert_close(make_scorer("gaussian", 8, 8, sigma=1.5)(q, k), expected)


def test_general_and_additive_work_with_different_sizes():
    q, k, v = torch.randn(4, 3, dtype=torch.float64), torch.randn(6, 5, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    m = torch.randn(3, 5, dtype=torch.float64)
    bilinear = attend(q, k, v, scoring=general(m))
    torch.testing.assert_close(bilinear.scores, torch.tensor([[float(q[i] @ m @ k[j]) for j in range(6)] for i in range(4)], dtype=q.dtype))
    wq, wk, w = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, 5, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    mlp = attend(q, k, v, scoring=additive(wq, wk, w))
    expected = torch.tensor([[float(w @ torch.tanh(wq @ q[i] + wk @ k[j])) for j in range(6)] for i in range(4)], dtype=q.dtype)
    torch.testing.assert_close(mlp.scores, expected)
    assert attend(q, k, v, scoring="general").weights.shape == (4, 6)
    assert attend(q, k, v, scoring="additive").weights.shape == (4, 6)
    with pytest.raises(ValueError, match="general"):
        attend(q, k, v, scoring="dot")


def test_bad_arguments_say_what_to_change():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="temperature"):
        attend(q, k, v, temperature=0)
    with pytest.raises(ValueError, match="Unknown scoring"):
        attend(q, k, v, scoring="nope")


def test_entropy_bounds():
    uniform = torch.full((1, 4), 0.25)
    onehot = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    torch.testing.assert_close(entropy(uniform), torch.tensor([math.log(4)]))
    torch.testing.assert_close(entropy(onehot), torch.tensor([0.0]))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_matches_nn_multihead_attention(bias, causal):
    embed_dim, heads, batch, tq, tk = 12, 3, 2, 5, 6
    mha = torch.nn.MultiheadAttention(embed_dim, heads, bias=bias, batch_first=True, dtype=torch.float64)
    x_q = torch.randn(batch, tq, embed_dim, dtype=torch.float64)
    x_kv = torch.randn(batch, tk, embed_dim, dtype=torch.float64)
    w = mha.in_proj_weight.detach()  # (3E, E); nn.Linear computes x @ Wᵀ, our W is (d_model, d_k)
    b = mha.in_proj_bias.detach() if bias else torch.zeros(3 * embed_dim, dtype=torch.float64)
    proj = make_projections(embed_dim, mode="random", d_k=embed_dim // heads, heads=heads, bias=bias)
    proj.w_query, proj.w_key, proj.w_value = (w[i * embed_dim : (i + 1) * embed_dim].T for i in range(3))
    proj.w_out = mha.out_proj.weight.detach().T
    if bias:
        proj.b_query, proj.b_key, proj.b_value = (b[i * embed_dim : (i + 1) * embed_dim] for i in range(3))
        proj.b_out = mha.out_proj.bias.detach()
    allowed = causal_mask(tq, tk) if causal else None
    ours = multi_head(x_q, x_kv, proj, mask=allowed)
    # nn.MultiheadAttention's boolean attn_mask has the opposite sense: True = blocked.
    expected, expected_weights = mha(x_q, x_kv, x_kv, attn_mask=None if allowed is None else ~allowed, average_attn_weights=False)
    torch.testing.assert_close(ours.output, expected)
    torch.testing.assert_close(ours.attention.weights, expected_weights)
    assert ours.attention.weights.shape == (batch, heads, tq, tk)


def test_identity_projections_refuse_several_heads():
    with pytest.raises(ValueError, match="random projections"):
        make_projections(50, mode="identity", heads=2)


def test_projections_are_seeded_and_use_notes_shapes():
    a = make_projections(50, mode="random", d_k=8, heads=2, seed=3, bias=True)
    b = make_projections(50, mode="random", d_k=8, heads=2, seed=3, bias=True)
    c = make_projections(50, mode="random", d_k=8, heads=2, seed=4, bias=True)
    assert a.w_query.shape == (50, 16) and a.b_query.shape == (16,) and a.w_out.shape == (16, 50)
    assert torch.equal(a.w_query, b.w_query) and not torch.equal(a.w_query, c.w_query)
    x = torch.randn(4, 50)
    r = multi_head(x, x, a)
    torch.testing.assert_close(r.query[0], (x @ a.w_query + a.b_query)[:, :8])


@pytest.mark.parametrize("name", ["gaussian", "additive"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_pairwise_scorers_in_row_blocks_equal_the_formula(monkeypatch, name, batch):
    generator = torch.Generator().manual_seed(4)
    query = torch.randn(*batch, 37, 6, generator=generator)  # (..., Tq, d)
    key = torch.randn(*batch, 29, 6, generator=generator)  # (..., Tk, d)
    scorer = make_scorer(name, 6, 6, seed=2, hidden=5, sigma=0.7)
    if name == "gaussian":
        expected = -((query[..., :, None, :] - key[..., None, :, :]) ** 2).sum(-1) / (2 * 0.7**2)  # (..., Tq, Tk)
    else:
        generator = torch.Generator().manual_seed(2)
        w_query = xavier(5, 6, generator)  # (h, dq): make_scorer draws W_q, W_k, w in this order
        w_key = xavier(5, 6, generator)  # (h, dk)
        w = xavier(5, 1, generator)[:, 0]  # (h,)
        expected = torch.tanh((query @ w_query.T)[..., :, None, :] + (key @ w_key.T)[..., None, :, :]) @ w  # (..., Tq, Tk)
    whole = scorer(query, key)
    monkeypatch.setattr(attention, "PAIRWISE_BLOCK_BYTES", 1)  # one query row per block
    one_row = scorer(query, key)
    monkeypatch.setattr(attention, "PAIRWISE_BLOCK_BYTES", 7 * 29 * 6 * 4 * max(1, math.prod(batch)))  # 7 rows, ragged end
    seven_rows = scorer(query, key)
    for scores in (whole, one_row, seven_rows):
        torch.testing.assert_close(scores, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(one_row, whole, rtol=0, atol=1e-6)


def test_row_blocks_bound_the_intermediate(monkeypatch):
    calls = []
    monkeypatch.setattr(attention, "PAIRWISE_BLOCK_BYTES", 10 * 50 * 8 * 4)

    def pairwise(q_rows, key):
        calls.append(q_rows.shape[-2])
        return q_rows @ key.T

    attention.by_query_rows(torch.ones(95, 8), torch.ones(50, 8), 8, pairwise)
    assert calls == [10] * 9 + [5]


def test_small_work_runs_on_one_cpu_thread_and_puts_the_count_back(monkeypatch):
    from attnviz import functional as attention

    configured = torch.get_num_threads()
    monkeypatch.setattr(attention, "_THREADS", 2)
    torch.set_num_threads(2)
    seen = {}
    with attention.cpu_threads(attention.SMALL_WORK_TOKENS - 1, torch.device("cpu")):
        seen["small"] = torch.get_num_threads()
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)  # left at one by someone else: large work still gets the configured count
    with attention.cpu_threads(attention.SMALL_WORK_TOKENS, torch.device("cpu")):
        seen["large"] = torch.get_num_threads()
    assert torch.get_num_threads() == 1
    torch.set_num_threads(configured)
    assert seen == {"small": 1, "large": 2}



@pytest.mark.parametrize("name", attention.SCORING_NAMES)
def test_a_score_taken_apart_sums_to_the_engines_score(name):
    """The neuron view's terms, one per dimension (or hidden unit), sum to the score the scorer gives (≤ 1e-5), and
    each row is what its name says, written out."""
    d_q, d_k = (6, 9) if name in ("general", "additive") else (8, 8)
    generator = torch.Generator().manual_seed(4)
    query, key = torch.randn(5, d_q, generator=generator), torch.randn(7, d_k, generator=generator)  # (5, dq), (7, dk)
    scorer = make_scorer(name, d_q, d_k, seed=2, hidden=12, sigma=0.7)
    scores = scorer(query, key)  # (5, 7)
    for i, j in [(0, 0), (2, 5), (4, 6)]:
        parts = scorer.parts(query[i], key[j])
        assert abs(parts.score - float(scores[i, j])) <= 1e-5 * max(1.0, abs(float(scores[i, j]))), (name, i, j)
        rows = dict(parts.rows)
        if name in ("dot", "scaled_dot", "cosine", "gaussian"):
            torch.testing.assert_close(rows["q"], query[i])
            torch.testing.assert_close(rows["k"], key[j])
        if name == "scaled_dot":
            torch.testing.assert_close(parts.terms, query[i] * key[j] / math.sqrt(d_q))
        if name == "gaussian":
            torch.testing.assert_close(parts.terms, -(query[i] - key[j]) ** 2 / (2 * 0.7**2))
    assert len(parts.terms) == (12 if name == "additive" else d_k) and parts.unit.startswith("hidden" if name == "additive" else "dimension")


def test_cosine_of_a_zero_vector_takes_apart_to_zero():
    parts = make_scorer("cosine", 4, 4).parts(torch.zeros(4), torch.ones(4))
    assert parts.score == 0 and not torch.isnan(parts.terms).any()
