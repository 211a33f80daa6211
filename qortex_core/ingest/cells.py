"""Spherical k-means cells over unit vectors: the inverted-file layout of the synonym search
(:mod:`.synonyms`) and of the snapshot's fact index (:func:`fact_cells`).

A cell is a centroid; a vector belongs to the cell whose centroid is most similar. Searching
only the few cells nearest a query touches a small share of the vectors; on vectors with cluster
structure (a language model's) the nearest vectors almost always lie in those cells, on vectors
without any (random directions) far less often.
"""

from __future__ import annotations

from collections.abc import Callable
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


FAULT_AROUND = 64 << 10  # bytes a read fault maps in a file mapping (Linux's default)


def _nothing() -> None:
    return None


def gathered(v: np.ndarray, rows: np.ndarray, release: Callable[[], None] = _nothing) -> np.ndarray:
    """``v[rows]`` a block of rows at a time, calling ``release`` after each (``v`` may be a
    memory map whose pages the caller drops: see :mod:`.snapshot_vectors`)."""
    out = np.empty((len(rows), *v.shape[1:]), v.dtype)
    # a page fault on a file map maps up to 64 kB around it (the kernel's fault-around): a
    # random row costs that much resident memory until released, whatever its own size
    step = max(1, (1 << 24) // max(v.itemsize * int(np.prod(v.shape[1:])), FAULT_AROUND))
    for s in range(0, len(rows), step):
        out[s : s + step] = v[rows[s : s + step]]
        release()
    return out


def spherical_kmeans(
    v: np.ndarray,
    cells: int,
    seed: int,
    rounds: int = 8,
    release: Callable[[], None] = _nothing,
    exact: bool = False,
) -> np.ndarray:
    """(cells, d) unit centroids of spherical k-means on a sample of ``v`` (32 per cell).

    Each round assigns the sample with :class:`CellSearch` (two-level above ``EXACT_CELLS``
    centroids), or with every centroid when ``exact``.
    """
    from qortex_core.ingest.pair_kernels import add_rows

    rng = np.random.default_rng(seed)
    sample = gathered(
        v, rng.choice(v.shape[0], min(v.shape[0], cells * 32), replace=False), release
    )
    centroids = sample[rng.choice(sample.shape[0], cells, replace=False)].copy()  # (cells, d)
    for _ in range(rounds):
        search = CellSearch(centroids, None, ()) if exact else CellSearch.of(centroids, seed)
        at = search.nearest(sample, 1)[:, 0]  # (sample,)
        sums = np.zeros_like(centroids)
        add_rows(sums, at, sample)  # (cells, d) += each sample row at its cell
        norms = np.linalg.norm(sums, axis=1, keepdims=True)  # (cells, 1)
        empty = norms[:, 0] == 0
        centroids = np.where(
            empty[:, None], centroids, sums / np.where(empty, 1, norms[:, 0])[:, None]
        )
    return centroids.astype(np.float32)


EXACT_CELLS = 4096  # up to this many centroids a vector is compared with every one
GROUPS_PER_CELL = 4  # above, each centroid is listed in its 4 most similar groups


@dataclass(frozen=True)
class CellSearch:
    """Each vector's most similar centroids, in time that grows with the square root of the
    number of centroids rather than with it.

    Up to :data:`EXACT_CELLS` centroids the search is exact (:func:`nearest_cells`). Above, the
    centroids are themselves grouped by spherical k-means into about ``sqrt(cells)`` groups, and
    each centroid is listed in its :data:`GROUPS_PER_CELL` most similar groups; a vector is
    compared with the group centroids, then only with the centroids listed in its most similar
    group (about ``4 sqrt(cells)`` comparisons in all). With ``cells`` proportional to the number
    of vectors (a fixed cell size) an exact assignment is quadratic in the corpus; this is
    ``n^1.5``. A vector may land in a cell that is not its most similar one (on clustered test
    vectors 2-4 % do); an inverted file stays correct (a vector is stored once, in the cell it
    was given), only a little less selective.

    Build with :meth:`of`.
    """

    centroids: np.ndarray  # (cells, d)
    coarse: np.ndarray | None  # (groups, d), None: exact
    candidates: tuple[np.ndarray, ...]  # per group: the cells listed in it

    @classmethod
    def of(cls, centroids: np.ndarray, seed: int = 0) -> CellSearch:
        cells = len(centroids)
        if cells <= EXACT_CELLS:
            return cls(centroids, None, ())
        groups = int(np.ceil(np.sqrt(cells)))
        coarse = spherical_kmeans(centroids, groups, seed)  # (groups, d)
        listed = nearest_cells(centroids, coarse, min(GROUPS_PER_CELL, groups))  # (cells, m)
        return cls(centroids, coarse, tuple(members_of(listed, groups)))

    def nearest(self, v: np.ndarray, probes: int) -> np.ndarray:
        """(m, probes) indices of each vector's most similar centroids, best first (as
        :func:`nearest_cells`)."""
        if self.coarse is None:
            return nearest_cells(v, self.centroids, probes)
        top = nearest_cells(v, self.coarse, 1)  # (m, 1) each vector's group
        out = np.empty((v.shape[0], probes), np.int64)
        for g, rows in enumerate(members_of(top, len(self.coarse))):
            if rows.size == 0:
                continue
            cand = self.candidates[g]
            if cand.size < probes:  # too few candidates: compare with every centroid
                out[rows] = nearest_cells(v[rows], self.centroids, probes)
                continue
            out[rows] = cand[nearest_cells(v[rows], self.centroids[cand], probes)]
        return out


@dataclass(frozen=True)
class FactCellsConfig:
    """The snapshot's fact index.

    Attributes:
        min_facts: below this many facts a query scans every fact vector (exact, and a scan
            of 200,000 x 384 floats takes ~15 ms); at or above it the snapshot stores the facts
            sorted by cell with the cells' centroids, and a query scores only the facts of its
            nearest cells (``RetrievalConfig.fact_probes``).
        cell_size: target facts per cell.
        seed: k-means sample and initialisation seed.
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


def fact_cells(
    vectors: np.ndarray, config: FactCellsConfig, release: Callable[[], None] = _nothing
) -> FactCells | None:
    """The cells of (n_facts, d) unit fact vectors; None below ``config.min_facts``.

    ``release`` is called after each block of vectors read (see :func:`gathered`).
    """
    n = vectors.shape[0]
    if n < max(config.min_facts, 2):
        return None
    cells = max(1, n // max(config.cell_size, 1))
    centroids = spherical_kmeans(vectors, cells, config.seed, release=release)  # (cells, d)
    search = CellSearch.of(centroids, config.seed)
    home = np.empty(n, np.int64)  # (n,)
    step = max(1, (1 << 24) // max(cells, 1)) if search.coarse is None else 1 << 18
    for s in range(0, n, step):
        home[s : s + step] = search.nearest(vectors[s : s + step], 1)[:, 0]
        release()
    order = np.argsort(home, kind="stable")  # (n,) facts by cell, id order inside a cell
    bounds = np.searchsorted(home[order], np.arange(cells + 1)).astype(np.int64)  # (cells+1,)
    return FactCells(order, centroids, bounds)
