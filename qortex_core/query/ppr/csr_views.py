"""Row ranges and views of a CSR matrix that share its arrays (no copy of a memory-mapped graph)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def compressed_view(
    kind: type, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.spmatrix:
    """A CSR/CSC matrix over the given arrays without copying them.

    scipy's constructor copies index/data arrays that are slices of a much larger array
    (``prune``), which would duplicate a memory-mapped snapshot; setting the arrays on an
    empty matrix keeps the views. The caller guarantees a valid compressed layout.
    """
    out = kind(shape, dtype=np.float32)
    out.data, out.indices, out.indptr = data, indices, indptr
    return out


def row_blocks(adj: sp.csr_matrix, parts: int) -> list[tuple[int, int, sp.csr_matrix]]:
    """``parts`` row ranges with about equal non-zeros, as CSR views sharing ``adj``'s arrays."""
    n = adj.shape[0]
    cuts = np.searchsorted(adj.indptr, np.linspace(0, adj.nnz, parts + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    out = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        s, e = int(adj.indptr[lo]), int(adj.indptr[hi])
        out.append(
            (
                lo,
                hi,
                compressed_view(
                    sp.csr_matrix,
                    adj.data[s:e],
                    adj.indices[s:e],
                    adj.indptr[lo : hi + 1] - s,
                    (hi - lo, n),
                ),
            )
        )
    return out


def rows_listing(indptr: np.ndarray, indices: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(n_rows,) True for the CSR rows (``indptr``, ``indices``) that list a column ``mask``
    keeps: a gather and a scatter, no loop over rows."""
    n_rows = len(indptr) - 1
    rows = np.repeat(np.arange(n_rows), np.diff(indptr))  # (nnz,) row of each entry
    out = np.zeros(n_rows, bool)
    out[rows[mask[np.asarray(indices, np.int64)]]] = True
    return out
