"""Personalized PageRank: one pure function over a walk and a teleport vector.

Two walks are accepted:

- a column-stochastic CSR matrix from :func:`walk_matrix` (any graph, directed or
  not): power iteration with preallocated buffers;
- a :class:`~qortex_core.query.ppr.cg.SymmetricWalk` from :func:`symmetric_walk` (an
  undirected graph, as the retriever's): a preconditioned conjugate-gradient solve
  on the adjacency itself, with a certified L1 error bound (see :mod:`qortex_core.query.ppr.cg`).

Both return the same vector up to ``config.tol``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from qortex_core.cores import usable_cores
from qortex_core.query.ppr.cg import SymmetricWalk, symmetric_pagerank, symmetric_walk

__all__ = [
    "PPRConfig",
    "SymmetricWalk",
    "fast_walk",
    "personalized_pagerank",
    "query_threads",
    "symmetric_walk",
    "walk_matrix",
]


@dataclass(frozen=True)
class PPRConfig:
    """Parameters of the walk.

    Attributes:
        damping: probability of following an edge at each step (HippoRAG 2: 0.5).
        tol: accuracy. Power iteration stops when the L1 change between iterations drops
            below this (its L1 error is then at most ``damping / (1 - damping)`` times
            that); the symmetric solver stops when its certified L1 error bound does.
        max_iter: cap on iterations (matrix products).
        threads: threads per matrix product of the symmetric solver (scipy releases the GIL).
        compiled: solve a single teleport on a symmetric walk with the compiled passes of
            :mod:`qortex_core.query.ppr.fused` (same iterates and certificate, fewer passes over
            memory); False keeps the numpy solve, which batches of teleports always take.
        push_min_nodes: on a symmetric walk of at least this many nodes, a single teleport held
            by at most 1/64 of them is solved by local push (:mod:`qortex_core.query.ppr.push`):
            it reads the edges around the mass, not the whole graph (0: never).
        push_eps: the push's threshold per unit of weighted degree: the score of a node ``v``
            is then low by at most ``push_eps x degree(v) / (1 - damping)`` before the final
            normalisation, and a solve reads at most ``1 / (push_eps (1 - damping))`` edges.
    """

    damping: float = 0.5
    tol: float = 1e-7
    max_iter: int = 100
    threads: int = 1
    compiled: bool = True
    push_min_nodes: int = 500_000
    push_eps: float = 3e-7


def query_threads(cap: int = 4) -> int:
    """Threads for a query's matrix products: the cores this process may run on, at most
    ``cap`` (a product is split only when the graph is large, see ``ppr_cg.PARALLEL_MIN_NNZ``)."""
    return usable_cores(cap)


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
    # (n, n)^T @ diag(n): column j is j's out-edges over its out-weight;
    # row i sums what arrives at i
    return sp.csr_matrix(adj.T @ sp.diags(inv.astype(np.float32)), dtype=np.float32)


def fast_walk(
    adjacency: sp.spmatrix,
    background: np.ndarray | None = None,
    degree: np.ndarray | None = None,
) -> sp.csr_matrix | SymmetricWalk:
    """The fastest walk for ``adjacency``: a :class:`SymmetricWalk` (no copy) when it is symmetric
    and non-negative, else the column-stochastic matrix of :func:`walk_matrix`.

    Args:
        adjacency: (n, n) weights.
        background: for the symmetric solver, a vector most teleports hold a multiple of
            (the retriever passes its passage nodes); see :class:`SymmetricWalk`.
        degree: (n,) weighted degrees from a builder that checked the adjacency symmetric and
            non-negative (a snapshot's ``adj_degree``): the walk is then symmetric, built
            without summing or checking the adjacency (a memory-mapped snapshot's pages are
            not mapped in for it).
    """
    if degree is not None:
        return symmetric_walk(adjacency, background=background, check=False, degree=degree)
    try:
        return symmetric_walk(adjacency, background=background)
    except ValueError:
        return walk_matrix(adjacency)


def _normalised(teleport: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, q) float32 teleports scaled to sum 1 (zero columns stay zero) and their (q,) sums."""
    t = np.array(teleport, dtype=np.float32, ndmin=1)
    if t.ndim not in (1, 2) or t.shape[0] != n:
        raise ValueError(f"teleport has shape {t.shape}, graph has {n} nodes: need (n,) or (n, q)")
    t = t.reshape(n, t.shape[1] if t.ndim == 2 else 1)
    if t.size and float(t.min()) < 0:
        raise ValueError("teleport has negative entries")
    total = t.sum(axis=0)
    np.divide(t, total, out=t, where=total > 0)
    return t, total


def _power_iteration(walk: sp.csr_matrix, t: np.ndarray, config: PPRConfig) -> np.ndarray:
    """Power iteration ``x <- a W x + (1 - a 1^T W x) t`` on (n, q) normalised teleports."""
    alpha = np.float32(config.damping)
    live = (t.sum(axis=0) > 0).astype(np.float32)  # (q,) zero columns stay zero
    x = t.copy()
    diff = np.empty_like(t)
    for _ in range(config.max_iter):
        step = walk @ x  # (n, n) @ (n, q)
        step *= alpha
        lost = live - step.sum(axis=0)  # restart mass + dangling mass, per column
        step += t * lost
        np.subtract(step, x, out=diff)
        np.abs(diff, out=diff)
        x = step
        if float(diff.sum(axis=0).max(initial=0.0)) < config.tol:
            break
    return x


def _compiled(walk: SymmetricWalk, t: np.ndarray, config: PPRConfig) -> np.ndarray:
    """One normalised teleport (n,) through :func:`~qortex_core.query.ppr.fused.fused_pagerank`."""
    if not t.any():
        return t.copy()
    from qortex_core.query.ppr.fused import fused_pagerank

    x, _ = fused_pagerank(walk, t, config.damping, config.tol, config.max_iter, config.threads)
    return x


def _pushed(
    walk: sp.csr_matrix | SymmetricWalk,
    teleport: np.ndarray,
    config: PPRConfig,
    support: np.ndarray | None = None,
) -> np.ndarray | None:
    """The local push's scores of a sparse (n,) teleport on a large symmetric walk (see
    PPRConfig); None: solve globally."""
    n = walk.shape[0]
    if not (isinstance(walk, SymmetricWalk) and 0 < config.push_min_nodes <= n):
        return None
    if np.shape(teleport) != (n,):
        return None
    from qortex_core.query.ppr.push import push_pagerank

    t = np.ascontiguousarray(teleport, dtype=np.float32)
    pushed = push_pagerank(walk, t, config.damping, config.push_eps, n // 64, support)
    return None if pushed is None else pushed[0]


def personalized_pagerank(
    walk: sp.csr_matrix | SymmetricWalk,
    teleport: np.ndarray,
    config: PPRConfig = PPRConfig(),
    support: np.ndarray | None = None,
) -> np.ndarray:
    """Scores of the personalized PageRank of ``teleport`` over ``walk``.

    Args:
        walk: column-stochastic (n, n) matrix from :func:`walk_matrix`, or a
            :class:`SymmetricWalk` from :func:`symmetric_walk` (faster, undirected graphs).
        teleport: non-negative (n,) or (n, q) restart distribution(s); each
            column is normalised to sum to 1. An all-zero column gives zeros.
        config: damping, tolerance and iteration cap.
        support: ascending indices outside which a (n,) ``teleport`` is zero (the caller's
            promise, e.g. a query's seeding): a local push then reads only those entries
            instead of scanning all ``n``. The scores are the same.

    Returns:
        float32 array of the teleport's shape; each non-zero column sums to 1.

    Raises:
        ValueError: the teleport's shape does not match the graph, or it has negative entries.
    """
    pushed = _pushed(walk, teleport, config, support)
    if pushed is not None:
        return pushed
    shape = np.shape(teleport)
    n = walk.shape[0]
    t, _ = _normalised(teleport, n)
    if t.size == 0:
        return t.reshape(shape)
    if isinstance(walk, SymmetricWalk) and config.compiled and t.shape[1] == 1:
        x = _compiled(walk, t[:, 0], config)
    elif isinstance(walk, SymmetricWalk):
        x = symmetric_pagerank(walk, t, config.damping, config.tol, config.max_iter, config.threads)
    else:
        x = _power_iteration(walk, t, config)
    return np.ascontiguousarray(x, dtype=np.float32).reshape(shape)
