"""The synonym_edges stage, incremental: a run matches only the new or changed concepts and keeps
every other edge.

The edges were built on a set of concepts, its *basis* (table ``synonym_basis``: each concept's
id and a fingerprint of its vector). A run compares the concepts table with the basis:

- concepts gone, or whose vector changed (a name spelt another way first), lose their edges;
- new or changed concepts are matched exactly against every eligible concept (one blocked
  matrix product of the new rows against all rows: ``new x m``, no cell layout needed), and the
  pairs above the threshold among each new concept's top-k are added.

An edge of an old concept is never displaced by a closer new one (a full build cuts each row to
its top-k neighbours), so the edges drift from a rebuild's only where a row has more than
``top_k`` neighbours above the threshold; the stage rebuilds in full when the concepts added and
removed since the last full build pass ``max_drift`` of that build's concepts, when the settings
changed, or when the last run was killed between its writes (its state says it is pending).
The report says which, and why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.synonyms import SynonymConfig, eligible_mask, synonym_pairs
from qortex_core.storage import ids
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore, arrow_to_vectors

_log = logging.getLogger(__name__)
BASIS = "synonym_basis"
_STATE = "synonyms"  # stage-state key: JSON of the settings digest, drift and table versions
MAX_DRIFT = 0.2  # concepts added + removed since the last full build, as a share of its concepts
_PROBE_SEED = 20_240_611
_BLOCK_FLOATS = 1 << 24  # similarities of one block of new rows against every row (64 MB)
_DELETE_LIST = 1000  # up to this many ids a delete is one predicate; above, a filtered rewrite

Mode = Literal["unchanged", "incremental", "full"]


@dataclass(frozen=True)
class SynonymReport:
    """What one run of the stage did.

    Attributes:
        edges: synonym edges stored after the run.
        added: edges added by this run.
        removed: edges removed by this run.
        concepts_matched: new or changed concepts matched against every concept.
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


def fingerprints(vectors: np.ndarray) -> np.ndarray:
    """(n,) float64 fingerprint of each row: its product with a fixed random direction (two
    vectors that differ in any bit almost surely differ here)."""
    probe = np.random.default_rng(_PROBE_SEED).standard_normal(vectors.shape[1])  # (d,)
    return np.asarray(vectors, np.float64) @ probe


@dataclass(frozen=True)
class _Concepts:
    """The concepts table's ids, names and vectors, in stored row order."""

    ids: pa.ChunkedArray
    names: pa.ChunkedArray
    vectors: np.ndarray  # (m, d) float32
    prints: np.ndarray  # (m,) float64


def _read_concepts(store: LanceStore) -> _Concepts:
    rows = store.read_columns(CONCEPTS, ["id", "name", "vector"])
    if rows.num_rows == 0:
        empty = pa.chunked_array([], pa.string())
        return _Concepts(empty, empty, np.zeros((0, 1), np.float32), np.zeros(0))
    dim = rows.schema.field("vector").type.list_size
    vectors = np.ascontiguousarray(arrow_to_vectors(rows["vector"], dim), np.float32)
    return _Concepts(rows["id"], rows["name"], vectors, fingerprints(vectors))


def _edges_table(a: pa.ChunkedArray, b: pa.ChunkedArray, w: np.ndarray) -> pa.Table:
    return pa.table({"a": a, "b": b, "weight": pa.array(np.asarray(w, np.float32))})


def _basis_table(concepts: _Concepts, rows: np.ndarray) -> pa.Table:
    return pa.table(
        {"id": concepts.ids.take(pa.array(rows)), "fingerprint": pa.array(concepts.prints[rows])}
    )


def _record(store: LanceStore, state: _State) -> None:
    """Record the state: pending before a run's first write to the edges or the basis, done
    after its last (a run killed in between leaves it pending: the next one rebuilds)."""
    store.set_stage_digest(_STATE, json.dumps(asdict(state), sort_keys=True))


def _full(
    store: LanceStore, concepts: _Concepts, config: SynonymConfig, built_from: str, reason: str
) -> SynonymReport:
    """Rebuild every edge and the basis (one log line says why)."""
    _log.info("synonym_edges: full build: %s", reason)
    before = store.count(SYNONYMS)
    m = len(concepts.ids)
    r, c, w = synonym_pairs(concepts.vectors, concepts.names, config)
    edges = _edges_table(concepts.ids.take(pa.array(r)), concepts.ids.take(pa.array(c)), w)
    state = _State(_settings(config), built_from, m, 0)
    _record(store, replace(state, pending=True))
    store.replace(SYNONYMS, edges)
    store.replace(BASIS, _basis_table(concepts, np.arange(m)))
    _record(store, state)
    return SynonymReport(edges.num_rows, edges.num_rows, before, m, 0, "full", reason)


def _changes(concepts: _Concepts, basis: pa.Table) -> tuple[np.ndarray, list[str]]:
    """(rows of the concepts that are new or changed, ids of the basis concepts that are gone
    or changed)."""
    if basis.num_rows == 0:
        return np.arange(len(concepts.ids)), []
    at = pc.index_in(concepts.ids, value_set=basis["id"])  # (m,) null: a new concept
    known = pc.is_valid(at).to_numpy(zero_copy_only=False)
    pos = np.asarray(at.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    old = basis["fingerprint"].to_numpy()  # (basis,)
    same = known & (old[pos] == concepts.prints)  # (m,)
    kept = np.zeros(basis.num_rows, bool)
    kept[pos[same]] = True
    return np.flatnonzero(~same), basis["id"].filter(pa.array(~kept)).to_pylist()


def new_pairs(
    vectors: np.ndarray, eligible: np.ndarray, rows: np.ndarray, config: SynonymConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (lo, hi, cosine) of each of ``rows`` with any eligible row: cosine >= threshold
    and the other among the row's top-k, each pair once.

    Args:
        vectors: (m, d) unit vectors of every concept.
        eligible: (m,) bool, concepts long enough to get synonyms.
        rows: the concepts to match (new or changed).
        config: threshold and top-k, as for a full build.
    """
    from qortex_core.ingest.synonyms import top_k_per_row

    cols = np.flatnonzero(eligible)  # (m_e,)
    query = rows[eligible[rows]]  # (q,)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    if query.size == 0 or cols.size < 2:
        return empty
    k = min(config.top_k + 1, cols.size)  # as the full build's blocks
    against = np.ascontiguousarray(vectors[cols].T)  # (d, m_e)
    step = max(1, _BLOCK_FLOATS // cols.size)
    parts = []
    for s in range(0, query.size, step):
        q = query[s : s + step]
        sims = vectors[q] @ against  # (step, m_e)
        sims[np.arange(len(q)), np.searchsorted(cols, q)] = -1.0  # not its own synonym
        r, c = np.nonzero(sims >= config.threshold)  # row-major: grouped by row
        r, c, w = top_k_per_row(r, c, sims[r, c], k)
        parts.append((q[r], cols[c], w))
    a, b, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    _, first = np.unique(lo * len(vectors) + hi, return_index=True)  # a pair of two new rows
    return lo[first], hi[first], w[first].astype(np.float32)


def _drop(store: LanceStore, name: str, keys: tuple[str, ...], gone: list[str]) -> None:
    """Delete the rows of ``name`` whose ``keys`` name any of ``gone``."""
    if not gone or store.count(name) == 0:
        return
    if len(gone) <= _DELETE_LIST:
        for key in keys:
            store.delete(name, key, gone)
        return
    rows = store.read(name)  # a long list: one filtered rewrite rather than a long predicate
    drop = pa.array(gone, pa.string())
    keep = None
    for key in keys:
        hit = pc.is_in(rows[key], value_set=drop)
        keep = pc.invert(hit) if keep is None else pc.and_(keep, pc.invert(hit))
    store.replace(name, rows.filter(keep))


def _incremental(
    store: LanceStore,
    concepts: _Concepts,
    config: SynonymConfig,
    state: _State,
    built_from: str,
    max_drift: float,
) -> SynonymReport | str:
    """Update the edges for the concepts that changed; the reason for a full build instead."""
    rows, gone = _changes(concepts, store.read(BASIS))
    drift = state.drift + len(rows) + len(gone)
    if drift > max_drift * max(state.base, 1):
        return f"drift: {drift} concepts changed since the last full build of {state.base}"
    before = store.count(SYNONYMS)
    if rows.size == 0 and not gone:  # other chunks, the same concepts: the edges stand
        _record(store, replace(state, built_from=built_from))
        return SynonymReport(before, 0, 0, 0, 0, "unchanged", "same concepts and settings")
    _record(store, replace(state, pending=True))
    _drop(store, SYNONYMS, ("a", "b"), gone)
    kept = store.count(SYNONYMS)
    eligible = eligible_mask(concepts.names, config.min_chars)
    lo, hi, w = new_pairs(concepts.vectors, eligible, rows, config)
    store.append(
        SYNONYMS, _edges_table(concepts.ids.take(pa.array(lo)), concepts.ids.take(pa.array(hi)), w)
    )
    _drop(store, BASIS, ("id",), gone)
    store.append(BASIS, _basis_table(concepts, rows))
    _record(store, replace(state, built_from=built_from, drift=drift))
    reason = f"{len(rows)} concepts new or changed, {len(gone)} gone"
    return SynonymReport(
        kept + len(lo), len(lo), before - kept, len(rows), len(gone), "incremental", reason
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
    concepts = _read_concepts(store)
    if stale or state is None:
        return _full(store, concepts, config, built_from, stale)
    done = _incremental(store, concepts, config, state, built_from, max_drift)
    return (
        done
        if isinstance(done, SynonymReport)
        else _full(store, concepts, config, built_from, done)
    )


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
        quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in wanted)
        query = table.search().where(f"id IN ({quoted})").select(["id", "name"]).limit(None)
        named = query.to_arrow()
        names = dict(zip(named["id"].to_pylist(), named["name"].to_pylist()))
    pairs = zip(top["a"].to_pylist(), top["b"].to_pylist(), top["weight"].to_pylist())
    return [(names.get(a, a), names.get(b, b), w) for a, b, w in pairs]


def build_synonyms(store: LanceStore, config: SynonymConfig = SynonymConfig()) -> int:
    """:func:`sync_synonyms`; returns the number of edges stored."""
    return sync_synonyms(store, config).edges
