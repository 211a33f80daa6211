"""Personalized PageRank on an undirected graph as a symmetric linear solve.

For a symmetric adjacency ``A`` with weighted degrees ``D`` the walk is
``W = A D^-1``, and the PageRank of a teleport ``t`` (dangling mass returned to
``t``, result normalised) is ``y / sum(y)`` where ``(I - a W) y = t``. Writing
``y = D z`` turns this into ``(D - a A) z = t``: a symmetric, strictly diagonally
dominant (so positive definite) system. Conjugate gradients with the diagonal
``D`` as preconditioner converge about twice as fast per matrix product as
power iteration (the preconditioned matrix has eigenvalues in ``[1-a, 1+a]``),
read ``A`` as stored (no transposed copy, so a memory-mapped snapshot stays
shared), and give a cheap certificate: the residual ``r`` bounds the error,
``|y - y*|_1 <= |r|_1 / (1 - a)`` because ``W`` is column-stochastic.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from qortex_core.query.ppr.csr_views import compressed_view, row_blocks
from qortex_core.storage.symmetry import check_symmetric, weighted_degree

PARALLEL_MIN_NNZ = 200_000  # below this a product is too short to split across threads
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def thread_pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="qortex-ppr")
        return _POOLS[threads]


@dataclass(frozen=True, eq=False)
class SymmetricWalk:
    """The walk ``A D^-1`` of a symmetric non-negative adjacency, kept as ``A`` and ``D``.

    Build with :func:`symmetric_walk`. ``walk @ x`` is one walk step, as with the
    matrix from :func:`qortex_core.query.ppr.solve.walk_matrix`.

    Attributes:
        adjacency: the (n, n) float32 CSR adjacency, arrays shared with the caller.
        degree: (n,) float32 weighted degrees, 1 for isolated nodes (so ``y = D z`` keeps
            their teleport).
        inv_degree: (n,) float32 ``1 / degree``.
        isolated: indices of nodes without edges (their PageRank is their teleport).
        background: optional (n,) non-negative vector most teleports contain a multiple of
            (e.g. the passage nodes); its solution is computed once per damping and used as
            the starting guess, which removes that share of the error before the first product.
    """

    adjacency: sp.csr_matrix
    degree: np.ndarray
    inv_degree: np.ndarray
    isolated: np.ndarray
    background: np.ndarray | None = None
    _prior: dict = field(default_factory=dict, repr=False)
    _blocks: dict = field(default_factory=dict, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.adjacency.shape

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """One walk step ``A D^-1 x`` (isolated nodes' columns are zero)."""
        x = np.asarray(x, dtype=np.float32)
        scale = self.inv_degree if x.ndim == 1 else self.inv_degree[:, None]
        return self.adjacency @ (x * scale)

    def product(self, x: np.ndarray, threads: int = 1) -> np.ndarray:
        """``A @ x`` for float32 ``x`` (n,) or (n, q), split by rows over ``threads`` threads.

        scipy's sparse kernels release the GIL, so the row blocks run in parallel.
        """
        if threads <= 1 or self.adjacency.nnz < PARALLEL_MIN_NNZ:
            return self.adjacency @ x
        if threads not in self._blocks:
            self._blocks[threads] = row_blocks(self.adjacency, threads)
        out = np.empty(x.shape, np.float32)

        def run(block: tuple[int, int, sp.csr_matrix]) -> None:
            lo, hi, rows = block
            out[lo:hi] = rows @ x

        list(thread_pool(threads).map(run, self._blocks[threads]))
        return out

    def sparse_product(self, x: np.ndarray, threads: int = 1) -> np.ndarray:
        """``A @ x`` for an ``x`` that is zero off the background's rows but for a few nodes.

        By symmetry ``A x = sum_j x_j A[j, :]``, so only the rows of the non-zeros need
        reading: the background rows (a contiguous CSR view, read as its transpose) plus
        the few other rows. A CG solve's first direction has this shape (teleport = dense
        passage mass + a few seeds), and the passage rows hold a small share of the edges.
        Falls back to :meth:`product` when the rows to read are half the matrix or more.
        """
        span = self.sparse_rows(x)
        if span is None:
            return self.product(x, threads)
        lo, hi, others = span
        a, rows = self.adjacency, self._background_rows()[2]  # type: ignore[index]
        out = rows @ x[lo:hi]  # (n, hi - lo) CSC = the rows transposed: a scatter
        for j in others.tolist():  # a few seed rows; a CSR row has no repeated column
            s, e = int(a.indptr[j]), int(a.indptr[j + 1])
            weights = a.data[s:e] if x.ndim == 1 else a.data[s:e, None]
            out[a.indices[s:e]] += weights * x[j]
        return out

    def sparse_rows(self, x: np.ndarray) -> tuple[int, int, np.ndarray] | None:
        """``(lo, hi, others)``: ``x`` (n,) or (n, q) is zero but on the background's rows
        ``lo:hi`` and the few rows ``others``, which hold less than half the non-zeros of ``A``;
        None when reading all of ``A`` is as cheap (see :meth:`sparse_product`)."""
        span = self._background_rows()
        if span is None:
            return None
        lo, hi, _ = span
        x2 = x.reshape(x.shape[0], -1)
        others = np.concatenate(
            [np.flatnonzero(x2[:lo].any(axis=1)), hi + np.flatnonzero(x2[hi:].any(axis=1))]
        )
        a = self.adjacency
        read = int(a.indptr[hi] - a.indptr[lo]) + int(
            (a.indptr[others + 1] - a.indptr[others]).sum()
        )
        return None if others.size > 64 or read * 2 >= a.nnz else (lo, hi, others)

    def _background_rows(self) -> tuple[int, int, sp.csc_matrix] | None:
        """(lo, hi, rows lo:hi transposed, a CSC view).

        Only when the background is non-zero exactly on ``[lo, hi)``.
        """
        if "background" not in self._blocks:
            span = None
            support = (
                np.flatnonzero(self.background)
                if self.background is not None
                else np.zeros(0, np.int64)
            )
            if support.size and support[-1] - support[0] + 1 == support.size:
                lo, hi = int(support[0]), int(support[-1]) + 1
                a = self.adjacency
                s, e = int(a.indptr[lo]), int(a.indptr[hi])
                span = (
                    lo,
                    hi,
                    compressed_view(
                        sp.csc_matrix,
                        a.data[s:e],
                        a.indices[s:e],
                        a.indptr[lo : hi + 1] - s,
                        (a.shape[1], hi - lo),
                    ),
                )
            self._blocks["background"] = span
        return self._blocks["background"]

    def matrix(self) -> sp.csr_matrix:
        """The column-stochastic walk as a CSR matrix (a new array; the solver never needs it)."""
        a = self.adjacency
        data = (
            a.data * self.inv_degree[a.indices]
        )  # symmetric: column j of A D^-1 is row j of A / d_j
        return sp.csr_matrix((data.astype(np.float32), a.indices, a.indptr), shape=a.shape)


def symmetric_walk(
    adjacency: sp.spmatrix,
    background: np.ndarray | None = None,
    check: bool = True,
    degree: np.ndarray | None = None,
) -> SymmetricWalk:
    """Wrap a symmetric non-negative adjacency for the conjugate-gradient PageRank.

    A float32 CSR with int32 indices is used as is (a memory-mapped snapshot is not
    copied); anything else is converted once.

    Args:
        adjacency: (n, n) symmetric weights, ``A[i, j] == A[j, i] >= 0``.
        background: see :class:`SymmetricWalk`.
        check: verify symmetry (randomised, two products) and non-negativity.
        degree: the adjacency's weighted degrees (:func:`weighted_degree`) when the caller
            has them, as a snapshot stores them; with ``check=False`` the walk is then built
            without reading the adjacency at all.

    Raises:
        ValueError: the matrix is not square, not symmetric or has negative weights, or
            ``degree`` has the wrong shape.
    """
    adj = (
        adjacency
        if sp.isspmatrix_csr(adjacency) and adjacency.dtype == np.float32
        else sp.csr_matrix(adjacency, dtype=np.float32)
    )
    if adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adjacency must be square, got {adj.shape}")
    if check:
        check_symmetric(adj)
    if degree is None:
        degree = weighted_degree(adj)
    elif np.shape(degree) != (adj.shape[0],):
        raise ValueError(f"degree has shape {np.shape(degree)}, graph has {adj.shape[0]} nodes")
    else:
        degree = np.array(degree, dtype=np.float32)  # a copy: isolated nodes get 1 below
    isolated = np.flatnonzero(degree <= 0)
    degree[isolated] = 1.0
    if background is not None:
        background = np.asarray(background, dtype=np.float32)
        if background.shape != (adj.shape[0],) or float(background.min(initial=0.0)) < 0:
            raise ValueError("background must be a non-negative (n,) vector")
    return SymmetricWalk(adj, degree, (1.0 / degree).astype(np.float32), isolated, background)


def background_solution(walk: SymmetricWalk, damping: float) -> np.ndarray | None:
    """(n,) ``z_u`` solving ``(D - aA) z_u = u`` for the background ``u`` (once per damping)."""
    u = walk.background
    if u is None or not float(u.sum()) > 0:
        return None
    if damping not in walk._prior:
        z_u, _ = conjugate_gradient(walk, u[:, None], damping, 1e-7, 200, use_background=False)
        walk._prior[damping] = z_u[:, 0]
    return walk._prior[damping]


def _start(walk: SymmetricWalk, t: np.ndarray, damping: float) -> tuple[np.ndarray, np.ndarray]:
    """Starting ``z`` and residual ``r = t - (D - aA) z`` for teleports ``t`` (n, q)."""
    z_u, u = background_solution(walk, damping), walk.background
    if z_u is None or u is None:
        return np.zeros_like(t), t.copy()
    c = (u @ t) / float(u @ u)  # (q,) least-squares share of the background in each teleport
    return z_u[:, None] * c, t - u[:, None] * c


def unconverged(
    walk: SymmetricWalk, z: np.ndarray, r: np.ndarray, damping: float, tol: float, tmp: np.ndarray
) -> np.ndarray:
    """(q,) True where the certified L1 error of the normalised, clipped ``D z + r`` may reach tol.

    The solution is returned corrected by its residual (``y = D z + r``, the first term of
    ``(I - aW)^-1 r``), which leaves the error ``aW (I - aW)^-1 r``: ``|y - y*|_1 <= E =
    a |r|_1 / (1 - a)``, half the uncorrected bound at damping 0.5. The total ``c = 1^T (y* - y)``
    is known exactly (``1^T W = 1^T`` off isolated nodes), so ``s* = s + c``. Clipping negatives
    (mass ``m``) moves entries towards ``y* >= 0``, hence
    ``|y+/s+ - y*/s*|_1 <= (E + |m - c|) / (s + c)``; ``m`` is only summed once ``E / (s + c)``
    alone is below ``tol``.
    """
    np.abs(r, out=tmp)
    big_e = tmp.sum(axis=0) * (damping / (1.0 - damping))
    r_sum = r.sum(axis=0)
    c = r_sum / (1.0 - damping)
    if walk.isolated.size:
        c -= r[walk.isolated].sum(axis=0) * (damping / (1.0 - damping))
    np.multiply(z, walk.degree[:, None], out=tmp)
    tmp += r  # the corrected iterate y = D z + r
    total = tmp.sum(axis=0) + (c - r_sum)  # s + c = s*
    open_ = ~(big_e < tol * total)
    if open_.all():
        return open_
    np.minimum(tmp, 0.0, out=tmp)
    clipped = -tmp.sum(axis=0)
    return ~(big_e + np.abs(clipped - (c - r_sum)) < tol * total)


def conjugate_gradient(
    walk: SymmetricWalk,
    t: np.ndarray,
    damping: float,
    tol: float,
    max_iter: int,
    use_background: bool = True,
    threads: int = 1,
) -> tuple[np.ndarray, int]:
    """Solve ``(D - aA) Z = T`` column by column until the L1 error certificate is below ``tol``.

    Args:
        walk: the graph.
        t: (n, q) float32 non-negative teleports; all-zero columns give zero columns.
        damping: ``a`` in [0, 1).
        tol: bound on the L1 error of every normalised column ``y / sum(y)``, ``y = D z``.
        max_iter: cap on matrix products.
        use_background: start from the background solution when the walk has one.
        threads: threads per matrix product.

    Returns:
        (Z, number of matrix products) with Z (n, q) float32, corrected by the last residual
        (``D Z = D Z_cg + R``, see :func:`unconverged`).
    """
    dinv = walk.inv_degree[:, None]  # (n, 1)
    alpha = np.float32(damping)
    z, r = _start(walk, t, damping) if use_background else (np.zeros_like(t), t.copy())
    started = bool(
        z.any()
    )  # from z = 0 the bound is >= 1: no need to check before the first product
    h = r * dinv
    p = h.copy()
    rh = np.einsum("ij,ij->j", r, h)  # (q,)
    live = t.sum(axis=0) > 0  # (q,)
    products = 0
    for products in range(max_iter + 1):
        if _cg_stop(walk, z, r, h, live, damping, tol, products, max_iter, started):
            break
        rh = _cg_step(walk, z, r, h, p, rh, alpha, threads, products == 0)
    z += r * dinv  # y = D z + r: the residual correction the certificate counts on
    return z, products


def _cg_stop(
    walk: SymmetricWalk,
    z: np.ndarray,
    r: np.ndarray,
    tmp: np.ndarray,
    live: np.ndarray,
    damping: float,
    tol: float,
    products: int,
    max_iter: int,
    started: bool,
) -> bool:
    """Whether :func:`conjugate_gradient` stops before product number ``products``.

    ``tmp`` is scratch (the caller's ``h``, dead at this point).
    """
    return bool(
        products == max_iter
        or (started or products)
        and not np.any(live & unconverged(walk, z, r, damping, tol, tmp))
    )


def _cg_step(
    walk: SymmetricWalk,
    z: np.ndarray,
    r: np.ndarray,
    h: np.ndarray,
    p: np.ndarray,
    rh: np.ndarray,
    alpha: np.float32,
    threads: int,
    first: bool,
) -> np.ndarray:
    """One conjugate-gradient step, updating ``z``, ``r``, ``h`` and ``p`` in place.

    Returns the new ``rh`` (the (q,) products ``r . D^-1 r``).
    """
    d, dinv = walk.degree[:, None], walk.inv_degree[:, None]  # (n, 1)
    tmp = h  # scratch: h is dead from the end of one step (p += h) to its recomputation
    ap = walk.sparse_product(p, threads) if first else walk.product(p, threads)  # (n, n) @ (n, q)
    ap *= -alpha
    np.multiply(p, d, out=tmp)
    ap += tmp  # (D - aA) p
    pq = np.einsum("ij,ij->j", p, ap)
    step = np.divide(rh, pq, out=np.zeros_like(rh), where=pq > 0)
    np.multiply(p, step, out=tmp)
    z += tmp
    ap *= step
    r -= ap
    np.multiply(r, dinv, out=h)
    rh_new = np.einsum("ij,ij->j", r, h)
    beta = np.divide(rh_new, rh, out=np.zeros_like(rh), where=rh > 0)
    p *= beta
    p += h
    return rh_new


def symmetric_pagerank(
    walk: SymmetricWalk, t: np.ndarray, damping: float, tol: float, max_iter: int, threads: int = 1
) -> np.ndarray:
    """Normalised PageRank columns for float32 teleports ``t`` (n, q); zero columns stay zero."""
    z, _ = conjugate_gradient(walk, t, damping, tol, max_iter, threads=threads)
    z *= walk.degree[:, None]  # y = D z
    np.maximum(z, 0.0, out=z)  # the exact y is >= 0; clipping only moves entries towards it
    total = z.sum(axis=0, keepdims=True)
    z[:, total[0] <= 0] = 0.0
    return np.divide(z, total, out=z, where=total > 0)
