"""Cells over unit vectors: the inverted-file layout of the synonym search
(:mod:`.synonym_layout`) and of the snapshot's fact index (:mod:`.snapshot_cells`), which pick
their centroids; here the nearest-centroid search and the fact index's types.

A cell is a centroid; a vector belongs to the cell whose centroid is most similar. Searching
only the few cells nearest a query touches a small share of the vectors; on vectors with cluster
structure (a language model's) the nearest vectors almost always lie in those cells, on vectors
without any (random directions) far less often.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_ARGMAX_PROBES = 8  # up to this many probes, one argmax pass per probe beats argpartition
_BLOCK_FLOATS = 1 << 21  # similarities per block (8 MB): 64 MB blocks ran 1.6x slower


def nearest_cells(v: np.ndarray, centroids: np.ndarray, probes: int) -> np.ndarray:
    """(m, probes) indices of each vector's most similar centroids, best first, in blocks.

    A few probes take one ``argmax`` pass each over the block's similarities (the best so far
    masked), ~50x faster than an ``argpartition`` of every row (which sorts what it selects
    and copies the negated block first)."""
    out = np.empty((v.shape[0], probes), np.int64)
    step = max(1, _BLOCK_FLOATS // max(len(centroids), 1))
    for s in range(0, v.shape[0], step):
        sims = v[s : s + step] @ centroids.T  # (step, cells)
        if probes >= centroids.shape[0]:
            out[s : s + step] = np.argsort(-sims, axis=1)[:, :probes]
        elif probes <= _ARGMAX_PROBES:
            rows = np.arange(sims.shape[0])
            for p in range(probes):
                best = np.argmax(sims, axis=1)  # (step,)
                out[s : s + step, p] = best
                sims[rows, best] = -np.inf
        else:
            top = np.argpartition(-sims, probes - 1, axis=1)[:, :probes]
            rank = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1, kind="stable")
            out[s : s + step] = np.take_along_axis(top, rank, axis=1)
    return out


def members_of(nearest: np.ndarray, cells: int) -> list[np.ndarray]:
    """Each cell's member rows, ascending, from the (m, probes) cell ids of m rows (as
    :func:`nearest_cells` gives them: a row lists a cell at most once)."""
    flat = nearest.reshape(-1)  # (m*probes,)
    order = np.argsort(flat, kind="stable")
    rows = order // nearest.shape[1]  # (m*probes,) row of each entry, grouped by cell
    bounds = np.searchsorted(flat[order], np.arange(cells + 1))  # (cells+1,)
    return [rows[bounds[c] : bounds[c + 1]] for c in range(cells)]


EXACT_CELLS = 4096  # up to this many centroids a vector is compared with every one


@dataclass(frozen=True)
class FactCellsConfig:
    """The snapshot's fact index.

    Attributes:
        min_facts: below this many facts a query scans every fact vector (exact, and a scan
            of 200,000 x 384 floats takes ~15 ms); at or above it the snapshot stores the facts
            sorted by cell with the cells' centroids, and a query scores only the facts of its
            nearest cells (``RetrievalConfig.fact_probes``).
        cell_size: target facts per cell.
        seed: part of the layout's settings (the sampled centroids do not use it).
    """

    min_facts: int = 200_000
    cell_size: int = 1024
    seed: int = 0


@dataclass(frozen=True)
class FactCells:
    """Facts grouped by cell: ``order`` (n_facts,) lists the facts cell by cell, cell ``c``
    holding ``order[bounds[c]:bounds[c + 1]]``; ``centroids`` (cells, d)."""

    order: np.ndarray
    centroids: np.ndarray
    bounds: np.ndarray
