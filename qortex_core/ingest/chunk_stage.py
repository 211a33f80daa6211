"""The chunks and extractions stages: the chunks table made to hold the current passages, and
every chunk without a successful extraction under the extractor's cache key extracted.

Incremental by content hash."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import QortexError
from qortex_core.ingest import row_changes
from qortex_core.ingest.extract import Extractor
from qortex_core.ingest.stage_inputs import upstream_marks
from qortex_core.storage import id_keys, ids, key_index, times
from qortex_core.storage.model import Extraction, Passage
from qortex_core.storage.sql import sql_in, sql_quote
from qortex_core.storage.store import (
    CHUNKS,
    EXTRACTIONS,
    LanceStore,
)

Progress = Callable[[str, int, int], None]
# the columns the chunk and extraction stages look their tables' rows up by (key_index)
CHUNKS_KEYED = {CHUNKS: ("id", "doc_id")}
EXTRACTIONS_KEYED = {EXTRACTIONS: ("key", "passage_id")}
EXTRACT_STATE = "extractions_inputs"  # stage-state row: the tables' marks when all were done


def no_progress(stage: str, done: int, total: int) -> None:
    """The default progress callback: says nothing."""
    return None


# -- chunks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChunkReport:
    total: int
    added: int
    removed: int


def chunk_table(passages: Sequence[Passage], ingested: Mapping[str, str | None]) -> pa.Table:
    """Chunk rows; ``ingested``: passage id -> its ingest time (ISO 8601 UTC)."""
    return pa.table(
        {
            "id": pa.array([p.id for p in passages], pa.string()),
            "doc_id": pa.array([p.doc_id for p in passages], pa.string()),
            "title": pa.array([p.title for p in passages], pa.string()),
            "text": pa.array([p.text for p in passages], pa.string()),
            "domain": pa.array([p.domain for p in passages], pa.string()),
            "time": pa.array([p.time for p in passages], pa.string()),
            "ingested_at": pa.array([ingested.get(p.id) for p in passages], pa.string()),
        }
    )


def _timed_chunks(store: LanceStore) -> pa.Table:
    """The chunks table, given empty ``time``/``ingested_at`` columns first if it predates them."""
    existing = store.read(CHUNKS)
    if existing.num_rows == 0 or "time" in existing.schema.names:
        return existing
    for name in ("time", "ingested_at"):  # unknown for chunks stored before times were kept
        existing = existing.append_column(name, pa.nulls(existing.num_rows, pa.string()))
    store.replace(CHUNKS, existing)
    return existing


def sync_chunks(store: LanceStore, passages: Sequence[Passage], prune: bool = True) -> ChunkReport:
    """Make the chunks table hold ``passages`` (by content id); drop others when ``prune``.

    A new chunk's ingest time is now (or the passage's own ``ingested_at``); a chunk that
    moved (same text, another document, domain or event time) keeps its ingest time.
    """
    unique = {p.id: p for p in passages}
    existing = _timed_chunks(store)
    before = row_changes.version(store, CHUNKS)  # (a rewrite above breaks the chain of changes)
    have = set(existing["id"].to_pylist()) if existing.num_rows else set()
    columns = ["id", "doc_id", "domain", "time", "ingested_at"]
    placed = {r["id"]: r for r in existing.select(columns).to_pylist()} if have else {}
    new = [p for pid, p in unique.items() if pid not in have]
    moved = [
        p
        for pid, p in unique.items()
        if pid in placed
        and (placed[pid]["doc_id"], placed[pid]["domain"], placed[pid]["time"])
        != (p.doc_id, p.domain, p.time)
    ]  # same text, new home or time
    if new or moved:
        stamp = times.now_iso()
        ingested = {p.id: p.ingested_at or stamp for p in new}
        ingested |= {p.id: placed[p.id]["ingested_at"] for p in moved}
        store.upsert(CHUNKS, chunk_table(new + moved, ingested))
    stale = sorted(have - set(unique)) if prune else []
    store.delete(CHUNKS, "id", stale)
    key_index.keep_tables(store, CHUNKS_KEYED)
    row_changes.record_since(store, CHUNKS, before, [p.id for p in new + moved], stale)
    return ChunkReport(total=len(unique), added=len(new), removed=len(stale))


def read_chunks(store: LanceStore) -> list[Passage]:
    """All chunks, sorted by id."""
    return _passages(_sorted_chunks(store))


def _sorted_chunks(store: LanceStore) -> pa.Table:
    """The chunks table's rows sorted by id (an empty table without columns if it has none)."""
    rows = store.read(CHUNKS)
    return rows.take(pc.sort_indices(rows["id"])) if rows.num_rows else pa.table({})


def _passages(rows: pa.Table) -> list[Passage]:
    """The passages of chunk rows, in row order."""
    return [
        Passage(
            r["text"], r["title"], r["doc_id"], r["domain"], r.get("time"), r.get("ingested_at")
        )
        for r in rows.to_pylist()
    ]


# -- extraction ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtractReport:
    chunks: int
    extracted: int
    cached: int
    failed: int
    ungrounded_dropped: int = 0  # LLM names not in their passage, dropped (llm_schema.Grounding)


def _payload(ex: Extraction) -> str:
    return json.dumps(
        {
            "concepts": [[c.name, c.description] for c in ex.concepts],
            "facts": [[f.subject, f.predicate, f.object, f.relation.value] for f in ex.facts],
            "rules": [[r.text, list(r.concepts), r.category, r.confidence] for r in ex.rules],
        },
        ensure_ascii=False,
    )


def extraction_key(passage_id: str, extractor_key: str) -> str:
    return ids.digest(passage_id, extractor_key)


WRITE_ROWS = 8192  # extraction rows written at a time ...
WRITE_SECONDS = 10.0  # ... or after this long: a crash loses at most that much work


class _ExtractionWriter:
    """Extraction rows written in groups: one append (or upsert, when a key is already
    stored) per :data:`WRITE_ROWS` rows or :data:`WRITE_SECONDS`, not one merge per batch (a
    merge joins against every stored row: quadratic over a large corpus)."""

    def __init__(self, store: LanceStore, into: str, stored_keys: pa.ChunkedArray | None) -> None:
        self.store, self.into, self.stored_keys = store, into, stored_keys
        self.pending: list[pa.Table] = []
        self.rows, self.since = 0, time.monotonic()

    def add(self, columns: dict[str, list | pa.ChunkedArray]) -> None:
        table = pa.table(columns)
        self.pending.append(table)
        self.rows += table.num_rows
        if self.rows >= WRITE_ROWS or time.monotonic() - self.since >= WRITE_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            rows = pa.concat_tables(self.pending)
            known = (
                self.stored_keys is not None
                and pc.any(pc.is_in(rows["key"], value_set=self.stored_keys)).as_py()
            )
            if known or self.into != EXTRACTIONS:
                self.store.upsert(self.into, rows, key="key")
            else:
                self.store.append(self.into, rows)
        self.pending, self.rows, self.since = [], 0, time.monotonic()


def _all_done(store: LanceStore, key: str) -> bool:
    """Every chunk had a successful extraction under ``key`` when the chunks and extractions
    tables were last written (nothing to read: an unchanged run)."""
    return store.stage_digest(EXTRACT_STATE) == upstream_marks(store, (CHUNKS, EXTRACTIONS), key)


def extract_chunks(
    store: LanceStore,
    extractor: Extractor,
    batch: int = 64,
    progress: Progress = no_progress,
    only: Collection[str] | None = None,
    into: str = EXTRACTIONS,
) -> ExtractReport:
    """Extract every chunk that has no successful extraction under this extractor's cache key.

    Args:
        only: extract (and count) only the chunks with these ids (one shard's); None: every chunk.
        into: the table the extraction rows are upserted into (a shard's staging table).
    """
    whole = only is None and into == EXTRACTIONS
    if whole and _all_done(store, extractor.cache_key):
        n = store.count(CHUNKS)
        return ExtractReport(chunks=n, extracted=0, cached=n, failed=0)
    report = _extract_missing(store, extractor, batch, progress, only, into)
    if whole and not report.failed:  # nothing left to retry: the next run need not read chunks
        marks = upstream_marks(store, (CHUNKS, EXTRACTIONS), extractor.cache_key)
        store.set_stage_digest(EXTRACT_STATE, marks)
    return report


def ok_extractions(
    store: LanceStore,
    extractor_key: str,
    columns: list[str] | dict[str, str],
    only: list[str] | None = None,
) -> pa.Table:
    """``columns`` of the successful extractions under ``extractor_key`` (filtered by Lance:
    other extractors' rows and unasked columns, such as the payloads, are not read; a dict
    maps output names to SQL expressions Lance computes), of the chunks ``only`` names when
    given (at most :data:`~qortex_core.storage.store.WHERE_IN_MAX`). A row's key is
    :func:`extraction_key` of its ``passage_id`` and extractor."""
    table = store.open_latest(EXTRACTIONS)
    if table is None:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    where = f"extractor = {sql_quote(extractor_key)} AND status = 'ok'"
    if only is not None:
        where += f" AND {sql_in('passage_id', only)}" if only else " AND false"
    return table.search().where(where).select(columns).limit(None).to_arrow()


def _to_extract(
    store: LanceStore, extractor_key: str, only: Collection[str] | None
) -> tuple[int, pa.Table]:
    """The number of chunks (``only``'s), and the rows of those without a successful
    extraction under ``extractor_key``, sorted by id, with their extraction key (a column)."""
    # chunks stay Arrow rows and become Passage objects a batch at a time: a million live
    # objects made every garbage collection walk them (a third of the stage's time at 1M)
    every = store.read_columns(CHUNKS, ["id"])
    if not every.num_rows:
        return 0, pa.table({})
    ids = every["id"].combine_chunks()
    if only is not None:
        ids = ids.filter(pa.array(id_keys.is_in(ids, pa.array(list(only), pa.string()))))
    done = ok_extractions(store, extractor_key, ["passage_id"])["passage_id"]
    todo = ids.filter(pa.array(~id_keys.is_in(ids, done)))  # ids as integers (id_keys)
    if len(todo) == every.num_rows:  # every chunk (a first run): one read, no filter
        rows = store.read(CHUNKS)
    else:  # only the rows to extract are read (their texts)
        rows = store.read_where(CHUNKS, "id", todo.to_pylist())
    rows = rows.take(pc.sort_indices(rows["id"]))
    keys = [extraction_key(i, extractor_key) for i in rows["id"].to_pylist()]
    return len(ids), rows.append_column("key", pa.array(keys, pa.string()))


def _extract_missing(
    store: LanceStore,
    extractor: Extractor,
    batch: int,
    progress: Progress,
    only: Collection[str] | None,
    into: str,
) -> ExtractReport:
    """:func:`extract_chunks` without the unchanged-run check: reads the chunks' ids, the
    successful extractions' chunk ids, and only the chunks still to extract."""
    key = extractor.cache_key
    before = row_changes.version(store, EXTRACTIONS)
    chunks, todo = _to_extract(store, key, only)
    stored = store.read_columns(EXTRACTIONS, ["key"])  # not the payloads
    # a key stored with a failed status is replaced (upsert); new keys are appended
    writer = _ExtractionWriter(store, into, stored["key"] if stored.num_rows else None)
    failed = dropped = 0
    try:
        for start in range(0, todo.num_rows, batch):
            rows = todo.slice(start, batch)
            part = _passages(rows)
            results = extractor.extract(part)
            status = [ex.meta.get("status", "ok") for ex in results]
            failed += sum(s != "ok" for s in status)
            dropped += sum(int(ex.meta.get("ungrounded_dropped", 0)) for ex in results)
            writer.add(
                {
                    "key": rows["key"],
                    "passage_id": rows["id"],
                    "extractor": [key] * len(part),
                    "status": status,
                    "error": [str(ex.meta.get("error", "")) for ex in results],
                    "payload": [_payload(ex) for ex in results],
                }
            )
            progress("extract", min(start + batch, todo.num_rows), todo.num_rows)
    finally:  # what was extracted is stored, also when a later batch raises
        writer.flush()
    if into == EXTRACTIONS and todo.num_rows:  # (a shard's staging table is merged later)
        key_index.keep_tables(store, EXTRACTIONS_KEYED)  # the chunks whose rows were written:
        row_changes.record_since(store, EXTRACTIONS, before, todo["id"].to_pylist(), [])
    return ExtractReport(
        chunks=chunks,
        extracted=todo.num_rows - failed,
        cached=chunks - todo.num_rows,
        failed=failed,
        ungrounded_dropped=dropped,
    )


def read_extractions(
    store: LanceStore, extractor_key: str, passage_ids: Sequence[str]
) -> dict[str, dict]:
    """Successful extraction payloads by passage id for this extractor."""
    raw = read_extraction_json(store, extractor_key, passage_ids)
    return {pid: json.loads(payload) for pid, payload in raw.items()}


def read_extraction_json(
    store: LanceStore, extractor_key: str, passage_ids: Sequence[str]
) -> dict[str, str]:
    """:func:`read_extractions` with the payloads left as JSON text (a fraction of the memory
    of the parsed lists; the embedding stage parses one at a time)."""
    rows = store.read_where(
        EXTRACTIONS, "key", [extraction_key(p, extractor_key) for p in passage_ids]
    )
    if rows.num_rows == 0:
        return {}
    ok = rows.filter(pc.equal(rows["status"], "ok"))
    return dict(zip(ok["passage_id"].to_pylist(), ok["payload"].to_pylist()))


class ExtractionJson(Mapping[str, str]):
    """:func:`read_extraction_json` read lazily: the payloads of ``passage_ids`` are fetched
    ``batch`` passages at a time (by row offset), so looking them up in that order holds one
    batch of JSON text rather than all of it. Membership needs no payload."""

    def __init__(
        self, store: LanceStore, extractor_key: str, passage_ids: Sequence[str], batch: int = 20_000
    ) -> None:
        self._store, self._batch, self._ids = store, max(1, batch), list(passage_ids)
        self._position = {p: i for i, p in enumerate(self._ids)}
        rows = store.read_columns(EXTRACTIONS, ["key", "status"])
        self._offset = np.full(len(self._ids), -1, np.int64)  # (passages,) row of its ok payload
        if rows.num_rows and self._ids:
            keys = pa.array([extraction_key(p, extractor_key) for p in self._ids], pa.string())
            at = pc.fill_null(pc.index_in(keys, value_set=rows["key"]), -1).to_numpy()
            ok = pc.equal(rows["status"], "ok").to_numpy(zero_copy_only=False)  # (rows,)
            self._offset = np.where((at >= 0) & ok[np.maximum(at, 0)], at, -1).astype(np.int64)
        self._loaded: tuple[int, dict[str, str]] = (-1, {})

    def _load(self, b: int) -> dict[str, str]:
        span = slice(b * self._batch, (b + 1) * self._batch)
        offsets, wanted = self._offset[span], self._ids[span]
        rows = self._store.take(
            EXTRACTIONS, offsets[offsets >= 0].tolist(), ["passage_id", "payload"]
        )
        got = dict(zip(rows["passage_id"].to_pylist(), rows["payload"].to_pylist()))
        if any(p not in got for p, o in zip(wanted, offsets) if o >= 0):
            raise QortexError("the extractions table changed while it was read: run it again")
        self._loaded = (b, got)
        return got

    def __getitem__(self, passage_id: str) -> str:
        at = self._position[passage_id]
        if self._offset[at] < 0:
            raise KeyError(passage_id)
        b = at // self._batch
        batch = self._loaded[1] if self._loaded[0] == b else self._load(b)
        return batch[passage_id]

    def __contains__(self, passage_id: object) -> bool:
        at = self._position.get(passage_id) if isinstance(passage_id, str) else None
        return at is not None and bool(self._offset[at] >= 0)

    def __iter__(self) -> Iterator[str]:
        return (p for p, o in zip(self._ids, self._offset) if o >= 0)

    def __len__(self) -> int:
        return int((self._offset >= 0).sum())
