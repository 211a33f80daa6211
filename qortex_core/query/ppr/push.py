"""Personalized PageRank of a sparse teleport by local push (Andersen, Chung and Lang, 2006).

On a large graph a query's teleport is a few dozen concepts and a bounded number of passages,
and its PageRank is concentrated near them: a global solve reads every edge several times
(about 4 products of ``A``), while the push reads only the edges around the nodes that hold
mass. For the system ``(I - aW) y = t`` of :mod:`qortex_core.query.ppr.cg` (``W = A D^-1``,
an isolated node keeps its teleport) the push keeps an estimate ``y`` and a residual ``r``
(``y = 0``, ``r = t`` at the start) with ``y* = y + solution(r)``; pushing node ``u`` moves
``r_u`` into ``y_u`` and ``a r_u A_vu / d_u`` to each neighbour's residual. Nodes are pushed
while ``r_u >= eps d_u``. On an undirected graph the error left is then at most
``eps d_v / (1 - a)`` at every node ``v`` (PageRank's symmetry ``y_s(v) / d_v = y_v(s) / d_s``),
and the work at most ``|t|_1 / (eps (1 - a))`` edge reads, whatever the size of the graph.

The result is ``y + r`` (the residual is the next term of the series, never an overestimate)
normalised to sum 1, as :func:`qortex_core.query.ppr.solve.personalized_pagerank` returns.
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from qortex_core.query.ppr.cg import SymmetricWalk

# Columns of a push's node state: one row per node, so the entries an edge touches (the
# neighbour's residual, degree and state) share a cache line instead of three arrays' lines.
R, DEGREE, Y, STATE = 0, 1, 2, 3
UNTOUCHED, TOUCHED, QUEUED = 0.0, 2.0, 3.0


@numba.njit(nogil=True, cache=True)
def push_pass(indptr, indices, data, alpha, eps, seeds, node, queue, touched):
    """Push every node with ``r_u >= eps d_u`` until none is left.

    ``node`` (n, 4) float32 rows ``(r, d, y, state)``: on entry ``r`` holds the teleport, ``d``
    the weighted degrees, ``y`` and ``state`` zeros (UNTOUCHED); on return ``r`` is the residual,
    ``y`` the estimate, and every node whose ``r`` or ``y`` is non-zero is TOUCHED.
    ``queue`` and ``touched`` (n,) int32. Returns the number of nodes written in ``touched``
    (the TOUCHED ones) and the number of edges read.
    """  # pragma: no cover - compiled
    n = node.shape[0]
    eps = np.float32(eps)
    alpha = np.float32(alpha)
    head = 0
    count = 0
    n_touched = 0
    for s in seeds:
        node[s, STATE] = TOUCHED
        touched[n_touched] = s
        n_touched += 1
        if node[s, R] >= eps * node[s, DEGREE]:
            queue[(head + count) % n] = s
            count += 1
            node[s, STATE] = QUEUED
    reads = 0
    while count > 0:
        u = queue[head]
        head = (head + 1) % n
        count -= 1
        node[u, STATE] = TOUCHED
        ru = node[u, R]
        node[u, R] = np.float32(0.0)
        node[u, Y] += ru
        share = alpha * ru / node[u, DEGREE]
        start, stop = indptr[u], indptr[u + 1]
        for k in range(start, stop):
            v = indices[k]
            rv = node[v, R] + share * data[k]
            node[v, R] = rv
            state = node[v, STATE]
            if state == UNTOUCHED:
                state = TOUCHED
                node[v, STATE] = TOUCHED
                touched[n_touched] = v
                n_touched += 1
            if state == TOUCHED and rv >= eps * node[v, DEGREE]:
                queue[(head + count) % n] = v
                count += 1
                node[v, STATE] = QUEUED
        reads += stop - start
    return n_touched, reads


class _Workspace:
    """Arrays one push works in, kept clean between solves (only the touched rows are reset),
    so a solve on a large graph does not fault in fresh pages for each of them."""

    def __init__(self, degree: np.ndarray) -> None:
        n = degree.shape[0]
        self.node = np.zeros((n, 4), np.float32)  # (n, 4) rows (r, d, y, state)
        self.node[:, DEGREE] = degree
        self.queue = np.empty(n, np.int32)
        self.touched = np.empty(n, np.int32)


_LOCK = threading.Lock()


def _take(walk: SymmetricWalk) -> _Workspace:
    with _LOCK:
        free = walk._blocks.setdefault("push", [])
        return free.pop() if free else _Workspace(walk.degree)


def _give(walk: SymmetricWalk, space: _Workspace) -> None:
    with _LOCK:
        walk._blocks["push"].append(space)


@numba.njit(nogil=True, cache=True, fastmath={"reassoc"})
def _scan(teleport):  # pragma: no cover - compiled
    """Non-zeros, sum (float64) and negatives of ``teleport``: branch-free, so it vectorises."""
    count = 0
    total = 0.0
    negative = 0
    for i in range(teleport.size):
        v = teleport[i]
        count += v != 0
        total += v
        negative += v < 0
    return count, total, negative


@numba.njit(nogil=True, cache=True)
def _nonzeros(teleport, count):  # pragma: no cover - compiled
    seeds = np.empty(count, np.int32)
    j = 0
    for i in range(teleport.size):
        if teleport[i] != 0:
            seeds[j] = i
            j += 1
    return seeds


def seed_pass(
    teleport: np.ndarray, most: int, support: np.ndarray | None = None
) -> tuple[np.ndarray | None, float, bool]:
    """``(seeds, total, negative)``: the indices of ``teleport``'s non-zeros (None when there
    are more than ``most``), their sum in float64, and whether any entry is negative.

    ``support``: ascending indices outside which ``teleport`` is zero (the caller's promise);
    only those entries are read, instead of a pass over all ``n``.
    """
    if support is not None:
        values = teleport[support]  # (s,)
        found = np.asarray(support[values != 0], np.int32)  # (m,) ascending, as a scan finds
        negative = bool((values < 0).any())
        total = float(values.sum(dtype=np.float64))
        return (found if found.size <= most else None), total, negative
    count, scanned, below = _scan(teleport)
    seeds = _nonzeros(teleport, count) if count <= most else None
    return seeds, float(scanned), bool(below)


@numba.njit(nogil=True, cache=True)
def finish_pass(at, node, out):  # pragma: no cover - compiled
    """``out[at] = (y + r)[at] / sum``, and the rows at ``at`` back to a clean state."""
    total = 0.0
    for u in at:
        total += np.float64(node[u, Y]) + np.float64(node[u, R])
    scale = 1.0 / total if total > 0 else 0.0
    for u in at:
        out[u] = np.float32((np.float64(node[u, Y]) + np.float64(node[u, R])) * scale)
        node[u, R] = 0.0
        node[u, Y] = 0.0
        node[u, STATE] = UNTOUCHED


def push_pagerank(
    walk: SymmetricWalk,
    teleport: np.ndarray,
    damping: float,
    eps: float,
    most: int,
    support: np.ndarray | None = None,
) -> tuple[np.ndarray, int] | None:
    """(n,) float32 PageRank of the (n,) float32 non-negative ``teleport`` (normalised to sum 1
    first) by local push, and the number of edges read; None when more than ``most`` entries
    of the teleport are non-zero (a global solve is then as cheap).

    ``eps``: push threshold per unit of weighted degree (see the module docstring); the
    work is at most ``1 / (eps (1 - damping))`` edge reads. Concurrent solves on one walk each
    take their own workspace. ``support``: see :func:`seed_pass`.

    Raises:
        ValueError: the teleport has a negative entry.
    """
    n = walk.shape[0]
    seeds, total, negative = seed_pass(teleport, most, support)
    if negative:
        raise ValueError("teleport has negative entries")
    if seeds is None:
        return None
    out = np.zeros(n, np.float32)
    if seeds.size == 0:
        return out, 0
    space = _take(walk)
    try:
        space.node[seeds, R] = teleport[seeds] / np.float32(total)
        a = walk.adjacency
        n_touched, reads = push_pass(
            a.indptr, a.indices, a.data, np.float32(damping), np.float32(eps),
            seeds, space.node, space.queue, space.touched,
        )  # fmt: skip
        finish_pass(space.touched[:n_touched], space.node, out)
    except BaseException:
        space = _Workspace(walk.degree)  # a solve cut short leaves rows set: start clean
        raise
    finally:
        _give(walk, space)
    return out, int(reads)
