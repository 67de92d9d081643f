"""The long-context head census (attnviz.models.census) on synthetic heads built to be each class: a previous-piece head, a
local one, a streaming one (sinks and a window), a retrieval one (a distant key) and a dense one (uniform), their
queries and keys one-hot so that each weight is known. Each class's rule, each share and MInference's recalls against
the weights written out in float64 and the definitions applied to them; the KV cache's share; SmolLM2's census
against the needle lab's retrieval heads."""

import numpy as np
import pytest
import torch

from attnviz.models import census as heads_census
from attnviz.models import scan
from attnviz.models.engine import Architecture
from attnviz.models.pieces import Pieces

N = 700
SINKS, RECENT, BUDGET, LOCAL = 4, 64, 128, 8
RULES = heads_census.Rules(sinks=SINKS, recent=RECENT, budget=BUDGET, local_span=LOCAL)
FAR = 200  # the retrieval head's key
KINDS = ["previous", "local", "streaming", "retrieval", "dense"]


def synthetic_queries() -> torch.Tensor:
    """(5, N, N) queries against one-hot keys (key j = e_j): query i's score of key j is its j-th entry."""
    q = torch.zeros(len(KINDS), N, N, dtype=torch.float64)
    for i in range(N):
        q[0, i, max(i - 1, 0)] = 30.0  # the piece before
        q[1, i, max(0, i - LOCAL + 1): i + 1] = 30.0  # the LOCAL pieces up to it
        q[2, i, :SINKS] = 30.0  # the sinks and the recent window
        q[2, i, max(0, i - RECENT + 1): i + 1] = 30.0
        if i >= FAR:
            q[3, i, FAR] = 30.0  # one distant key
    return q  # head 4: zeros, every key alike


@pytest.fixture(scope="module")
def synthetic():
    """(a Scan of the five heads, their weights (5, N, N) written out in float64)."""
    heads = len(KINDS)
    arch = Architecture(family="llama", kind="decoder", layers=1, heads=heads, kv_heads=heads, head_dim=N,
                        d_model=N, vocab=10, max_positions=N, norm="rms", post_norm=False, positions="rotary",
                        activation="silu", gated=True)
    query = synthetic_queries().float()  # (H, N, dh): the scan's queries come scaled by 1/√dh already
    key = torch.eye(N).expand(heads, N, N).contiguous()  # (KV, N, dh)
    value = torch.zeros(heads, N, N)
    summaries = scan.Summaries(heads, N, 128, 8)
    _, normalisers = scan.attend_blocks(arch, 0, query, key, value, torch.arange(N), 128, summaries=summaries)
    summaries.on_host().numpy()
    pieces = Pieces(["x"] * N, [1] * N, list(range(N)), [(0, 0)] * N, "x" * N, [False] * N, [False] * N, ["x"] * N)
    found = scan.Scan("synthetic", pieces, 128, summaries.overview[None], summaries.sink[None], summaries.entropy[None],
                      summaries.strongest_keys[None], summaries.strongest_weights[None], None, arch, [query], [key],
                      normalisers.numpy()[None], None, summaries.verticals[None], summaries.slashes[None])
    scores = synthetic_queries()  # (H, N, N)
    scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    return found, torch.softmax(scores, -1).numpy()


def written_out(weights: np.ndarray) -> dict[str, np.ndarray]:
    """Each share of the census's definition, from the weights (H, N, N) cell by cell."""
    i, j = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    d = i - j
    long_from = max(SINKS + RECENT, BUDGET)
    rows = slice(long_from, N)
    long_mass = weights[:, rows].sum((1, 2))
    out = {"sink": weights[:, rows, :SINKS].sum((1, 2)) / long_mass,
           "recent": (weights * ((d >= 0) & (d < RECENT)))[:, rows].sum((1, 2)) / long_mass,
           "previous": (weights * (d == 1))[:, 1:].sum((1, 2)) / (N - 1),
           "local": (weights * ((d >= 0) & (d < LOCAL))).sum((1, 2)) / N}
    out["distant"] = 1 - out["sink"] - out["recent"]
    # MInference's patterns at BUDGET keys a query, over the rows past it
    a_shape = (j < SINKS) | ((d >= 0) & (d < BUDGET - SINKS))
    out["a_shape"] = (weights * a_shape)[:, rows].sum((1, 2)) / long_mass
    vs, bs = [], []
    for h in range(len(KINDS)):
        w = weights[h, rows]  # (R, N)
        di = d[rows]
        by_key = w.sum(0)
        by_offset = np.array([w[di == e].sum() for e in range(N)])
        ranked = [np.argsort(-np.round(x / x.max(), 5), kind="stable") for x in (by_key, by_offset)]  # equals: lowest first
        keys, offsets = ranked[0][: BUDGET // 4], ranked[1][: BUDGET - BUDGET // 4]
        kept = np.isin(j[rows], keys) | np.isin(di, offsets)
        vs.append((w * kept).sum() / w.sum())
        blocks = [w[a * 128 - long_from:(a + 1) * 128 - long_from] for a in range(1, -(-N // 128))]
        by_block = [np.array([b[:, c * 128:(c + 1) * 128].sum() for c in range(-(-N // 128))]) for b in blocks]
        bs.append(sum(np.sort(x)[::-1][: BUDGET // 128].sum() for x in by_block) / sum(x.sum() for x in by_block))
    out["vertical_slash"], out["block_sparse"] = np.array(vs), np.array(bs)
    return out


def test_each_synthetic_head_falls_in_its_class_and_each_share_is_the_written_out_one(synthetic):
    found, weights = synthetic
    c = heads_census.census(found, RULES)
    assert [heads_census.CLASSES[k] for k in c.classify()[0]] == KINDS
    want = written_out(weights)
    for name in ("sink", "recent", "distant", "previous", "local"):
        np.testing.assert_allclose(getattr(c, name)[0], want[name], atol=2e-5, err_msg=name)
    for name in heads_census.PATTERNS:
        np.testing.assert_allclose(c.recalls[name][0], want[name], atol=2e-5, err_msg=name)
    # the streaming head is an A-shape; the retrieval head a vertical line (its rows before the far key spread evenly)
    assert c.recalls["a_shape"][0, 2] > 0.999 and c.recalls["vertical_slash"][0, 3] > 0.95
    assert [heads_census.PATTERNS[k] for k in c.best_pattern[0, 2:4]] == ["a_shape", "vertical_slash"]


def test_a_threshold_moves_a_head_between_classes_and_the_sentence_counts_them(synthetic):
    found, _ = synthetic
    told = []
    c = heads_census.census(found, RULES, progress=lambda done, total: told.append((done, total)))
    assert told == [(1, 1)]  # a layer at a time
    assert c.counts() == {name: 1 for name in heads_census.CLASSES}
    stricter = heads_census.with_rules(c, previous=1.01, local=1.01)  # no head reaches them: those two fall through
    classes = [heads_census.CLASSES[k] for k in stricter.classify()[0]]
    assert classes[0] in ("streaming", "retrieval", "dense") and classes[1] in ("streaming", "dense")
    said = c.sentence()
    assert "1 previous-piece, 1 local, 1 streaming, 1 retrieval, 1 dense" in said
    # previous keeps 2 entries, local 8, streaming 4 + 64, the other two all 700; one key/value head per query head
    share = (2 + LOCAL + SINKS + RECENT + 2 * N) / (5 * N)
    assert f"{share:.0%} of its full size" in said and c.cache_share() == pytest.approx(share)


def test_a_census_kept_on_disk_reads_back_whole_and_a_stale_or_broken_file_is_none(synthetic, tmp_path):
    scan_of, _ = synthetic
    found = heads_census.census(scan_of, RULES, wu=np.array([[0.0, 0.05, 0.0, 0.9, 0.0]]))
    path = tmp_path / "kept" / "census.npz"
    heads_census.save(found, path)
    back = heads_census.load(path)
    for name in ("sink", "recent", "distant", "previous", "local", "entropy", "wu"):
        assert np.array_equal(getattr(back, name), getattr(found, name)), name
    assert set(back.recalls) == set(found.recalls) and all(np.array_equal(back.recalls[p], found.recalls[p])
                                                           for p in found.recalls)
    assert (back.n, back.long_from, back.kv_group, back.rules) == (found.n, found.long_from, found.kv_group, RULES)
    assert np.array_equal(back.classify(), found.classify()) and back.sentence() == found.sentence()
    stale = tmp_path / "stale.npz"
    np.savez(stale, meta=np.array('{"format": 0}'))
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    assert heads_census.load(stale) is None and heads_census.load(tmp_path / "broken.npz") is None
    assert heads_census.load(tmp_path / "missing.npz") is None


def test_a_scan_without_lines_is_told_to_scan_again(synthetic):
    import dataclasses

    found, _ = synthetic
    with pytest.raises(ValueError, match="scan the text again"):
        heads_census.census(dataclasses.replace(found, verticals=None))


@pytest.fixture(scope="module")
def smollm2_haystack():
    """SmolLM2's scan of a 2,000-piece pass-key document and the needle lab's retrieval scores on it (Wu et al.: the
    share of the needle's copied pieces each head looked straight at while the model wrote the key)."""
    from attnviz import models, needle

    try:
        model = models.load("smollm2")
    except (models.ModelError, ImportError, FileNotFoundError) as error:
        pytest.skip(f"the built-in decoder is not installed: {error}")
    stack = needle.haystack(model, 2000, 0.5, "48213")
    written = needle.write(model, stack.pieces, len(model.reader(" 48213.", limit=10**6)) + 2)
    events, copied = needle.retrievals(stack.pieces.ids, stack.needle, written.ids, written.rows)
    assert "48213" in written.text
    return model.scan(stack.pieces.text), events / max(copied, 1)


def test_smollm2s_retrieval_heads_by_the_needle_lab_are_retrieval_heads_by_their_distant_weight(smollm2_haystack):
    """The two definitions on one document: of the heads that looked straight at what they copied for at least half
    of the needle's pieces (Wu et al.), most need weight beyond the sinks and the window over the whole document
    (DuoAttention's view), far more often than heads do at large. Where they part: a head can retrieve the needle from
    the question's rows yet read the filler within its window (it is streaming over the document)."""
    found, wu = smollm2_haystack
    c = heads_census.census(found)  # by the document alone, without the lab's scores
    retrieving = c.classify() == heads_census.CLASSES.index("retrieval")
    lab = wu >= 0.5
    assert lab.sum() >= 4
    assert retrieving[lab].sum() >= lab.sum() / 2  # most of them
    assert retrieving[lab].mean() >= 2.5 * retrieving.mean()  # far more often than heads at large (3.1× here)
    with_lab = heads_census.census(found, wu=wu)  # the lab's score joins the rule: each of them is retrieval
    assert (with_lab.classify()[lab] == heads_census.CLASSES.index("retrieval")).all()
    assert with_lab.cache_share() > c.cache_share() - 1e-12  # more heads keep the whole cache
