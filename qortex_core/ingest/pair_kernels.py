"""Compiled scan of a block of similarities for the pairs above a threshold (numba).

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


def above(sims: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns (int64) and values (float32) of the entries of the (rows, cols) float32
    block ``sims`` at or above ``threshold``, row-major: ``np.nonzero(sims >= threshold)`` and
    ``sims[r, c]``."""
    sims = np.ascontiguousarray(sims, dtype=np.float32)
    t = np.float32(threshold)
    n = _count(sims, t)
    r, c = np.empty(n, np.int64), np.empty(n, np.int64)
    w = np.empty(n, np.float32)
    if n:
        _fill(sims, t, r, c, w)
    return r, c, w
