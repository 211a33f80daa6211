"""Compiled kernels of the synonym and cell searches (numba): the scan of a block of
similarities for the pairs above a threshold, and the count of the letters and digits of
each concept name (the synonym search's eligibility).

``np.nonzero(sims >= threshold)`` makes a boolean copy of the block and then walks it a second
time at a few nanoseconds an element; at 1M passages the synonym search scans ~20 G
similarities, most of its time. Here one pass counts the hits and one writes them, in the same
row-major order ``np.nonzero`` gives. Imported only when a synonym search runs.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _count(sims, threshold):  # pragma: no cover - compiled
    count = 0
    for i in range(sims.shape[0]):
        row = sims[i]
        for j in range(row.shape[0]):
            count += row[j] >= threshold
    return count


@numba.njit(nogil=True, cache=True)
def _fill(sims, threshold, r, c, w):  # pragma: no cover - compiled
    k = 0
    for i in range(sims.shape[0]):
        row = sims[i]
        for j in range(row.shape[0]):
            if row[j] >= threshold:
                r[k] = i
                c[k] = j
                w[k] = row[j]
                k += 1


@numba.njit(nogil=True, cache=True)
def _clear_lower(sims):  # pragma: no cover - compiled
    for i in range(min(sims.shape[0], sims.shape[1])):
        sims[i, : i + 1] = -np.inf


def above(
    sims: np.ndarray, threshold: float, upper: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns (int64) and values (float32) of the entries of the (rows, cols) float32
    block ``sims`` at or above ``threshold``, row-major: ``np.nonzero(sims >= threshold)`` and
    ``sims[r, c]``. With ``upper`` only entries right of the diagonal count (``c > r``; those
    left of it are overwritten): the block is a band of rows of a symmetric product.

    Few rows hold a pair: numpy's vectorised row maxima (~0.2 ns an entry) pick them, and the
    compiled count and fill (~0.6 ns an entry each) scan only those."""
    sims = np.ascontiguousarray(sims, dtype=np.float32)
    if upper:
        _clear_lower(sims)
    t = np.float32(threshold)
    rows = np.flatnonzero(sims.max(axis=1, initial=-np.inf) >= t)  # (hit rows,)
    some = sims[rows]  # (hit rows, cols)
    n = _count(some, t)
    r, c = np.empty(n, np.int64), np.empty(n, np.int64)
    w = np.empty(n, np.float32)
    if n:
        _fill(some, t, r, c, w)
    return rows[r], c, w


@numba.njit(nogil=True, cache=True)
def count_listed(data, offsets, listed, out):  # pragma: no cover - compiled
    """``out[i]``: how many bytes of ``data[offsets[i]:offsets[i + 1]]`` ``listed`` (a (256,)
    bool table) marks."""
    for i in range(out.size):
        n = 0
        for j in range(offsets[i], offsets[i + 1]):
            n += listed[data[j]]
        out[i] = n
