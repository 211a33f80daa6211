"""The snapshot's fact index as a function of the fact set, so an incremental build equals a
full one.

Centroids are the vectors of the facts whose id hash falls below ``2**64 / cell_size`` (about
one fact in ``cell_size``; the least hash when none does), in hash order; every fact belongs to
its most similar centroid (:func:`nearest_cell`, exact: the cell size doubles as the facts
grow past :data:`~.cells.EXACT_CELLS` cells, :func:`cell_size`). Both depend only on the facts
(ids and vectors), never on the order they were stored in or on the builds before, so a build
that starts from the previous snapshot's cells (:func:`merged_cells`) gives what a full build
(:func:`full_cells`) gives:

- a kept fact keeps its cell unless its centroid is gone or a new centroid is about as similar
  (one pass over the base's fact vectors against the new centroids only, O(n d k_new));
- new and changed facts, and the members of a removed centroid's cell, are assigned afresh.

Facts are stored cell by cell, stored order within a cell (:class:`~.cells.FactCells`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from qortex_core.ingest.cells import EXACT_CELLS, FactCells, FactCellsConfig
from qortex_core.ingest.snapshot_tables import contiguous
from qortex_core.ingest.snapshot_vectors import release

LAYOUT = "sampled-ids/1"  # the manifest's name for this layout: a base of another is not merged
_TIE = 1e-4  # similarities closer than this are compared again in float64
_BLOCK = 1 << 16  # vectors compared at once
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _nothing() -> None:
    return None


def cell_size(n: int, config: FactCellsConfig) -> int:
    """The cell size of ``n`` facts: ``config.cell_size``, doubled until there are at most
    :data:`~.cells.EXACT_CELLS` cells (a fact is compared with every centroid; a size that
    changes lays the cells out anew, once per doubling of the facts)."""
    size = max(int(config.cell_size), 1)
    while n > size * EXACT_CELLS:
        size *= 2
    return size


def layout_of(n: int, config: FactCellsConfig) -> dict:
    """The manifest entry that says which layout and cell size the cells of ``n`` facts have."""
    return {"layout": LAYOUT, "cell_size": cell_size(n, config)}


def id_hashes(ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """(n,) uint64 hash of each id: its last 8 bytes (zero-padded) mixed by splitmix64."""
    strings = contiguous(ids) if isinstance(ids, pa.ChunkedArray) else ids
    strings = strings.cast(pa.string())
    n = len(strings)
    if n == 0:
        return np.zeros(0, np.uint64)
    _, offsets, data = strings.buffers()
    ends = np.frombuffer(offsets, np.int32)[strings.offset + 1 : strings.offset + n + 1]
    starts = np.frombuffer(offsets, np.int32)[strings.offset : strings.offset + n]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(1, np.uint8)
    width = int(ends[0] - starts[0])
    if width >= 8 and int(ends[-1] - starts[0]) == width * n and (ends - starts == width).all():
        body = raw[starts[0] : ends[-1]].reshape(n, width)  # (n, width): ids of one length
        key = np.ascontiguousarray(body[:, -8:]).view(">u8").ravel().astype(np.uint64)
    else:
        key = np.zeros(n, np.uint64)
        for k in range(8):  # byte k from the end, 0 past the start of a short id
            at = ends.astype(np.int64) - 1 - k
            byte = np.where(at >= starts, raw[np.maximum(at, 0)], 0).astype(np.uint64)
            key |= byte << np.uint64(8 * k)
    with np.errstate(over="ignore"):
        key = key + _MIX[0]
        key = (key ^ (key >> np.uint64(30))) * _MIX[1]
        key = (key ^ (key >> np.uint64(27))) * _MIX[2]
        return key ^ (key >> np.uint64(31))


def centroid_rows(hashes: np.ndarray, cell_size: int) -> np.ndarray:
    """Rows of the centroid facts, in hash order: hash below ``2**64 / cell_size``, or the
    least hash when no fact's is."""
    if len(hashes) == 0:
        return np.zeros(0, np.int64)
    bound = np.uint64((1 << 64) // max(int(cell_size), 1) - 1)
    rows = np.flatnonzero(hashes <= bound)
    if rows.size == 0:
        rows = np.array([int(np.argmin(hashes))])
    return rows[np.argsort(hashes[rows], kind="stable")].astype(np.int64)


def nearest_cell(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(m,) the most similar centroid of each vector (float32; rows whose best two are within
    :data:`_TIE` compared again in float64, so the answer does not depend on blocking)."""
    out = np.empty(len(vectors), np.int64)
    wide = centroids.astype(np.float64)
    for s in range(0, len(vectors), _BLOCK):
        block = np.asarray(vectors[s : s + _BLOCK], np.float32)
        sims = block @ centroids.T  # (b, cells)
        rows = np.arange(len(block))
        best = np.argmax(sims, axis=1)
        top = sims[rows, best]
        sims[rows, best] = -np.inf
        close = np.flatnonzero(top - sims.max(axis=1) < _TIE) if sims.shape[1] > 1 else rows[:0]
        if close.size:
            best[close] = np.argmax(block[close].astype(np.float64) @ wide.T, axis=1)
        out[s : s + len(block)] = best
    return out


def _cells(home: np.ndarray, centroids: np.ndarray) -> FactCells:
    order = np.argsort(home, kind="stable")  # (n,) facts by cell, stored order inside a cell
    bounds = np.searchsorted(home[order], np.arange(len(centroids) + 1)).astype(np.int64)
    return FactCells(order, centroids, bounds)


def full_cells(
    ids: pa.ChunkedArray,
    vectors: np.ndarray,
    config: FactCellsConfig,
    release: Callable[[], None] = _nothing,
) -> FactCells | None:
    """The cells of the facts ``ids`` with (n, d) ``vectors`` in stored order; None below
    ``config.min_facts``. ``release`` is called after each block read (a memory map's pages)."""
    n = len(ids)
    if n < max(config.min_facts, 2):
        return None
    rows = centroid_rows(id_hashes(ids), cell_size(n, config))
    centroids = np.asarray(vectors[rows], np.float32).copy()  # (cells, d)
    home = np.empty(n, np.int64)
    for s in range(0, n, _BLOCK):
        home[s : s + _BLOCK] = nearest_cell(vectors[s : s + _BLOCK], centroids)
        release()
    return _cells(home, centroids)


def merged_cells(
    ids: pa.ChunkedArray,
    base_row: np.ndarray,
    fresh: np.ndarray,
    base_ids: pa.ChunkedArray,
    base_vectors: np.ndarray,
    base_bounds: np.ndarray,
    config: FactCellsConfig,
    base_centroids: np.ndarray | None = None,
) -> FactCells:
    """The cells :func:`full_cells` would give, from the base snapshot's cells.

    Args:
        ids: (n,) the facts' ids in stored order.
        base_row: (n,) each fact's row in the base snapshot when its vector is the base's,
            else -1.
        fresh: (k, d) vectors of the facts with ``base_row == -1``, in stored order.
        base_ids, base_vectors, base_bounds: the base's fact ids and vectors (cell order) and
            its cell bounds (same layout and cell size).
        config: the fact index's configuration.
        base_centroids: the base's stored centroids (cell order), when it has them: a kept
            cell's centroid vector is taken from there, not from ``base_vectors``.
    """
    n, nb = len(ids), len(base_ids)
    kept = np.flatnonzero(base_row >= 0)  # (kept,) rows whose vector is the base's
    fresh_at = np.full(n, -1, np.int64)
    fresh_at[base_row < 0] = np.arange(int((base_row < 0).sum()))

    def vectors_of(rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), base_vectors.shape[1]), np.float32)
        old = base_row[rows] >= 0
        out[old] = base_vectors[base_row[rows][old]]
        out[~old] = fresh[fresh_at[rows[~old]]]
        return out

    size = cell_size(n, config)  # the base's too (the caller compared the layouts)
    rows = centroid_rows(id_hashes(ids), size)  # (cells,) current centroids
    cell_of_row = np.full(n, -1, np.int64)
    cell_of_row[rows] = np.arange(len(rows))
    current_of_base = np.full(nb, -1, np.int64)
    current_of_base[base_row[kept]] = kept
    old_rows = centroid_rows(id_hashes(base_ids), size)  # base rows, in cell order
    moved = current_of_base[old_rows]
    old_to_new = np.where(moved >= 0, cell_of_row[np.maximum(moved, 0)], -1)  # (old cells,)
    centroids = _centroid_vectors(rows, old_to_new, base_centroids, vectors_of)
    base_cell = np.repeat(np.arange(len(base_bounds) - 1), np.diff(base_bounds))  # (nb,)
    home = np.full(n, -1, np.int64)
    home[kept] = old_to_new[base_cell[base_row[kept]]]
    added = np.setdiff1d(np.arange(len(rows)), old_to_new[old_to_new >= 0])  # new centroids
    redo = home < 0  # new and changed facts, members of removed cells
    if added.size:
        _near_new(base_vectors, current_of_base, home, centroids, added, redo)
    at = np.flatnonzero(redo)
    if at.size:
        home[at] = nearest_cell(vectors_of(at), centroids)
    return _cells(home, centroids)


def _centroid_vectors(
    rows: np.ndarray,
    old_to_new: np.ndarray,
    base_centroids: np.ndarray | None,
    vectors_of: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """(cells, d) the vectors of the centroid facts ``rows``: a kept cell's from the base's
    stored centroids (the same fact's vector, stored in cell order: no scattered read of the
    base's fact vectors), a new cell's by ``vectors_of``."""
    if base_centroids is None or len(base_centroids) != len(old_to_new):
        return vectors_of(rows)
    out = np.empty((len(rows), base_centroids.shape[1]), np.float32)
    have = np.zeros(len(rows), bool)
    old = np.flatnonzero(old_to_new >= 0)  # (kept cells,) their old index
    out[old_to_new[old]] = base_centroids[old]
    have[old_to_new[old]] = True
    missing = np.flatnonzero(~have)  # (new cells,)
    if missing.size:
        out[missing] = vectors_of(rows[missing])
    return out


def _near_new(
    base_vectors: np.ndarray,
    current_of_base: np.ndarray,
    home: np.ndarray,
    centroids: np.ndarray,
    added: np.ndarray,
    redo: np.ndarray,
) -> None:
    """Mark in ``redo`` the kept facts that a new centroid (``added``) is about as similar to as
    their own: one sequential pass over the base's vectors."""
    fresh = centroids[added]  # (k_new, d)
    for s in range(0, len(base_vectors), _BLOCK):
        current = current_of_base[s : s + _BLOCK]
        live = np.flatnonzero(current >= 0)
        live = live[home[current[live]] >= 0]
        if live.size == 0:
            continue
        v = np.asarray(base_vectors[s : s + _BLOCK], np.float32)[live]
        own = np.einsum("ij,ij->i", v, centroids[home[current[live]]])
        near = (v @ fresh.T).max(axis=1) >= own - 2 * _TIE
        redo[current[live[near]]] = True
        release(base_vectors)  # one block of the base's file resident at a time
