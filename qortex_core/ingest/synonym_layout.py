"""The cell layout of the synonym search: a function of the concept *set*, by consistent sampling.

Every concept has a key, 63 bits of its id's hash (:func:`concept_keys`). The centroids are the
eligible concepts whose key is divisible by ``SynonymConfig.rate`` (about one in ``rate``), each
cell named by its centroid's key; every eligible concept joins its ``probes`` most similar
centroids. Which concepts exist decides the layout, never their row order or a seeded k-means
run, so a concept added or removed changes only the cells near it: the incremental stage
(:mod:`.synonym_update`) finds those and recomputes only their rows, and gets a full build's edges.

Up to ``flat_max`` centroids a concept is compared with every centroid (``m^2 / rate``). Above,
a second, sparser sample of the centroids (key / rate divisible by ``group_rate``) are groups:
each centroid is listed in its ``group_lists`` most similar groups, and a concept is compared
with the groups and then with the centroids listed in its ``group_probes`` most similar ones
(``m^1.5``). Ties between equally similar centroids go to the smaller key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import pyarrow as pa

from qortex_core.ingest.cells import members_of, nearest_cells
from qortex_core.storage import id_keys, ids


class LayoutSettings(Protocol):
    """The settings a layout reads (``synonyms.SynonymConfig`` has them)."""

    @property
    def exact_max(self) -> int: ...
    @property
    def rate(self) -> int: ...
    @property
    def probes(self) -> int: ...
    @property
    def flat_max(self) -> int: ...
    @property
    def group_rate(self) -> int: ...
    @property
    def group_lists(self) -> int: ...
    @property
    def group_probes(self) -> int: ...


NO_CELL = -1  # padding of a concept's cells (keys are never negative)
EXACT = "exact"  # the layout's kind up to exact_max eligible concepts: one cell of every concept
FLAT = "flat"


def _hex_keys(raw: np.ndarray) -> np.ndarray | None:
    """Keys of ``c_`` + 16 hex digit ids (``ids.concept_id``) without a Python loop; None if any
    id has another form."""
    if raw.dtype.itemsize != 18 or not np.all(np.char.str_len(raw) == 18):
        return None
    return _parsed(raw.view(np.uint8).reshape(len(raw), 18))


def _arrow_hex_keys(names: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """:func:`_hex_keys` read straight from an Arrow string column's bytes (no Python string
    per id: :func:`~qortex_core.storage.id_keys.packed`); None when the column is of another
    kind or an id of another form."""
    got = id_keys.packed(names)
    if got is None or got[0] != b"c_":
        return None
    return (got[1] >> np.uint64(1)).astype(np.int64)


def _parsed(chars: np.ndarray) -> np.ndarray | None:
    """The keys of (n, 18) id bytes, or None when one is not ``c_`` + 16 lower-case hex
    digits."""
    if not (np.all(chars[:, 0] == ord("c")) and np.all(chars[:, 1] == ord("_"))):
        return None
    digits = np.ascontiguousarray(chars[:, 2:])  # (n, 16)
    if not _HEX[digits].all():
        return None
    key = np.frombuffer(bytes.fromhex(digits.tobytes().decode("ascii")), ">u8")  # (n,)
    return (key >> np.uint64(1)).astype(np.int64)


_HEX = np.zeros(256, bool)  # the bytes of lower-case hex digits
_HEX[np.frombuffer(b"0123456789abcdef", np.uint8)] = True


def concept_keys(names: Sequence[str] | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(n,) int64 key of each concept id: the top 63 bits of its digest (non-negative)."""
    if isinstance(names, (pa.Array, pa.ChunkedArray)) and len(names):
        fast = _arrow_hex_keys(names)
        if fast is not None:
            return fast
    values = names.to_pylist() if isinstance(names, (pa.Array, pa.ChunkedArray)) else list(names)
    if not values:
        return np.zeros(0, np.int64)
    fast = _hex_keys(np.array(values, dtype="S"))
    if fast is not None:
        return fast
    return np.array([int(ids.digest(v), 16) >> 1 for v in values], np.int64)


def name_keys(names: Sequence[str] | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(n,) keys of the concepts named ``names`` (their ids are made from the names)."""
    values = names.to_pylist() if isinstance(names, (pa.Array, pa.ChunkedArray)) else list(names)
    return concept_keys([ids.concept_id(v) for v in values])


@dataclass(frozen=True)
class Layout:
    """The centroids of one concept set and how a concept finds its nearest ones.

    Attributes:
        kind: ``exact`` (no cells), ``flat:<probes>`` or ``groups:<probes>:<digest of the
            groups>``; a run whose kind differs from the last one's rebuilds in full.
        keys: (c,) ascending keys of the centroids (the cells' names).
        centroids: (c, d) their vectors.
        groups: (g, d) vectors of the groups (empty unless ``kind`` is groups).
        listed: per group, the centroid positions listed in it (ascending).
        probes: cells each concept joins.
        group_probes: groups a concept searches.
    """

    kind: str
    keys: np.ndarray
    centroids: np.ndarray
    groups: np.ndarray
    listed: tuple[np.ndarray, ...]
    probes: int
    group_probes: int

    def assign(self, v: np.ndarray) -> np.ndarray:
        """(n, probes) keys of the cells of each of the (n, d) vectors, best first."""
        return self.keys[self.positions(v)]

    def positions(self, v: np.ndarray) -> np.ndarray:
        """(n, probes) centroid positions of each of the (n, d) vectors, best first."""
        if not self.listed:
            return nearest_cells(v, self.centroids, self.probes)
        top = nearest_cells(v, self.groups, self.group_probes)  # (n, group_probes)
        pos = np.full((v.shape[0], top.shape[1], self.probes), -1, np.int64)
        sim = np.full(pos.shape, -np.inf, np.float32)
        for g, rows in enumerate(members_of(top, len(self.groups))):
            cand = self.listed[g]
            if rows.size == 0 or cand.size == 0:
                continue
            slot = np.argmax(top[rows] == g, axis=1)  # (rows,) which of the row's groups
            p = min(self.probes, cand.size)
            best = nearest_cells(v[rows], self.centroids[cand], p)  # (rows, p)
            pos[rows, slot, :p] = cand[best]
            sim[rows, slot, :p] = np.einsum("nd,npd->np", v[rows], self.centroids[cand[best]])
        return _merged(pos.reshape(len(v), -1), sim.reshape(len(v), -1), self.probes, self, v)


def _merged(
    pos: np.ndarray, sim: np.ndarray, probes: int, layout: Layout, v: np.ndarray
) -> np.ndarray:
    """Each row's ``probes`` best distinct centroids among its (n, c) candidates ``pos`` (-1:
    none) of similarity ``sim``; rows with fewer distinct candidates: every centroid."""
    order = np.argsort(pos, axis=1, kind="stable")
    pos, sim = np.take_along_axis(pos, order, 1), np.take_along_axis(sim, order, 1)
    repeat = np.zeros(pos.shape, bool)
    repeat[:, 1:] = pos[:, 1:] == pos[:, :-1]
    sim = np.where(repeat | (pos < 0), -np.inf, sim)
    rank = np.lexsort((pos, -sim), axis=-1)  # (n, c) per row: most similar, then smaller key
    out = np.take_along_axis(pos, rank[:, :probes], 1)
    short = np.flatnonzero(~np.isfinite(np.take_along_axis(sim, rank[:, :probes], 1)).all(1))
    if short.size:
        out[short] = nearest_cells(v[short], layout.centroids, probes)
    return out


def _sampled(keys: np.ndarray, rate: int) -> np.ndarray:
    """Positions of the keys in the sample, ascending by key, each key once (the first row of a
    repeated one: names that make the same id)."""
    at = np.flatnonzero(keys % rate == 0)
    _, first = np.unique(keys[at], return_index=True)
    return at[first]


def layout_of(v: np.ndarray, keys: np.ndarray, config: LayoutSettings) -> Layout:
    """The layout of the (m, d) eligible concept vectors ``v`` with keys ``keys``."""
    empty = np.zeros((0, v.shape[1]), np.float32)
    at = _sampled(keys, config.rate) if v.shape[0] > config.exact_max else np.zeros(0, np.int64)
    if at.size == 0:
        return Layout(EXACT, np.zeros(0, np.int64), empty, empty, (), 1, 1)
    probes = min(config.probes, at.size)
    centroids = np.ascontiguousarray(v[at])  # (c, d)
    sub = _sampled(keys[at] // config.rate, config.group_rate)  # (g,) centroid positions
    if at.size <= config.flat_max or sub.size < max(config.group_probes, 1):
        return Layout(f"{FLAT}:{probes}", keys[at], centroids, empty, (), probes, 1)
    groups = np.ascontiguousarray(centroids[sub])  # (g, d)
    lists = nearest_cells(centroids, groups, min(config.group_lists, sub.size))  # (c, lists)
    digest = ids.digest(keys[at][sub].tobytes().hex(), groups.tobytes().hex())
    return Layout(
        f"groups:{probes}:{digest}",
        keys[at],
        centroids,
        groups,
        tuple(members_of(lists, sub.size)),
        probes,
        min(config.group_probes, sub.size),
    )


def cell_positions(cells: np.ndarray, layout: Layout) -> np.ndarray:
    """(m, probes) position of each of the cells of m concepts in ``layout.keys``; padding
    (:data:`NO_CELL`) is ``len(layout.keys)``, and an exact layout is one cell (0) of all."""
    if layout.kind == EXACT:
        return np.zeros((cells.shape[0], 1), np.int64)
    pos = np.searchsorted(layout.keys, cells)  # (m, probes)
    pos[cells == NO_CELL] = len(layout.keys)
    return pos


def cell_members(cells: np.ndarray, layout: Layout) -> list[np.ndarray]:
    """Each cell's member rows (ascending), from the (m, probes) cell keys of m concepts (padded
    with :data:`NO_CELL`); one cell of every row for an exact layout."""
    count = max(len(layout.keys), 1)
    return members_of(cell_positions(cells, layout), count + 1)[:count]


_LOW_BITS = 1 << 20  # entries of the table of wanted keys' low bits (some_cell_members)


def some_cell_members(cells: np.ndarray, layout: Layout, wanted: np.ndarray) -> list[np.ndarray]:
    """:func:`cell_members` of only the cells at positions ``wanted`` (ascending, unique, in
    ``layout.keys``), in that order: one search of every concept's cells among the few wanted
    keys, and a sort of only their members (not of every concept's cells)."""
    if layout.kind == EXACT:
        return [np.arange(cells.shape[0]) for _ in wanted]
    keys = layout.keys[wanted]  # (w,) ascending, as layout.keys
    if keys.size == 0:
        return []
    # a table of the wanted keys' low bits first: only the few entries it passes are searched
    low = np.zeros(_LOW_BITS, bool)
    low[keys & (_LOW_BITS - 1)] = True
    rows, probe = np.nonzero(low[cells & (_LOW_BITS - 1)])  # (maybe,) rows ascending
    found = cells[rows, probe]
    at = np.minimum(np.searchsorted(keys, found), keys.size - 1)  # (maybe,)
    hit = keys[at] == found  # padding (NO_CELL) is no key: never a hit
    rows, cell = rows[hit], at[hit]  # rows ascending: a stable sort keeps them so in each cell
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.arange(keys.size + 1))  # (w+1,)
    grouped = rows[order]
    return [grouped[bounds[c] : bounds[c + 1]] for c in range(keys.size)]
