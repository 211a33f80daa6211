"""The synonym_edges stage, incremental: a run recomputes only the edges a change reaches and
keeps every other one, and gets the edges a full build of the same concepts gets.

The edges were built on a set of concepts, its *basis* (table ``synonym_basis``: each concept's
id, a fingerprint of its vector and the keys of its cells). The cells are a function of the
concept set (:mod:`.synonym_layout`), so a run compares the concepts table with the basis and
updates the cells and edges of the concepts the change reaches (:mod:`.synonym_update`):
concepts gone, new, or whose vector changed (a name spelt another way first), the concepts
whose cells a new or removed centroid moved, and their neighbours.

It rebuilds in full when the layout's kind changed (the concepts crossed ``exact_max``, or the
groups of a two-level layout changed), when the concepts added and removed since the last full
build pass ``max_drift`` of that build's concepts, when the settings changed, or when the last
run was killed between its writes (its state says it is pending). The report says which, and
why; either way the edges are the same.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.synonym_concepts import Concepts, read_concepts
from qortex_core.ingest.synonym_layout import NO_CELL, Layout, concept_keys, layout_of
from qortex_core.ingest.synonym_update import (
    EdgeUpdate,
    Eligible,
    eligible,
    other_ends,
    padded_cells,
    reassign,
    update_edges,
)
from qortex_core.ingest.synonyms import SynonymConfig, synonym_search
from qortex_core.storage import id_keys, ids, key_index
from qortex_core.storage.sql import sql_in
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore

_log = logging.getLogger(__name__)
BASIS = "synonym_basis"
_STATE = "synonyms"  # stage-state key: JSON of the settings digest, drift and table versions
MAX_DRIFT = 0.2  # concepts added + removed since the last full build, as a share of its concepts
_DELETE_LIST = 100_000  # ids one delete names at most (looked up in the key's BTREE index)
_REWRITE_SHARE = 0.25  # a drop naming more ids than this share of the rows: a filtered rewrite
KEYED = {SYNONYMS: ("a", "b"), BASIS: ("id",)}  # the columns a run deletes rows by (key_index)

Mode = Literal["unchanged", "incremental", "full"]


@dataclass(frozen=True)
class SynonymReport:
    """What one run of the stage did.

    Attributes:
        edges: synonym edges stored after the run.
        added: edges added by this run.
        removed: edges removed by this run.
        concepts_matched: concepts whose edges were recomputed (new, changed, moved to other
            cells, and their neighbours; every concept in a full build).
        concepts_removed: concepts gone (or changed) whose edges were removed.
        mode: ``unchanged``, ``incremental`` or ``full``.
        reason: why the run took that mode, in a few words.
    """

    edges: int
    added: int
    removed: int
    concepts_matched: int
    concepts_removed: int
    mode: Mode
    reason: str


@dataclass(frozen=True)
class _State:
    """The stage's state: what the stored edges were built from."""

    settings: str  # digest of the SynonymConfig
    built_from: str  # the embeddings stage's digest at the last run
    base: int  # concepts at the last full build
    drift: int  # concepts added + removed since
    pending: bool = False  # a run has begun writing the edges and not finished
    layout: str = ""  # the kind of the cell layout (synonym_layout.Layout.kind)


def _settings(config: SynonymConfig) -> str:
    return ids.digest(json.dumps(asdict(config), sort_keys=True))


def _read_state(store: LanceStore) -> _State | None:
    raw = store.stage_digest(_STATE)
    try:
        return _State(**json.loads(raw)) if raw else None
    except (TypeError, ValueError):  # the plain digest of an older qortex: rebuilt once
        return None


def _stale(store: LanceStore, state: _State | None, config: SynonymConfig) -> str:
    """Why the stored edges cannot be updated in place ("" when they can)."""
    if state is None:
        return "no incremental state"
    if state.settings != _settings(config):
        return "settings changed"
    if state.pending:
        return "the last run was interrupted while it wrote the edges"
    return ""


def _edges_table(a: pa.ChunkedArray, b: pa.ChunkedArray, w: np.ndarray) -> pa.Table:
    return pa.table({"a": a, "b": b, "weight": pa.array(np.asarray(w, np.float32))})


def _basis_table(concepts: Concepts, rows: np.ndarray, cells: np.ndarray) -> pa.Table:
    """Basis rows of the concepts ``rows`` with their (len(rows), probes) cell keys."""
    probes = cells.shape[1]
    flat = pa.array(np.ascontiguousarray(cells, np.int64).reshape(-1))
    offsets = pa.array(np.arange(0, len(rows) * probes + 1, probes, dtype=np.int32))
    return pa.table(
        {
            "id": concepts.ids.take(pa.array(rows, pa.int64())),
            "fingerprint": pa.array(concepts.prints[rows]),
            "cells": pa.ListArray.from_arrays(offsets, flat),
        }
    )


def _record(store: LanceStore, state: _State) -> None:
    """Record the state: pending before a run's first write to the edges or the basis, done
    after its last (a run killed in between leaves it pending: the next one rebuilds)."""
    store.set_stage_digest(_STATE, json.dumps(asdict(state), sort_keys=True))


def _full(
    store: LanceStore, concepts: Concepts, config: SynonymConfig, built_from: str, reason: str
) -> SynonymReport:
    """Rebuild every edge and the basis (one log line says why)."""
    _log.info("synonym_edges: full build: %s", reason)
    before = store.count(SYNONYMS)
    m = len(concepts.ids)
    found = synonym_search(concepts.vectors, concepts.names, config, concepts.keys)
    r, c = pa.array(found.rows, pa.int64()), pa.array(found.cols, pa.int64())
    edges = _edges_table(concepts.ids.take(r), concepts.ids.take(c), found.weights)
    state = _State(_settings(config), built_from, m, 0, layout=found.layout.kind)
    _record(store, replace(state, pending=True))
    store.replace(SYNONYMS, edges)
    store.replace(BASIS, _basis_table(concepts, np.arange(m), found.cells))
    key_index.keep_tables(store, KEYED)
    _record(store, state)
    return SynonymReport(edges.num_rows, edges.num_rows, before, m, 0, "full", reason)


@dataclass(frozen=True)
class _Changes:
    """How the concepts differ from the basis.

    Attributes:
        rows: concept rows new or changed.
        gone: ids of basis concepts gone or changed.
        cells: (concepts, probes) each concept's stored cells (``NO_CELL`` for ``rows``).
    """

    rows: np.ndarray
    gone: list[str]
    cells: np.ndarray


def _changes(concepts: Concepts, basis: pa.Table, probes: int) -> _Changes:
    """The concepts new or changed, those gone, and the cells the basis holds."""
    cells = np.full((len(concepts.ids), probes), NO_CELL, np.int64)
    if basis.num_rows == 0:
        return _Changes(np.arange(len(concepts.ids)), [], cells)
    stored = padded_cells(basis["cells"], probes)  # (basis, probes)
    at = id_keys.index_in(concepts.ids, basis["id"])  # (m,) -1: a new concept
    known = at >= 0
    pos = np.maximum(at, 0)
    old = basis["fingerprint"].to_numpy()  # (basis,)
    same = known & (old[pos] == concepts.prints)  # (m,)
    kept = np.zeros(basis.num_rows, bool)
    kept[pos[same]] = True
    cells[same] = stored[pos[same]]
    return _Changes(np.flatnonzero(~same), basis["id"].filter(pa.array(~kept)).to_pylist(), cells)


def _drop(store: LanceStore, name: str, keys: tuple[str, ...], gone: list[str]) -> None:
    """Delete the rows of ``name`` whose ``keys`` name any of ``gone``."""
    rows_now = store.count(name)
    if not gone or rows_now == 0:
        return
    if len(gone) <= _REWRITE_SHARE * rows_now:  # deletes: the key indexes find the rows
        for key in keys:
            for s in range(0, len(gone), _DELETE_LIST):
                store.delete(name, key, gone[s : s + _DELETE_LIST])
        return
    # most of the table: one filtered rewrite (it loses the key indexes: built again after)
    rows = store.read(name)
    drop = pa.array(gone, pa.string())
    keep = None
    for key in keys:
        hit = pc.is_in(rows[key], value_set=drop)
        keep = pc.invert(hit) if keep is None else pc.and_(keep, pc.invert(hit))
    store.replace(name, rows.filter(keep))


def _ids(el: Eligible, at: np.ndarray) -> list[str]:
    return el.ids.take(pa.array(at, pa.int64())).to_pylist()


def _edge_update(
    store: LanceStore,
    el: Eligible,
    layout: Layout,
    cells: np.ndarray,
    changed: np.ndarray,
    touch: list[str],
    config: SynonymConfig,
) -> EdgeUpdate:
    """:func:`update_edges` of ``changed`` rows; ``touch``: the ids gone, changed or moved."""
    edges = store.read_columns(SYNONYMS, ["a", "b"])
    touched = el.at(other_ends(edges, pa.array(touch, pa.string())))

    def neighbours(at: np.ndarray) -> np.ndarray:
        return el.at(other_ends(edges, pa.array(_ids(el, at), pa.string())))

    return update_edges(
        el.vectors,
        el.keys,
        cells,
        layout,
        changed,
        touched,
        neighbours,
        config.threshold,
        config.top_k,
    )


def _write(
    store: LanceStore,
    state: _State,
    concepts: Concepts,
    el: Eligible,
    up: EdgeUpdate,
    change: _Changes,
    cells: np.ndarray,
    moved: np.ndarray,
) -> int:
    """Drop the edges of the affected and gone concepts, add the new ones, update the basis
    (pending in between); the number of edges kept."""
    gone = change.gone
    moved_ids = _ids(el, moved)
    drop = gone + _ids(el, up.affected)
    _record(store, replace(state, pending=True))
    _drop(store, SYNONYMS, ("a", "b"), sorted(set(drop)))
    kept = store.count(SYNONYMS)
    lo, hi = pa.array(up.lo, pa.int64()), pa.array(up.hi, pa.int64())
    store.append(SYNONYMS, _edges_table(el.ids.take(lo), el.ids.take(hi), up.weights))
    all_cells = change.cells.copy()
    all_cells[el.rows] = cells
    again = np.union1d(change.rows, el.rows[moved])
    _drop(store, BASIS, ("id",), sorted(set(gone) | set(moved_ids)))
    store.append(BASIS, _basis_table(concepts, again, all_cells[again]))
    key_index.keep_tables(store, KEYED)
    _record(store, state)
    return kept


def _incremental(
    store: LanceStore,
    concepts: Concepts,
    config: SynonymConfig,
    state: _State,
    built_from: str,
    max_drift: float,
) -> SynonymReport | str:
    """Update the edges the change reaches; the reason for a full build instead."""
    # the vectors are handed over: the eligible rows moved to their front (no second copy)
    el = eligible(
        concepts.ids, concepts.names, concepts.vectors, concepts.keys, config.min_chars, True
    )
    layout = layout_of(el.vectors, el.keys, config)
    if layout.kind != state.layout:
        return f"cell layout changed ({state.layout.split(':')[0]} -> {layout.kind.split(':')[0]})"
    change = _changes(concepts, store.read(BASIS), layout.probes)
    rows, gone = change.rows, change.gone
    drift = state.drift + len(rows) + len(gone)
    if drift > max_drift * max(state.base, 1):
        return f"drift: {drift} concepts changed since the last full build of {state.base}"
    before = store.count(SYNONYMS)
    if rows.size == 0 and not gone:  # other chunks, the same concepts: the edges stand
        _record(store, replace(state, built_from=built_from))
        return SynonymReport(before, 0, 0, 0, 0, "unchanged", "same concepts and settings")
    fresh = np.isin(el.rows, rows)  # (m_e,)
    removed = concept_keys(gone)
    cells, moved = reassign(layout, el.vectors, el.keys, change.cells[el.rows], fresh, removed)
    changed = np.union1d(np.flatnonzero(fresh), moved)
    up = _edge_update(store, el, layout, cells, changed, gone + _ids(el, moved), config)
    state = replace(state, built_from=built_from, drift=drift)
    kept = _write(store, state, concepts, el, up, change, cells, moved)
    reason = f"{len(rows)} concepts new or changed, {len(gone)} gone, {len(moved)} moved"
    return SynonymReport(
        kept + len(up.lo),
        len(up.lo),
        before - kept,
        len(up.affected),
        len(gone),
        "incremental",
        reason,
    )


def sync_synonyms(
    store: LanceStore, config: SynonymConfig = SynonymConfig(), max_drift: float = MAX_DRIFT
) -> SynonymReport:
    """Bring the synonym edge table up to date with the concepts table.

    Unchanged concepts (by the embeddings stage's digest): nothing is read. Otherwise the new
    and changed concepts are matched and the edges of removed ones dropped, or every edge is
    rebuilt when the state is missing or stale, or when the concepts added and removed since
    the last full build pass ``max_drift`` of that build's concepts.
    """
    built_from = store.stage_digest("embeddings") or ""
    state = _read_state(store)
    stale = _stale(store, state, config)
    if not stale and state is not None and built_from and state.built_from == built_from:
        n = store.count(SYNONYMS)
        return SynonymReport(n, 0, 0, 0, 0, "unchanged", "same concepts and settings")
    concepts = read_concepts(store)
    if stale or state is None:
        return _full(store, concepts, config, built_from, stale)
    done = _incremental(store, concepts, config, state, built_from, max_drift)
    if isinstance(done, SynonymReport):
        return done
    del concepts  # its vectors were compacted in place by the incremental pass: read again
    return _full(store, read_concepts(store), config, built_from, done)


def heaviest_edges(store: LanceStore, limit: int = 10) -> list[tuple[str, str, float]]:
    """The ``limit`` edges of the highest cosine as (name, name, cosine): the edges table and
    the names of those concepts only (never the concepts' vectors)."""
    edges = store.read_columns(SYNONYMS, ["a", "b", "weight"])
    if edges.num_rows == 0:
        return []
    top = edges.take(pc.select_k_unstable(edges, limit, [("weight", "descending")]))
    wanted = sorted(set(top["a"].to_pylist()) | set(top["b"].to_pylist()))
    table = store.open_latest(CONCEPTS)
    names: dict[str, str] = {}
    if table is not None:
        query = table.search().where(sql_in("id", wanted)).select(["id", "name"]).limit(None)
        named = query.to_arrow()
        names = dict(zip(named["id"].to_pylist(), named["name"].to_pylist()))
    pairs = zip(top["a"].to_pylist(), top["b"].to_pylist(), top["weight"].to_pylist())
    return [(names.get(a, a), names.get(b, b), w) for a, b, w in pairs]


def build_synonyms(store: LanceStore, config: SynonymConfig = SynonymConfig()) -> int:
    """:func:`sync_synonyms`; returns the number of edges stored."""
    return sync_synonyms(store, config).edges
