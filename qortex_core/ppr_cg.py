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

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class SymmetricWalk:
    """The walk ``A D^-1`` of a symmetric non-negative adjacency, kept as ``A`` and ``D``.

    Build with :func:`symmetric_walk`. ``walk @ x`` is one walk step, as with the
    matrix from :func:`qortex_core.ppr.walk_matrix`.

    Attributes:
        adjacency: the (n, n) float32 CSR adjacency, arrays shared with the caller.
        degree: (n,) float32 weighted degrees, 1 for isolated nodes (so ``y = D z`` keeps their teleport).
        inv_degree: (n,) float32 ``1 / degree``.
        background: optional (n,) non-negative vector most teleports contain a multiple of
            (e.g. the passage nodes); its solution is computed once per damping and used as
            the starting guess, which removes that share of the error before the first product.
    """

    adjacency: sp.csr_matrix
    degree: np.ndarray
    inv_degree: np.ndarray
    background: np.ndarray | None = None
    _prior: dict = field(default_factory=dict, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.adjacency.shape

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """One walk step ``A D^-1 x`` (isolated nodes' columns are zero)."""
        x = np.asarray(x, dtype=np.float32)
        scale = self.inv_degree if x.ndim == 1 else self.inv_degree[:, None]
        return self.adjacency @ (x * scale)

    def matrix(self) -> sp.csr_matrix:
        """The column-stochastic walk as a CSR matrix (a new array; the solver never needs it)."""
        a = self.adjacency
        data = a.data * self.inv_degree[a.indices]  # symmetric: column j of A D^-1 is row j of A / d_j
        return sp.csr_matrix((data.astype(np.float32), a.indices, a.indptr), shape=a.shape)


def _looks_symmetric(adj: sp.csr_matrix, rng: np.random.Generator) -> bool:
    """Probabilistic test ``u^T A v == v^T A u`` with random u, v: two products, no transpose copy."""
    u, v = rng.random(adj.shape[0]).astype(np.float32), rng.random(adj.shape[0]).astype(np.float32)
    left, right = float(u @ (adj @ v)), float(v @ (adj @ u))
    return abs(left - right) <= 1e-4 * max(abs(left), abs(right), 1e-30)


def symmetric_walk(adjacency: sp.spmatrix, background: np.ndarray | None = None, check: bool = True) -> SymmetricWalk:
    """Wrap a symmetric non-negative adjacency for the conjugate-gradient PageRank.

    A float32 CSR with int32 indices is used as is (a memory-mapped snapshot is not
    copied); anything else is converted once.

    Args:
        adjacency: (n, n) symmetric weights, ``A[i, j] == A[j, i] >= 0``.
        background: see :class:`SymmetricWalk`.
        check: verify symmetry (randomised, two products) and non-negativity.

    Raises:
        ValueError: the matrix is not square, not symmetric or has negative weights.
    """
    adj = adjacency if sp.isspmatrix_csr(adjacency) and adjacency.dtype == np.float32 else sp.csr_matrix(adjacency, dtype=np.float32)
    if adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adjacency must be square, got {adj.shape}")
    if check and adj.nnz:
        if float(adj.data.min()) < 0:
            raise ValueError("adjacency has negative weights")
        if not _looks_symmetric(adj, np.random.default_rng(0)):
            raise ValueError("adjacency is not symmetric: use walk_matrix for a directed graph")
    degree = np.asarray(adj.sum(axis=1), dtype=np.float32).ravel()
    degree[degree <= 0] = 1.0
    if background is not None:
        background = np.asarray(background, dtype=np.float32)
        if background.shape != (adj.shape[0],) or float(background.min(initial=0.0)) < 0:
            raise ValueError("background must be a non-negative (n,) vector")
    return SymmetricWalk(adj, degree, (1.0 / degree).astype(np.float32), background)


def _start(walk: SymmetricWalk, t: np.ndarray, damping: float) -> tuple[np.ndarray, np.ndarray]:
    """Starting ``z`` and residual ``r = t - (D - aA) z`` for teleports ``t`` (n, q)."""
    u = walk.background
    if u is None or not float(u.sum()) > 0:
        return np.zeros_like(t), t.copy()
    if damping not in walk._prior:
        z_u, _ = conjugate_gradient(walk, u[:, None], damping, 1e-7, 200, use_background=False)
        walk._prior[damping] = z_u[:, 0]
    c = (u @ t) / float(u @ u)  # (q,) least-squares share of the background in each teleport
    return walk._prior[damping][:, None] * c, t - u[:, None] * c


def conjugate_gradient(walk: SymmetricWalk, t: np.ndarray, damping: float, tol: float, max_iter: int,
                       use_background: bool = True) -> tuple[np.ndarray, int]:
    """Solve ``(D - aA) Z = T`` column by column until the L1 error certificate is below ``tol``.

    Args:
        walk: the graph.
        t: (n, q) float32 non-negative teleports; all-zero columns give zero columns.
        damping: ``a`` in [0, 1).
        tol: bound on the L1 error of every normalised column ``y / sum(y)``, ``y = D z``.
        max_iter: cap on matrix products.
        use_background: start from the background solution when the walk has one.

    Returns:
        (Z, number of matrix products) with Z (n, q) float32.
    """
    d, dinv = walk.degree[:, None], walk.inv_degree[:, None]  # (n, 1)
    alpha = np.float32(damping)
    z, r = _start(walk, t, damping) if use_background else (np.zeros_like(t), t.copy())
    h = r * dinv
    p = h.copy()
    rh = np.einsum("ij,ij->j", r, h)  # (q,)
    tmp = np.empty_like(t)
    live = t.sum(axis=0) > 0  # (q,)
    products = 0
    for products in range(max_iter + 1):
        np.abs(r, out=tmp)
        err = tmp.sum(axis=0) / (1.0 - damping)  # (q,) bound on |y - y*|_1
        mass = np.einsum("ij,ij->j", z, np.broadcast_to(d, z.shape))  # (q,) sum(y)
        bound = np.divide(2.0 * err, mass - err, out=np.full_like(err, np.inf), where=mass > err)
        if products == max_iter or not np.any(live & (bound >= tol)):
            break
        ap = walk.adjacency @ p  # (n, n) @ (n, q)
        ap *= -alpha
        np.multiply(p, d, out=tmp)
        ap += tmp  # (D - aA) p
        pq = np.einsum("ij,ij->j", p, ap)
        step = np.divide(rh, pq, out=np.zeros_like(rh), where=pq > 0)
        z += p * step
        r -= ap * step
        np.multiply(r, dinv, out=h)
        rh_new = np.einsum("ij,ij->j", r, h)
        beta = np.divide(rh_new, rh, out=np.zeros_like(rh), where=rh > 0)
        p *= beta
        p += h
        rh = rh_new
    return z, products


def symmetric_pagerank(walk: SymmetricWalk, t: np.ndarray, damping: float, tol: float, max_iter: int) -> np.ndarray:
    """Normalised PageRank columns for float32 teleports ``t`` (n, q); zero columns stay zero."""
    z, _ = conjugate_gradient(walk, t, damping, tol, max_iter)
    z *= walk.degree[:, None]  # y = D z
    np.maximum(z, 0.0, out=z)  # the exact y is >= 0; clipping only moves entries towards it
    total = z.sum(axis=0, keepdims=True)
    return np.divide(z, total, out=np.zeros_like(z), where=total > 0)
