"""Compiled loops of the conjugate-gradient PageRank (numba), one pass over memory each.

The numpy solve in :mod:`qortex_core.query.ppr.cg` spends about half of a small graph's query
in a dozen whole-vector numpy operations per step (each a separate pass, each allocating or
writing a temporary) and the rest in scipy's sparse product. Here one step is three passes:

1. :func:`product_pass`: ``ap = (D - aA) p`` row by row, and ``p . ap`` on the way;
2. :func:`update_pass`: ``z += s p``, ``r -= s ap``, ``h = r / d``, and the sums the stopping
   certificate needs (``r . h``, ``|r|_1``, ``1^T r``, ``1^T (D z + r)``, its negative part);
3. :func:`direction_pass`: ``p = h + b p``.

Each kernel works on a row range ``[lo, hi)`` whose ends are multiples of :data:`CHUNK` (or
``n``) and writes the sums of every chunk of rows to its row of ``partial``, so a caller may split
a pass over threads (every kernel releases the GIL) and still add the same numbers in the same
order: the result does not depend on the number of threads. Index arrays are read as unsigned
integers and rows are counted unsigned: numba then skips the negative-index wrap-around test
on every access, which is what lets LLVM vectorise the vector passes and makes the product faster
than scipy's. Reductions are accumulated in float64.

Only :mod:`qortex_core.query.ppr.fused` imports this module, and only when a solve runs, so
importing the library does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np

CHUNK = 1 << 14  # rows per partial sum
_compiled = numba.njit(
    nogil=True, cache=True, fastmath={"reassoc", "contract"}, error_model="numpy"
)  # reassociation lets LLVM vectorise the sums; "numpy": no ZeroDivisionError checks


@_compiled
def product_pass(indptr, indices, data, p, d, alpha, ap, lo, hi, partial):  # pragma: no cover
    """``ap_i = d_i p_i - alpha (A p)_i`` for rows ``lo <= i < hi``, and ``partial[c, 0]`` =
    ``sum p_i ap_i`` over each chunk ``c``. ``indptr`` and ``indices`` are unsigned views."""
    for c0 in range(lo, hi, CHUNK):
        pq = 0.0
        for i in range(np.uint64(c0), np.uint64(min(c0 + CHUNK, hi))):
            s = np.float32(0.0)
            k = np.uint64(indptr[i])
            end = np.uint64(indptr[i + 1])
            while k < end:
                s += data[k] * p[indices[k]]
                k += np.uint64(1)
            v = d[i] * p[i] - alpha * s
            ap[i] = v
            pq += np.float64(p[i]) * np.float64(v)
        partial[c0 // CHUNK, 0] = pq


@_compiled
def combine_pass(ap, p, d, alpha, lo, hi, partial):  # pragma: no cover - compiled
    """``ap_i = d_i p_i - alpha ap_i`` (``ap`` holds ``A p``); ``partial[c, 0] = sum p_i ap_i``."""
    for c0 in range(lo, hi, CHUNK):
        pq = 0.0
        for i in range(np.uint64(c0), np.uint64(min(c0 + CHUNK, hi))):
            v = d[i] * p[i] - alpha * ap[i]
            ap[i] = v
            pq += np.float64(p[i]) * np.float64(v)
        partial[c0 // CHUNK, 0] = pq


@_compiled
def update_pass(z, r, h, p, ap, step, d, dinv, lo, hi, partial):  # pragma: no cover - compiled
    """One CG update of rows ``lo:hi``: ``z += s p``, ``r -= s ap``, ``h = r / d``.

    ``partial[c]`` gets ``(r . h, |r|_1, 1^T r, 1^T y, 1^T min(y, 0))`` of chunk ``c`` after the
    update, with ``y = D z + r``: the sums of the stopping certificate.
    """
    for c0 in range(lo, hi, CHUNK):
        rh = 0.0
        r_abs = 0.0
        r_sum = 0.0
        y_sum = 0.0
        y_neg = 0.0
        for i in range(np.uint64(c0), np.uint64(min(c0 + CHUNK, hi))):
            zi = z[i] + step * p[i]
            ri = r[i] - step * ap[i]
            hi_ = ri * dinv[i]
            z[i] = zi
            r[i] = ri
            h[i] = hi_
            rh += np.float64(ri) * np.float64(hi_)
            r_abs += abs(ri)
            r_sum += ri
            y = d[i] * zi + ri
            y_sum += y
            y_neg += min(y, np.float32(0.0))
        c = c0 // CHUNK
        partial[c, 0] = rh
        partial[c, 1] = r_abs
        partial[c, 2] = r_sum
        partial[c, 3] = y_sum
        partial[c, 4] = y_neg


@_compiled
def start_pass(prior, u, t, c, d, dinv, z, r, h, p, lo, hi, partial):  # pragma: no cover
    """``z = c prior``, ``r = t - c u``, ``h = p = r / d`` on rows ``lo:hi``; the sums of
    :func:`update_pass` in ``partial``."""
    for c0 in range(lo, hi, CHUNK):
        rh = 0.0
        r_abs = 0.0
        r_sum = 0.0
        y_sum = 0.0
        y_neg = 0.0
        for i in range(np.uint64(c0), np.uint64(min(c0 + CHUNK, hi))):
            zi = c * prior[i]
            ri = t[i] - c * u[i]
            hi_ = ri * dinv[i]
            z[i] = zi
            r[i] = ri
            h[i] = hi_
            p[i] = hi_
            rh += np.float64(ri) * np.float64(hi_)
            r_abs += abs(ri)
            r_sum += ri
            y = d[i] * zi + ri
            y_sum += y
            y_neg += min(y, np.float32(0.0))
        k = c0 // CHUNK
        partial[k, 0] = rh
        partial[k, 1] = r_abs
        partial[k, 2] = r_sum
        partial[k, 3] = y_sum
        partial[k, 4] = y_neg


@_compiled
def direction_pass(p, h, beta, lo, hi, partial):  # pragma: no cover - compiled
    """``p = h + beta p`` on rows ``lo:hi`` (``partial`` is unused: one signature for all)."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        p[i] = h[i] + beta * p[i]


@_compiled
def finish_pass(z, r, d, dinv, lo, hi, partial):  # pragma: no cover - compiled
    """``z = max(D (z + r / d), 0)``, the corrected and clipped ``y = D z + r``;
    ``partial[c, 0] = sum y`` over chunk ``c``."""
    for c0 in range(lo, hi, CHUNK):
        total = 0.0
        for i in range(np.uint64(c0), np.uint64(min(c0 + CHUNK, hi))):
            y = max(d[i] * (z[i] + r[i] * dinv[i]), np.float32(0.0))
            z[i] = y
            total += y
        partial[c0 // CHUNK, 0] = total


@_compiled
def scatter_pass(indptr, indices, data, x, rows, lo, hi, out):  # pragma: no cover - compiled
    """``out = A x`` for an ``x`` that is zero but on rows ``lo:hi`` and ``rows``.

    By symmetry ``A x = sum_j x_j A[j, :]``: only those rows of ``A`` are read.
    """
    for i in range(out.size):
        out[i] = np.float32(0.0)
    for j in range(np.uint64(lo), np.uint64(hi)):
        _scatter_row(indptr, indices, data, x[j], j, out)
    for j in rows:
        _scatter_row(indptr, indices, data, x[j], j, out)


@_compiled
def _scatter_row(indptr, indices, data, xj, j, out):  # pragma: no cover - compiled
    """``out += xj A[j, :]``."""
    k = np.uint64(indptr[j])
    end = np.uint64(indptr[j + 1])
    while k < end:
        out[indices[k]] += data[k] * xj
        k += np.uint64(1)
