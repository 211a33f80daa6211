"""Personalized PageRank: one pure function over a CSR matrix and a teleport vector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class PPRConfig:
    """Parameters of the walk.

    Attributes:
        damping: probability of following an edge at each step (HippoRAG 2: 0.5).
        tol: stop when the L1 change between iterations drops below this.
        max_iter: iteration cap.
    """

    damping: float = 0.5
    tol: float = 1e-7
    max_iter: int = 100


def walk_matrix(adjacency: sp.csr_matrix) -> sp.csr_matrix:
    """Column-stochastic transition matrix ``A D^-1`` (float32 CSR) of a weighted graph.

    Entry ``(i, j)`` is the probability of stepping from ``j`` to ``i``, so one
    walk step is ``walk @ x``. For a directed graph pass ``A[i, j]`` as the
    weight of the edge ``i -> j``; out-weights are row sums. Columns of dangling nodes are all zero;
    :func:`personalized_pagerank` returns their mass to the teleport vector.
    """
    adj = sp.csr_matrix(adjacency, dtype=np.float32)
    out_weight = np.asarray(adj.sum(axis=1)).ravel()  # (n,)
    inv = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    # (n, n)^T @ diag(n): column j is j's out-edges over its out-weight; row i sums what arrives at i
    return sp.csr_matrix(adj.T @ sp.diags(inv.astype(np.float32)), dtype=np.float32)


def personalized_pagerank(
    walk: sp.csr_matrix,
    teleport: np.ndarray,
    config: PPRConfig = PPRConfig(),
) -> np.ndarray:
    """Scores of the personalized PageRank of ``teleport`` over ``walk``.

    Args:
        walk: column-stochastic (n, n) matrix from :func:`walk_matrix`.
        teleport: non-negative (n,) or (n, q) restart distribution(s); each
            column is normalised to sum to 1. An all-zero column gives zeros.
        config: damping, tolerance and iteration cap.

    Returns:
        float32 array of the teleport's shape; each non-zero column sums to 1.
    """
    t = np.asarray(teleport, dtype=np.float32)
    if t.shape[0] != walk.shape[0]:
        raise ValueError(f"teleport has {t.shape[0]} rows, graph has {walk.shape[0]} nodes")
    if t.size == 0:
        return t.copy()
    total = t.sum(axis=0, keepdims=True)
    t = np.divide(t, total, out=np.zeros_like(t), where=total > 0)
    alpha = np.float32(config.damping)
    x = t.copy()
    for _ in range(config.max_iter):
        step = alpha * (walk @ x)  # (n, n) @ (n, q)
        lost = 1.0 - step.sum(axis=0, keepdims=True)  # restart mass + dangling mass
        new = step + lost * t
        new *= total > 0
        delta = np.abs(new - x).sum(axis=0).max() if new.ndim > 1 else np.abs(new - x).sum()
        x = new
        if delta < config.tol:
            break
    return x
