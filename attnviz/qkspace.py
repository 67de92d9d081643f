"""The query–key space of one head (after AttentionViz, Yeh et al. 2023): every query and every key of a few
sentences in one 2-D picture, placed so that a query lies near the keys it attends to.

Two changes leave every softmax row as it was, and are what AttentionViz uses to make distance follow attention:
- queries and keys are scaled by c and 1/c so their mean lengths match: q·k is unchanged;
- then the keys are translated so their centre is the queries' centre: k' = k − k̄ + q̄ adds q·(q̄ − k̄) to every
  score of query q's row, the same for all its keys.
Then PCA (scikit-learn) projects queries and keys together onto the two directions of largest variance. PCA rather
than t-SNE or UMAP: it is linear and deterministic, so the same sentence always gives the same picture, a new point
does not move the others, it takes milliseconds on a few hundred points, and its axes are directions of q/k space
(explained variance is reported); t-SNE and UMAP keep neighbourhoods better but distort distances, and need a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SENTENCES = (  # the built-in set drawn beside the user's own text: ~60 pieces
    "The cat sat on the mat.",
    "She gave him the book because he asked for it.",
    "A bird in the hand is worth two in the bush.",
    "The quick brown fox jumps over the lazy dog.",
    "When the rain stopped, the children ran outside to play.",
)


@dataclass
class Space:
    queries: np.ndarray  # (N, 2) every sentence's queries, in order
    keys: np.ndarray  # (N, 2)
    explained: np.ndarray  # (2,) the share of the variance each axis holds
    scale: float  # c: queries × c, keys ÷ c


def aligned(query: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(query · c, key / c − mean + the queries' mean, c) for queries and keys (N, d): scaled so their mean lengths
    match, then the keys' centre moved onto the queries'. Each query's softmax over its own sentence's keys is
    unchanged: the scaling keeps every q·k, the translation adds the same number to every score of a row."""
    query, key = np.asarray(query, np.float64), np.asarray(key, np.float64)  # (N, d) each
    length_q, length_k = np.linalg.norm(query, axis=1).mean(), np.linalg.norm(key, axis=1).mean()
    c = float(np.sqrt(length_k / length_q)) if length_q > 0 and length_k > 0 else 1.0
    scaled_q, scaled_k = query * c, key / c  # (N, d) each
    return scaled_q, scaled_k - scaled_k.mean(0) + scaled_q.mean(0), c


def joint_space(query: np.ndarray, key: np.ndarray) -> Space:
    """Queries and keys (N, d) of one head, aligned, then projected together by PCA onto 2 axes."""
    from sklearn.decomposition import PCA  # imported here: only the open view needs it

    q, k, c = aligned(query, key)  # (N, d) each
    pca = PCA(n_components=2, svd_solver="full").fit(np.concatenate([q, k]))  # fitted on the 2N points
    return Space(pca.transform(q), pca.transform(k), pca.explained_variance_ratio_, c)


@dataclass
class Points:
    """One head's queries and keys over several runs, in one list: each run's pieces in order."""

    query: np.ndarray  # (N, d_h)
    key: np.ndarray  # (N, d_h)
    names: list[str]  # each point's piece
    which: np.ndarray  # (N,) the run it comes from
    where: np.ndarray  # (N,) its position in that run
    weights: list[np.ndarray]  # each run's (n_s, n_s) weights of the head

    def strongest_keys(self, chosen: int, top: int = 3) -> list[tuple[int, float]]:
        """The `top` keys query point `chosen` weighs most in its own run, as (point, weight), strongest first."""
        s, i = int(self.which[chosen]), int(self.where[chosen])
        row = self.weights[s][i]  # (n_s,) the model's own weights
        start = int(np.flatnonzero(self.which == s)[0])
        return [(start + int(j), float(row[j])) for j in np.argsort(-row, kind="stable")[:top]]


def head_points(runs: list, layer: int, head: int) -> Points:
    """Layer `layer`'s head `head` (both from 0) over `runs` (attnviz.models.Run, of a model attnviz's engine
    computes: their traces hold the queries and keys)."""
    qkv = [run.traces[layer].head(run.architecture, head) for run in runs]  # (query, key, value) of each run
    return Points(
        query=np.concatenate([q.numpy() for q, _, _ in qkv]),  # (N, d_h)
        key=np.concatenate([k.numpy() for _, k, _ in qkv]),  # (N, d_h)
        names=[label for run in runs for label in run.pieces.labels()],
        which=np.concatenate([np.full(len(run.pieces), s) for s, run in enumerate(runs)]),  # (N,)
        where=np.concatenate([np.arange(len(run.pieces)) for run in runs]),  # (N,)
        weights=[run.weights[layer, head] for run in runs],
    )
