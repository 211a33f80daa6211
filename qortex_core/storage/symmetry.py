"""What the symmetric PageRank needs to know of an adjacency before trusting it: that it is
symmetric and non-negative, and its weighted degrees. A snapshot's builder runs both once and
stores the degrees, so a retriever opening the snapshot reads neither the check nor the sums
from the (memory-mapped) adjacency."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def looks_symmetric(adj: sp.csr_matrix, rng: np.random.Generator) -> bool:
    """Probabilistic test ``u^T A v == v^T A u`` with random u, v.

    Two products, no transpose copy.
    """
    u, v = rng.random(adj.shape[0]).astype(np.float32), rng.random(adj.shape[0]).astype(np.float32)
    left, right = float(u @ (adj @ v)), float(v @ (adj @ u))
    return abs(left - right) <= 1e-4 * max(abs(left), abs(right), 1e-30)


def weighted_degree(adjacency: sp.csr_matrix) -> np.ndarray:
    """(n,) float32 row sums of a float32 CSR adjacency, its weighted degrees (a new array)."""
    return np.asarray(adjacency.sum(axis=1), dtype=np.float32).ravel()


def check_symmetric(adjacency: sp.csr_matrix) -> None:
    """Refuse a float32 CSR adjacency with negative weights or that is not symmetric
    (randomised, two products, no transposed copy).

    Raises:
        ValueError: negative weights, or not symmetric.
    """
    if not adjacency.nnz:
        return
    if float(adjacency.data.min()) < 0:
        raise ValueError("adjacency has negative weights")
    if not looks_symmetric(adjacency, np.random.default_rng(0)):
        raise ValueError("adjacency is not symmetric: use walk_matrix for a directed graph")
