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


def nearest_cells(v: np.ndarray, centroids: np.ndarray, probes: int) -> np.ndarray:
    """(m, probes) indices of each vector's most similar centroids, in blocks."""
    out = np.empty((v.shape[0], probes), np.int64)
    step = max(1, (1 << 24) // max(len(centroids), 1))
    for s in range(0, v.shape[0], step):
        sims = v[s : s + step] @ centroids.T  # (step, cells)
        if probes == 1:
            out[s : s + step, 0] = np.argmax(sims, axis=1)
        elif probes >= centroids.shape[0]:
            out[s : s + step] = np.argsort(-sims, axis=1)[:, :probes]
        else:
            out[s : s + step] = np.argpartition(-sims, probes - 1, axis=1)[:, :probes]
    return out


def _nothing() -> None:
    return None


def gathered(v: np.ndarray, rows: np.ndarray, release: Callable[[], None] = _nothing) -> np.ndarray:
    """``v[rows]`` a block of rows at a time, calling ``release`` after each (``v`` may be a
    memory map whose pages the caller drops: see :mod:`.snapshot_vectors`)."""
    out = np.empty((len(rows), *v.shape[1:]), v.dtype)
    step = max(1, (1 << 24) // max(v.itemsize * int(np.prod(v.shape[1:])), 1))
    for s in range(0, len(rows), step):
        out[s : s + step] = v[rows[s : s + step]]
        release()
    return out


def spherical_kmeans(
    v: np.ndarray, cells: int, seed: int, rounds: int = 8, release: Callable[[], None] = _nothing
) -> np.ndarray:
    """(cells, d) unit centroids of spherical k-means on a sample of ``v`` (32 per cell)."""
    rng = np.random.default_rng(seed)
    sample = gathered(
        v, rng.choice(v.shape[0], min(v.shape[0], cells * 32), replace=False), release
    )
    centroids = sample[rng.choice(sample.shape[0], cells, replace=False)].copy()  # (cells, d)
    for _ in range(rounds):
        at = nearest_cells(sample, centroids, 1)[:, 0]  # (sample,)
        sums = np.zeros_like(centroids)
        np.add.at(sums, at, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)  # (cells, 1)
        empty = norms[:, 0] == 0
        centroids = np.where(
            empty[:, None], centroids, sums / np.where(empty, 1, norms[:, 0])[:, None]
        )
    return centroids.astype(np.float32)


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
    home = np.empty(n, np.int64)  # (n,)
    step = max(1, (1 << 24) // max(cells, 1))
    for s in range(0, n, step):
        home[s : s + step] = nearest_cells(vectors[s : s + step], centroids, 1)[:, 0]
        release()
    order = np.argsort(home, kind="stable")  # (n,) facts by cell, id order inside a cell
    bounds = np.searchsorted(home[order], np.arange(cells + 1)).astype(np.int64)  # (cells+1,)
    return FactCells(order, centroids, bounds)
