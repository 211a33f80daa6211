"""Checks over the data home's tables, as arrow compute over only the columns they need: the
graph has no dangling edges, and every chunk is extracted or recorded as failed.

The pipeline's asset checks and ``qortex doctor`` use them; a scan of a 100k-passage home
reads a few id columns and matches them in C, not row by row in Python.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.stage_inputs import remember, remembered, upstream_marks
from qortex_core.storage import id_keys
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    EXTRACTIONS,
    FACTS,
    PASSAGES,
    SYNONYMS,
    LanceStore,
)

GRAPH_TABLES = (CONCEPTS, PASSAGES, FACTS, SYNONYMS)  # what the dangling-edge check reads
DANGLING_MEMO = "dangling_edges"


def _columns(store: LanceStore, table: str, columns: Sequence[str]) -> pa.Table | None:
    """Only ``columns`` of ``table`` (None when it has no row)."""
    rows = store.read_columns(table, list(columns))
    return rows if rows.num_rows else None


def _outside(values: pa.ChunkedArray | pa.Array, known: pa.Array) -> pa.Array:
    """Per value: True when it is not one of ``known`` (a null is never known)."""
    return pc.invert(pc.fill_null(pc.is_in(values, value_set=known), False))


def _count(mask: pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def _ids(rows: pa.Table | None, column: str = "id") -> pa.Array:
    if rows is None:
        return pa.array([], pa.string())
    return rows[column].combine_chunks()


def dangling_edges(store: LanceStore) -> dict[str, int]:
    """Edges whose endpoint is not a node: fact and synonym endpoints, concept -> passage links."""
    concepts = _columns(store, CONCEPTS, ["id", "passage_ids"])
    nodes, passages = _ids(concepts), _ids(_columns(store, PASSAGES, ["id"]))
    facts = _columns(store, FACTS, ["subject_id", "object_id"])
    synonyms = _columns(store, SYNONYMS, ["a", "b"])
    found = {"fact": 0, "synonym": 0, "contains": 0}
    if facts is not None:
        ends = pc.or_(_outside(facts["subject_id"], nodes), _outside(facts["object_id"], nodes))
        found["fact"] = _count(ends)
    if synonyms is not None:
        ends = pc.or_(_outside(synonyms["a"], nodes), _outside(synonyms["b"], nodes))
        found["synonym"] = _count(ends)
    if concepts is not None:
        links = pc.list_flatten(concepts["passage_ids"])
        found["contains"] = _count(_outside(links, passages))
    return found


def remembered_dangling(store: LanceStore) -> dict[str, int]:
    """:func:`dangling_edges`, or its remembered counts while the graph tables are unchanged
    (the graph_snapshot stage counts them as it builds: :func:`remember_dangling`)."""
    return remembered(store, DANGLING_MEMO, GRAPH_TABLES, lambda: dangling_edges(store))


def graph_marks(store: LanceStore) -> str:
    """The graph tables' marks, taken before a build reads them (:func:`remember_dangling`)."""
    return upstream_marks(store, GRAPH_TABLES)


def remember_dangling(store: LanceStore, marks: str, counts: dict[str, int]) -> None:
    """Record ``counts`` (as :func:`dangling_edges` gives them, counted by a snapshot build
    from the tables at ``marks``) for :func:`remembered_dangling`."""
    remember(store, DANGLING_MEMO, marks, counts)


def _chunk_states(store: LanceStore, extractor_key: str) -> tuple[pa.Array, pa.Table | None]:
    """Per chunk (sorted by id): the row of its extraction under ``extractor_key`` (null: none
    recorded), and those extractions' chunk id, status and error columns (a chunk has one
    row per extractor: its key is the digest of the two)."""
    chunks = _ids(_columns(store, CHUNKS, ["id"]))
    chunks = chunks.take(pa.array(id_keys.sort_indices(chunks)))  # ids as integers
    stored = _columns(store, EXTRACTIONS, ["passage_id", "extractor", "status", "error"])
    if stored is None:
        return pa.nulls(len(chunks), pa.int32()), None
    stored = stored.filter(pc.equal(stored["extractor"], extractor_key))
    at = id_keys.index_in(chunks, stored["passage_id"])  # (chunks,) -1: none recorded
    return pa.array(at, pa.int64(), mask=at < 0), stored


def extraction_status(store: LanceStore, extractor_key: str) -> dict[str, int]:
    """Chunks with a successful extraction, a recorded failure, or nothing at all."""
    return _status(*_chunk_states(store, extractor_key))


def _status(rows: pa.Array, stored: pa.Table | None) -> dict[str, int]:
    if stored is None:
        return {"ok": 0, "failed": 0, "missing": len(rows)}
    status = stored["status"].combine_chunks().take(rows)
    ok = _count(pc.fill_null(pc.equal(status, "ok"), False))
    missing = status.null_count
    return {"ok": ok, "failed": len(rows) - ok - missing, "missing": missing}


def failed_extraction_errors(store: LanceStore, extractor_key: str) -> tuple[list[str], int]:
    """The recorded errors of the current chunks whose extraction failed, and the chunk count."""
    return _errors(*_chunk_states(store, extractor_key))


def _errors(rows: pa.Array, stored: pa.Table | None) -> tuple[list[str], int]:
    if stored is None:
        return [], len(rows)
    recorded = rows.filter(pc.is_valid(rows))
    status = stored["status"].combine_chunks().take(recorded)
    failed = pc.invert(pc.fill_null(pc.equal(status, "ok"), False))
    errors = stored["error"].combine_chunks().take(recorded.filter(failed))
    return [str(e) for e in errors.to_pylist()], len(rows)


def extraction_states(store: LanceStore, extractor_key: str) -> dict:
    """:func:`extraction_status` (``status``) and :func:`failed_extraction_errors` (``errors``,
    ``chunks``) from one pass over the chunks, as one JSON value (the extraction checks share
    it)."""
    rows, stored = _chunk_states(store, extractor_key)
    errors, chunks = _errors(rows, stored)
    return {"status": _status(rows, stored), "errors": errors, "chunks": chunks}
