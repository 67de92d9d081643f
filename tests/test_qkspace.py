"""The query–key space: the alignment leaves every softmax row as it was, and the projection equals PCA written out."""

import numpy as np

from attnviz.qkspace import aligned, joint_space


def softmax_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    logits = q @ k.T  # (N, N)
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_the_alignment_keeps_every_softmax_row_and_matches_centres_and_lengths():
    rng = np.random.default_rng(0)
    query, key = rng.normal(1.5, 1, size=(12, 6)), rng.normal(-2, 3, size=(12, 6))  # (N, d): apart, of other lengths
    q, k, c = aligned(query, key)
    np.testing.assert_allclose(softmax_rows(q, k), softmax_rows(query, key), atol=1e-12)
    np.testing.assert_allclose(k.mean(0), q.mean(0), atol=1e-12)  # one centre
    assert c == np.sqrt(np.linalg.norm(key, axis=1).mean() / np.linalg.norm(query, axis=1).mean())
    np.testing.assert_allclose(q, query * c)


def test_the_projection_is_pca_of_queries_and_keys_together():
    """Against the SVD of the centred stack written out (each axis up to its sign), and the variance shares."""
    rng = np.random.default_rng(1)
    query, key = rng.normal(size=(9, 5)) * [3, 1, 0.5, 0.2, 0.1], rng.normal(size=(9, 5))  # (N, d) each
    space = joint_space(query, key)
    q, k, _ = aligned(query, key)
    stacked = np.concatenate([q, k])  # (2N, d)
    centred = stacked - stacked.mean(0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    expected = centred @ vt[:2].T  # (2N, 2)
    got = np.concatenate([space.queries, space.keys])  # (2N, 2)
    signs = np.sign((got * expected).sum(0))  # (2,) PCA may flip an axis
    np.testing.assert_allclose(got * signs, expected, atol=1e-9)
    np.testing.assert_allclose(space.explained, singular[:2] ** 2 / (singular**2).sum(), atol=1e-12)


def test_head_points_gather_each_runs_queries_and_keys_in_order():
    """The points of layer 2, head 4 over two texts: within each text, softmax(q·k/√d_h) of its points is the
    model's own weights, and a query's strongest keys are those of its row, pointed to in the joint list."""
    from attnviz import models
    from attnviz.qkspace import head_points

    minilm = models.load("minilm")
    runs = [minilm.run(text) for text in ("The cat sat on the mat.", "She gave him the book because he asked.")]
    points = head_points(runs, 2, 4)
    sizes = [len(run.pieces) for run in runs]
    assert points.query.shape == points.key.shape == (sum(sizes), 32) and len(points.names) == sum(sizes)
    for s, run in enumerate(runs):
        mine = points.which == s
        q, k = points.query[mine], points.key[mine]  # (n_s, d_h) each
        np.testing.assert_allclose(softmax_rows(q / np.sqrt(32), k), run.weights[2, 4], atol=1e-5)
        assert points.names[int(np.flatnonzero(mine)[0])] == run.pieces.labels()[0]
    chosen = sizes[0] + 3  # the second text's fourth piece
    row = runs[1].weights[2, 4, 3]
    assert points.strongest_keys(chosen) == [(sizes[0] + int(j), float(row[j])) for j in np.argsort(-row)[:3]]
