"""The conjugate-gradient PageRank of one teleport with compiled passes (see ``ppr_kernels``).

The same iteration, start, stopping certificate and result as
:func:`qortex_core.query.ppr.cg.conjugate_gradient` followed by the normalisation of
:func:`~qortex_core.query.ppr.cg.symmetric_pagerank`, for a single (n,) teleport; the numpy
solve stays for batches of teleports (one sparse product then serves them all).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query.ppr.cg import (
    PARALLEL_MIN_NNZ,
    SymmetricWalk,
    background_solution,
    thread_pool,
)


@dataclass(frozen=True)
class _Plan:
    """Unsigned views of the CSR arrays and the row ranges each pass is split into.

    Every range starts at a multiple of ``ppr_kernels.CHUNK``, so the partial sums are the
    same however many ranges there are.
    """

    indptr: np.ndarray
    indices: np.ndarray
    product_rows: tuple[tuple[int, int], ...]  # about equal non-zeros each
    vector_rows: tuple[tuple[int, int], ...]  # about equal rows each
    chunks: int
    threads: int

    def csr(self, a) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The arrays a kernel reads ``A`` by: unsigned indptr and indices, float32 data."""
        return self.indptr, self.indices, a.data


def _ranges(cuts: np.ndarray, n: int, chunk: int) -> tuple[tuple[int, int], ...]:
    """Row ranges between ``cuts`` rounded to multiples of ``chunk``; ``((0, n),)`` at least."""
    bounds = np.unique(np.concatenate([[0], np.clip(np.round(cuts / chunk) * chunk, 0, n), [n]]))
    return tuple((int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])) or ((0, n),)


def _plan(walk: SymmetricWalk, threads: int) -> _Plan:
    from qortex_core.query.ppr.kernels import CHUNK

    key = ("compiled", threads)
    if key not in walk._blocks:
        a = walk.adjacency
        n = a.shape[0]
        parts = threads if threads > 1 and a.nnz >= PARALLEL_MIN_NNZ else 1
        by_nnz = np.searchsorted(a.indptr, np.linspace(0, a.nnz, parts + 1)[1:-1])
        unsigned = {4: np.uint32, 8: np.uint64}
        walk._blocks[key] = _Plan(
            a.indptr.view(unsigned[a.indptr.itemsize]),
            a.indices.view(unsigned[a.indices.itemsize]),
            _ranges(by_nnz, n, CHUNK),
            _ranges(np.linspace(0, n, parts + 1)[1:-1], n, CHUNK),
            -(-n // CHUNK),
            parts,
        )
    return walk._blocks[key]


def _run(plan: _Plan, rows: tuple[tuple[int, int], ...], width: int, kernel, *args) -> np.ndarray:
    """``kernel(*args, lo, hi, partial)`` over ``rows`` (in the thread pool when split).

    Returns the (width,) column sums of the (chunks, width) partial sums, always added in the
    same order.
    """
    partial = np.zeros((plan.chunks, width), np.float64)
    if len(rows) == 1:
        kernel(*args, *rows[0], partial)
    else:
        list(thread_pool(plan.threads).map(lambda span: kernel(*args, *span, partial), rows))
    return partial.sum(axis=0)


def _converged(
    walk: SymmetricWalk, r: np.ndarray, sums: np.ndarray, damping: float, tol: float
) -> bool:
    """The certificate of :func:`~qortex_core.query.ppr.cg.unconverged`, from the pass sums."""
    _, r_abs, r_sum, y_sum, y_neg = sums.tolist()
    ratio = damping / (1.0 - damping)
    big_e = r_abs * ratio
    c = r_sum / (1.0 - damping)
    if walk.isolated.size:
        c -= float(r[walk.isolated].sum(dtype=np.float64)) * ratio
    total = y_sum + (c - r_sum)  # the exact total of y*
    return big_e < tol * total and big_e + abs(-y_neg - (c - r_sum)) < tol * total


def _product(plan: _Plan, walk: SymmetricWalk, p: np.ndarray, ap: np.ndarray, alpha) -> float:
    """``ap = (D - aA) p``; returns ``p . ap``."""
    from qortex_core.query.ppr import kernels as k

    args = (*plan.csr(walk.adjacency), p, walk.degree, alpha, ap)
    return float(_run(plan, plan.product_rows, 1, k.product_pass, *args)[0])


def _first_product(plan: _Plan, walk: SymmetricWalk, p: np.ndarray, ap: np.ndarray, alpha) -> float:
    """:func:`_product` for the first direction, reading only the rows of its non-zeros when
    they are few (see :meth:`SymmetricWalk.sparse_rows`)."""
    from qortex_core.query.ppr import kernels as k

    span = walk.sparse_rows(p)
    if span is None:
        return _product(plan, walk, p, ap, alpha)
    lo, hi, others = span
    k.scatter_pass(*plan.csr(walk.adjacency), p, others, lo, hi, ap)  # (n, rows) @ (rows,)
    return float(_run(plan, plan.vector_rows, 1, k.combine_pass, ap, p, walk.degree, alpha)[0])


def fused_pagerank(
    walk: SymmetricWalk, t: np.ndarray, damping: float, tol: float, max_iter: int, threads: int
) -> tuple[np.ndarray, int]:
    """Normalised PageRank (n,) float32 of one normalised, non-zero teleport ``t`` (n,).

    Returns the scores and the number of matrix products taken.
    """
    from qortex_core.query.ppr import kernels as k

    plan, d, dinv = _plan(walk, threads), walk.degree, walk.inv_degree
    alpha, n, rows = np.float32(damping), walk.shape[0], _plan(walk, threads).vector_rows
    prior, u = background_solution(walk, damping), walk.background
    c = 0.0 if prior is None or u is None else float(u @ t) / float(u @ u)
    if prior is None or u is None:
        prior = u = np.zeros(n, np.float32)
    z, r, h, p, ap = (np.empty(n, np.float32) for _ in range(5))
    sums = _run(plan, rows, 5, k.start_pass, prior, u, t, np.float32(c), d, dinv, z, r, h, p)
    done = c != 0.0 and _converged(walk, r, sums, damping, tol)
    rh, products = float(sums[0]), 0
    while not done and products < max_iter:
        first = _first_product if products == 0 else _product
        pq = first(plan, walk, p, ap, alpha)
        products += 1
        step = np.float32(rh / pq) if pq > 0 else np.float32(0.0)
        sums = _run(plan, rows, 5, k.update_pass, z, r, h, p, ap, step, d, dinv)
        done = _converged(walk, r, sums, damping, tol)
        beta = np.float32(sums[0] / rh) if rh > 0 else np.float32(0.0)
        rh = float(sums[0])
        if not done:
            _run(plan, rows, 1, k.direction_pass, p, h, beta)
    total = float(_run(plan, rows, 1, k.finish_pass, z, r, d, dinv)[0])
    return (z / np.float32(total) if total > 0 else np.zeros_like(z)), products
