"""The synonym edges of a changed concept set, recomputed only where the change reaches.

A full build keeps, for each eligible concept ``i``, its directed top-k ``T(i)`` among its
candidates ``N(i)``: the members of its cells (:mod:`.synonym_layout`) at cosine >= threshold;
an edge is a pair with ``j`` in ``T(i)`` or ``i`` in ``T(j)``. The layout is a function of the
concept set, so after a change:

1. cells: the new and changed concepts are assigned; a kept concept is assigned again when one
   of its cells lost its centroid, or when a new centroid is at least as similar as its worst
   cell (one pass of every vector against the few new centroids); it is *moved* if its cells
   differ.
2. ``N(i)`` changes only for the new, changed and moved concepts ``D``, for the members of
   their cells within the threshold (``N`` is symmetric: those are ``N(j)`` for ``j`` in
   ``D``), and for the concepts that had an edge with a removed, changed or moved one (a
   candidate that left ``N(i)`` changes ``T(i)`` only if it was in it). Those are the
   *affected* rows ``A``: their ``T`` is recomputed.
3. every stored edge with an end in ``A`` is dropped; the new ones are ``T(i)`` for ``i`` in
   ``A``, and the pairs ``(j, i)``, ``i`` in ``A``, of the rows ``B`` that had an edge with
   ``A`` (their ``T`` did not change, but it is recomputed to see which of them points into
   ``A``). An edge between two rows outside ``A`` stands as it was.

Every step is the full build's function of the same vectors, so the edges are its edges (the
cosines to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.cells import members_of
from qortex_core.ingest.synonym_layout import NO_CELL, Layout, cell_positions, some_cell_members
from qortex_core.ingest.synonyms import eligible_mask
from qortex_core.storage import id_keys

_BLOCK_FLOATS = 1 << 24  # similarities held at once (64 MB)
_WORST_SLACK = 1e-5  # a new centroid this close to a concept's worst cell: assign it again

_Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]


def _rows_per_block(width: int) -> int:
    """Rows of ``width`` floats that make one block of :data:`_BLOCK_FLOATS` (at least one)."""
    return max(1, _BLOCK_FLOATS // max(width, 1))


def padded_cells(lists: pa.ChunkedArray | pa.Array, probes: int) -> np.ndarray:
    """(n, probes) int64 cell keys from a list column (short lists padded with ``NO_CELL``)."""
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    if values.size == len(lengths) * probes and np.all(lengths == probes):  # every list full
        return values.reshape(len(lengths), probes)
    out = np.full((len(lengths), probes), NO_CELL, np.int64)
    if values.size:
        row = np.repeat(np.arange(len(lengths)), lengths)
        slot = np.arange(values.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        keep = slot < probes
        out[row[keep], slot[keep]] = values[keep]
    return out


def _near_new_centroids(
    v: np.ndarray, cells: np.ndarray, layout: Layout, added: np.ndarray
) -> np.ndarray:
    """(m,) bool: rows a new centroid (positions ``added``) is at least about as similar to as
    their worst cell."""
    worst_at = np.searchsorted(layout.keys, cells[:, -1]).clip(0, len(layout.keys) - 1)
    worst = np.empty(v.shape[0], np.float32)  # (m,) by blocks: the gathered centroids of
    # every row at once would be another copy of the vectors (1.3 GB at 1M passages)
    rows = _rows_per_block(v.shape[1])
    for s in range(0, v.shape[0], rows):
        at = layout.centroids[worst_at[s : s + rows]]  # (rows, d)
        worst[s : s + rows] = np.einsum("nd,nd->n", v[s : s + rows], at)
    best = np.full(v.shape[0], -np.inf, np.float32)
    new = layout.centroids[added].T  # (d, a)
    step = _rows_per_block(added.size)
    for s in range(0, v.shape[0], step):
        best[s : s + step] = (v[s : s + step] @ new).max(axis=1)
    return best >= worst - _WORST_SLACK


def reassign(
    layout: Layout,
    v: np.ndarray,
    keys: np.ndarray,
    cells: np.ndarray,
    fresh: np.ndarray,
    removed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Every eligible concept's cells under ``layout``, from the stored ones.

    Args:
        layout: the layout of the current concepts.
        v: (m, d) their vectors; keys: (m,) their keys.
        cells: (m, probes) stored cell keys (rows of ``fresh`` concepts: anything).
        fresh: (m,) bool, new or changed concepts.
        removed: keys of the concepts gone or changed (cells they centred are gone).

    Returns:
        the (m, probes) cells, and the rows of kept concepts whose cells changed.
    """
    if not layout.keys.size:  # exact: one cell of everyone
        return np.full((v.shape[0], 1), NO_CELL, np.int64), np.zeros(0, np.int64)
    need = fresh | np.isin(cells, removed).any(axis=1) | (cells == NO_CELL).any(axis=1)
    added = np.flatnonzero(np.isin(layout.keys, keys[fresh]))  # centroids new or changed
    if added.size:
        need |= _near_new_centroids(v, cells, layout, added) & ~need
    rows = np.flatnonzero(need)
    out = cells.copy()
    if rows.size:
        out[rows] = layout.assign(v[rows])
    old, new = np.sort(cells[rows], axis=1), np.sort(out[rows], axis=1)
    moved = rows[~fresh[rows] & (old != new).any(axis=1)]
    return out, moved


def candidates(
    v: np.ndarray, cells: np.ndarray, layout: Layout, rows: np.ndarray, threshold: float
) -> _Pairs:
    """Directed pairs (i, j, cosine) of each of ``rows`` with the members of its cells (of
    ``cells``, every concept's) at cosine >= threshold (self excluded), each once."""
    from qortex_core.ingest.pair_kernels import above

    count = max(len(layout.keys), 1)
    pos = cell_positions(cells[rows], layout)  # (rows, probes)
    asked = members_of(pos, count + 1)[:count]  # each cell's rows among ``rows``
    wanted = np.array([c for c, at in enumerate(asked) if at.size], np.int64)  # (w,)
    parts = [(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))]
    for cell, cols in zip(wanted.tolist(), some_cell_members(cells, layout, wanted)):
        q = rows[asked[cell]]
        against = np.ascontiguousarray(v[cols].T)  # (d, size)
        step = _rows_per_block(cols.size)
        for s in range(0, q.size, step):
            r, c, w = above(v[q[s : s + step]] @ against, threshold)
            a, b = q[s : s + step][r], cols[c]
            parts.append((a[a != b], b[a != b], w[a != b]))
    r, c, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
    _, first = np.unique(r * v.shape[0] + c, return_index=True)
    return r[first], c[first], w[first]


def other_ends(edges: pa.Table, ids: pa.Array) -> pa.Array:
    """Ids at the other end of the stored edges with an end in ``ids``."""
    a_in = pa.array(id_keys.is_in(edges["a"], ids))
    b_in = pa.array(id_keys.is_in(edges["b"], ids))
    both = pa.chunked_array(
        edges["b"].filter(a_in).chunks + edges["a"].filter(b_in).chunks, pa.string()
    )
    return pc.unique(both) if len(both) else pa.array([], pa.string())


@dataclass(frozen=True)
class Eligible:
    """The eligible concepts: their rows in the concepts table, vectors, keys and ids."""

    rows: np.ndarray
    vectors: np.ndarray
    keys: np.ndarray
    ids: pa.Array

    def at(self, ids: pa.Array) -> np.ndarray:
        """Positions of the eligible concepts among ``ids`` (others skipped)."""
        pos = id_keys.index_in(ids, self.ids)  # (len(ids),) -1: not eligible
        return pos[pos >= 0]


def eligible(
    ids: pa.ChunkedArray,
    names: pa.ChunkedArray,
    vectors: np.ndarray,
    keys: np.ndarray,
    min_chars: int,
    in_place: bool = False,
) -> Eligible:
    """The eligible ones of the concepts ``ids`` (in table order). ``in_place``: the caller
    hands ``vectors`` over (C-ordered): the eligible rows are moved to its front, and it is
    not to be read after."""
    rows = np.flatnonzero(eligible_mask(names, min_chars))
    if len(rows) == len(vectors):  # every concept: the arrays as they are, not copied
        return Eligible(rows, np.ascontiguousarray(vectors), keys, ids.combine_chunks())
    chosen = ids.take(pa.array(rows, pa.int64())).combine_chunks()
    if in_place and vectors.flags.c_contiguous and vectors.flags.writeable:
        return Eligible(rows, _to_front(vectors, rows), keys[rows], chosen)
    return Eligible(rows, np.ascontiguousarray(vectors[rows]), keys[rows], chosen)


def _to_front(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``vectors[rows]`` in ``vectors``' own first ``len(rows)`` rows (``rows`` ascending, so
    row ``rows[i] >= i``: a block only overwrites rows that earlier blocks already read)."""
    step = _rows_per_block(vectors.shape[1])
    for s in range(0, len(rows), step):
        part = rows[s : s + step]
        vectors[s : s + len(part)] = vectors[part]  # the gather copies first
    return vectors[: len(rows)]


@dataclass(frozen=True)
class EdgeUpdate:
    """The edges to drop and to add, in rows of the eligible concepts.

    Attributes:
        affected: rows whose edges are dropped and recomputed.
        lo, hi, weights: the new edges with an end in ``affected``, each once.
    """

    affected: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    weights: np.ndarray


def update_edges(
    v: np.ndarray,
    keys: np.ndarray,
    cells: np.ndarray,
    layout: Layout,
    changed: np.ndarray,
    touched: np.ndarray,
    neighbours: Callable[[np.ndarray], np.ndarray],
    threshold: float,
    top_k: int,
) -> EdgeUpdate:
    """The edges of the rows a change reaches (see the module docstring).

    Args:
        v: (m, d) eligible concept vectors; keys: (m,) their keys (ties of the top-k).
        cells: (m, probes) their cells after :func:`reassign`.
        layout: the current layout.
        changed: rows new, changed or moved (``D``).
        touched: rows that had a stored edge with a concept removed, changed or moved.
        neighbours: ``f(rows) -> rows`` of the stored edges' other ends.
        threshold: minimum cosine; top_k: neighbours a row keeps (``top_k + 1``, as a build).
    """
    from threadpoolctl import threadpool_limits

    from qortex_core.ingest.synonyms import top_k_per_row

    # products of a few rows against one cell: BLAS threads cost more than they give there
    # (0.27 s with one, 4.1 s with two on 2 busy cores, 2,161 rows of a 53k-concept set)
    with threadpool_limits(limits=1, user_api="blas"):
        near = candidates(v, cells, layout, changed, threshold)[1]
        affected = np.unique(np.concatenate([changed, near, touched]).astype(np.int64))
        around = np.setdiff1d(neighbours(affected), affected)  # B
        rows = np.concatenate([affected, around])
        r, c, w = candidates(v, cells, layout, np.sort(rows), threshold)
    order = np.lexsort((c, r))
    r, c, w = top_k_per_row(r[order], c[order], w[order], top_k + 1, keys)
    keep = np.isin(r, affected) | np.isin(c, affected)
    r, c, w = r[keep], c[keep], w[keep]
    lo, hi = np.minimum(r, c), np.maximum(r, c)
    _, first = np.unique(lo * v.shape[0] + hi, return_index=True)
    return EdgeUpdate(affected, lo[first], hi[first], w[first].astype(np.float32))
