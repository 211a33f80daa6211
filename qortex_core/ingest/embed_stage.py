"""The embeddings stage: passages, concepts, facts and rules tables with vectors from the
embedding cache (the synonym edges between close concepts: :mod:`.synonym_stage`).

Incremental: unchanged upstream tables leave the tables as they are without a read; otherwise
the chunks are compared with the record of what the tables were built from
(:mod:`.embed_inputs`) and only the rows the changed chunks touch are written
(:mod:`.embed_delta`), or every table is rebuilt (first build, another model, a run stopped
while writing, many chunks changed). A run records that it is writing before its first write
and clears it after its last, so a killed run is finished by a rebuild on the next one."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.embed import Embedder
from qortex_core.ingest import row_changes
from qortex_core.ingest.allocators import give_back
from qortex_core.ingest.chunk_stage import (
    Progress,
    no_progress,
    read_chunks,
)
from qortex_core.ingest.embed_cache import CachedEmbedder, LanceVectorCache
from qortex_core.ingest.embed_delta import (
    embed_deltas,
    node_deltas,
    passage_delta,
    write_delta,
)
from qortex_core.ingest.embed_inputs import (
    DIGEST,
    EMBEDDED_CHUNKS,
    LISTED,
    READ_STATE,
    ChunkDiff,
    LazyInputs,
    Payloads,
    compared_inputs,
    current_inputs,
    diff_inputs,
    empty_inputs,
    has_record,
    stored_inputs,
    touched_chunks,
    write_record,
)
from qortex_core.ingest.node_tables import ChunkKey, NodeTables
from qortex_core.ingest.stage_inputs import INPUTS_STATE, table_mark, upstream_marks
from qortex_core.ingest.vector_reuse import MODEL_STATE, OldVectors, embedded_texts
from qortex_core.storage import ids, key_index, text_beside
from qortex_core.storage.model import Passage
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    EMBEDDINGS,
    EXTRACTIONS,
    FACTS,
    PASSAGES,
    RULES,
    LanceStore,
    vectors_to_arrow,
)


# -- embeddings ---------------------------------------------------------------------------
@dataclass(frozen=True)
class EmbedReport:
    passages: int
    concepts: int
    facts: int
    rules: int
    texts_embedded: int
    cache_hits: int
    vectors_kept: int = 0  # rows whose id and text were in the old tables: no cache lookup
    mode: str = "full"  # "unchanged" | "incremental" | "full"
    reason: str = ""
    rows_added: int = 0  # rows of the four tables with an id they did not hold
    rows_changed: int = 0  # rows rewritten under an id they held
    rows_removed: int = 0  # rows deleted
    compacted: tuple[str, ...] = ()  # tables whose small fragments were merged (compaction.py)


def _with_vectors(columns: dict[str, list] | pa.Table, vectors: np.ndarray) -> pa.Table:
    table = columns if isinstance(columns, pa.Table) else pa.table(columns)
    return (
        table.append_column("vector", vectors_to_arrow(vectors))
        if len(vectors)
        else table.append_column("vector", pa.array([], type=pa.list_(pa.float32(), 1)))
    )


def _passage_rows(chunks: Sequence[Passage]) -> pa.Table:
    """The passages table's columns but the vectors: one row per chunk."""
    return pa.table(
        {
            "id": [p.id for p in chunks],
            "doc_id": [p.doc_id for p in chunks],
            "title": [p.title for p in chunks],
            "text": [p.text for p in chunks],
            "domain": [p.domain for p in chunks],
            "time": pa.array([p.time for p in chunks], pa.string()),
            "ingested_at": pa.array([p.ingested_at for p in chunks], pa.string()),
        }
    )


BLOCK_ROWS = 1_000_000  # rows embedded and written at a time: memory holds one block's vectors


def _write_embedded(
    store: LanceStore,
    name: str,
    n: int,
    block: Callable[[int, int], tuple[pa.Table, list[str]]],
    cached: CachedEmbedder,
    progress: Progress,
) -> OldVectors:
    """Replace table ``name`` with its ``n`` rows and their vectors, made a block at a time
    (``block(start, end)``: those rows without vectors, and their texts) while the table is
    written: one new version, and memory for one block's texts and vectors. A row whose id and
    text the old table holds keeps its vector; only the others go to the cache (returned: how
    many were kept)."""
    old = OldVectors(store, name, cached.name)

    def lookup(texts: list[str]) -> np.ndarray:
        return cached.embed_groups([texts], progress)[0]  # cache-checked, length-sorted

    def embedded(start: int) -> list[pa.RecordBatch]:
        rows, texts = block(start, min(n, start + BLOCK_ROWS))
        return _with_vectors(rows, old.fill(rows, texts, lookup)).to_batches()

    if n == 0:
        store.replace(name, _with_vectors(block(0, 0)[0], np.zeros((0, 1), np.float32)))
        return old
    pending = [embedded(0)]  # made before the write starts: its errors surface as they are
    schema = pending[0][0].schema

    def stream() -> Iterator[pa.RecordBatch]:
        yield from pending.pop()  # not held once written
        for start in range(BLOCK_ROWS, n, BLOCK_ROWS):
            yield from embedded(start)

    store.replace_stream(name, schema, stream())
    return old


def _passage_block(chunks: Sequence[Passage]) -> Callable[[int, int], tuple[pa.Table, list[str]]]:
    return lambda s, e: (_passage_rows(chunks[s:e]), [p.full_text for p in chunks[s:e]])


def _node_block(name: str, rows: pa.Table) -> Callable[[int, int], tuple[pa.Table, list[str]]]:
    return lambda s, e: (rows.slice(s, e - s), embedded_texts(name, rows.slice(s, e - s)))


def _unchanged(n: list[int]) -> EmbedReport:
    reason = "same chunks, extractions and model as the tables were built from"
    return EmbedReport(n[0], n[1], n[2], n[3], 0, 0, mode="unchanged", reason=reason)


OUTPUTS = (PASSAGES, CONCEPTS, FACTS, RULES)
# the columns the stage's tables are looked up by (an incremental run's reads, upserts, deletes)
KEYED = {**{name: ("id",) for name in (*OUTPUTS, EMBEDDED_CHUNKS)}, EMBEDDINGS: ("key",)}
PENDING_STATE = "embeddings_pending"  # stage-state row: set while a run writes the tables
MAX_DRIFT = 0.2  # changed chunks, as a share of the recorded ones, past which all is rebuilt
DRIFT_FLOOR = 256  # ... and past this many (fewer cost little either way)


def _full_reason(store: LanceStore, embedder: Embedder, built: bool) -> str:
    """Why every row must be rebuilt ("" when the changed chunks may be applied)."""
    if not built:
        return "first build: every row embedded or found in the cache"
    if store.stage_digest(PENDING_STATE):
        return "a run stopped while writing the tables: every row rebuilt"
    if store.stage_digest(MODEL_STATE) != embedder.name:
        return f"the tables hold no vectors of {embedder.name}: every row rebuilt"
    if not has_record(store):
        return "no record of the chunks the tables were built from: every row rebuilt"
    return ""


def embed_index(
    store: LanceStore,
    embedder: Embedder,
    extractor_key: str,
    progress: Progress = no_progress,
    max_drift: float = MAX_DRIFT,
    drift_floor: int = DRIFT_FLOOR,
    sync_text: bool = False,
) -> EmbedReport:
    """Bring the passages, concepts, facts and rules tables (with vectors) up to date with the
    chunks and their extractions.

    Incremental when the tables were built by this model and the chunks added, removed or
    changed since are at most ``max_drift`` of them or ``drift_floor`` (:mod:`.embed_delta`:
    only the rows those chunks touch are read and written); otherwise every table is rebuilt,
    a row whose id and text the old table holds keeping its vector. Either way only texts
    without a vector are looked up in the embedding cache (then the model).

    ``sync_text``: when the passages changed, their BM25 index is synced on a thread beside
    the stages that follow (:mod:`qortex_core.storage.text_beside`: for a run whose stages
    share this process)."""
    before = store.versions().get(PASSAGES) if sync_text else None
    report = _embedded(store, embedder, extractor_key, progress, max_drift, drift_floor)
    if sync_text and store.versions().get(PASSAGES) != before:
        columns = ["id", "title", "text"]
        text_beside.start(store.db, lambda: store.read_columns(PASSAGES, columns))
    return report


def _embedded(
    store: LanceStore,
    embedder: Embedder,
    extractor_key: str,
    progress: Progress,
    max_drift: float,
    drift_floor: int,
) -> EmbedReport:
    """:func:`embed_index` without the index sync."""
    inputs = upstream_marks(store, (CHUNKS, EXTRACTIONS), embedder.name, extractor_key)
    read = {name: row_changes.version(store, name) for name in (CHUNKS, EXTRACTIONS)}
    built = all(store.count(n) or n == RULES for n in OUTPUTS)
    why = _full_reason(store, embedder, built)
    if not why and store.stage_digest(INPUTS_STATE) == inputs:  # no table read at all
        return _unchanged([store.count(name) for name in OUTPUTS])
    if not why:  # compared by the payloads' digests: no payload is read to find the change
        touched = touched_chunks(store, read) if has_record(store) else None  # None: every one
        keys, recorded = compared_inputs(store, extractor_key, touched)
        diff = diff_inputs(keys, recorded if recorded is not None else empty_inputs())
        if diff.empty:
            _finished(store, inputs, read)
            return _unchanged([store.count(name) for name in OUTPUTS])
        n = len(recorded or []) if touched is None else store.count(EMBEDDED_CHUNKS)
        if diff.size <= max(max_drift * n, drift_floor):
            current = LazyInputs(keys, lambda only: current_inputs(store, extractor_key, only=only))
            stored = LazyInputs(recorded or keys, lambda only: _recorded(store, only))
            report = _incremental(store, embedder, current, stored, diff, progress)
            if touched is not None:  # the chunk and extraction stages named the change
                compared = f"only the {len(touched)} chunks written since were compared"
                report = replace(report, reason=f"{report.reason}; {compared}")
            _finished(store, inputs, read)
            return report
        why = f"{diff.size} of {n} chunks changed (over {max_drift:.0%}): rebuilt"
        del keys, recorded
    digests = current_inputs(store, extractor_key, digests=True).select(["id", DIGEST])
    report = _full(store, embedder, current_inputs(store, extractor_key), progress, why, digests)
    _finished(store, inputs, read)
    return report


def _finished(store: LanceStore, inputs: str, read: dict[str, int]) -> None:
    """Record the upstream marks, and the versions the record was compared at (READ_STATE)."""
    store.set_stage_digest(READ_STATE, json.dumps(read, sort_keys=True))
    store.set_stage_digest(INPUTS_STATE, inputs)


def _recorded(store: LanceStore, only: list[str] | None) -> pa.Table:
    """The record's full rows (of the chunk ids ``only``, or every one)."""
    rows = stored_inputs(store, only=only)
    return (
        rows if rows is not None else empty_inputs().append_column("listed", pa.array([], LISTED))
    )


def _incremental(
    store: LanceStore,
    embedder: Embedder,
    current: LazyInputs,
    stored: LazyInputs,
    diff: ChunkDiff,
    progress: Progress,
) -> EmbedReport:
    """Apply ``diff`` to the four tables (:mod:`.embed_delta`)."""
    before = [store.count(name) for name in OUTPUTS]
    cached = CachedEmbedder(embedder, LanceVectorCache(store))
    nodes = node_deltas(store, current, stored, diff)
    deltas = [passage_delta(store, current.keys, diff), *nodes.deltas]
    embed_deltas(deltas, cached, progress)
    store.set_stage_digest(PENDING_STATE, "incremental")  # before the first write
    versions = store.versions()
    for done, delta in enumerate(deltas, 1):
        write_delta(store, delta)
        progress("embed_tables", done, 4)
    digests = current.keys.select(["id", DIGEST])
    write_record(store, current.rows(diff.recorded()), nodes.listed, diff, digests)
    kept = key_index.keep_tables(store, KEYED)  # before the facts' link below: it spans them
    compacted = [name for name, done in kept.items() if done == "compacted"]
    facts = next(d for d in deltas if d.name == FACTS)  # a snapshot's base holds the others
    written = facts.rows["id"].to_pylist() if facts.rows.num_rows else []
    row_changes.record(
        store, FACTS, versions.get(FACTS, 0), store.versions()[FACTS], written, facts.deleted
    )
    if deltas[1].rows.num_rows or deltas[1].deleted:  # the synonym stage reads the concepts
        changed = deltas[1].rows["id"].to_pylist() + deltas[1].deleted
        store.set_stage_digest(
            "embeddings", ids.digest(store.stage_digest("embeddings") or "", *changed)
        )
    store.set_stage_digest(PENDING_STATE, "")
    counts = [store.count(name) for name in OUTPUTS]
    looked_up = sum(int((~d.keep).sum()) for d in deltas)
    return EmbedReport(
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        texts_embedded=cached.texts_embedded,
        cache_hits=cached.cache_hits,
        vectors_kept=sum(counts) - looked_up,
        mode="incremental",
        reason=f"{diff.size} of {sum(before[:1])} chunks changed: only the rows they touch "
        "were written",
        rows_added=sum(d.added for d in deltas),
        rows_changed=sum(d.changed for d in deltas),
        rows_removed=sum(len(d.deleted) for d in deltas),
        compacted=tuple(compacted),
    )


def _full(
    store: LanceStore,
    embedder: Embedder,
    current: pa.Table,
    progress: Progress,
    why: str,
    digests: pa.Table | None = None,
) -> EmbedReport:
    """Rebuild the four tables from ``current`` inputs: a row whose id and text the old table
    holds keeps its vector, the rest come from the embedding cache (only their keys are looked
    up) or the model; ``digests``: the payloads' digests, for the record."""
    before = sum(store.count(name) for name in OUTPUTS)
    if store.stage_digest(MODEL_STATE) != embedder.name:  # no old vector is this model's
        store.set_stage_digest(MODEL_STATE, "")
    store.set_stage_digest(PENDING_STATE, "full")  # before the first write
    row_changes.clear(store, FACTS)
    chunks = read_chunks(store)
    cached = CachedEmbedder(embedder, LanceVectorCache(store))
    n_passages = len(chunks)
    # one model call path, a table at a time and a block of rows at a time (each block's texts
    # cache-checked and length-sorted together): memory holds one block's texts and vectors
    old = [_write_embedded(store, PASSAGES, n_passages, _passage_block(chunks), cached, progress)]
    progress("embed_tables", 1, 4)  # tables written so far (a crash here leaves the rest stale)
    del chunks  # the texts: the node tables need each chunk's id and domain only
    current = current.take(pc.sort_indices(current["id"]))  # the merge order
    ids_ = current["id"].to_pylist()
    keys = [ChunkKey(i, d) for i, d in zip(ids_, current["domain"].to_pylist())]
    merged = NodeTables(keys, Payloads(current))  # each table built, written and dropped in turn
    counts = [n_passages]
    for done, (name, build) in enumerate(
        ((CONCEPTS, merged.concepts), (FACTS, merged.facts), (RULES, merged.rules)), 2
    ):
        rows = build()
        counts.append(rows.num_rows)
        old.append(
            _write_embedded(store, name, rows.num_rows, _node_block(name, rows), cached, progress)
        )
        del rows
        give_back()  # what the last table freed, before the next one is built
        progress("embed_tables", done, 4)
    # each chunk's listed concepts (set by the concepts merge), for the record
    listed = pa.table({"id": current["id"], "listed": merged.listed})
    write_record(store, current, listed, None, digests)
    key_index.keep_tables(store, KEYED)
    store.set_stage_digest(MODEL_STATE, embedder.name)
    store.set_stage_digest("embeddings", ids.digest(embedder.name, table_mark(store, CONCEPTS)))
    store.set_stage_digest(PENDING_STATE, "")
    kept = sum(o.kept for o in old)
    return replace(
        _report(counts, cached, kept),
        mode="full",
        reason=f"{why} ({kept} rows kept their vectors)" if kept else why,
        rows_added=sum(counts),
        rows_removed=before,
    )


def _report(counts: list[int], cached: CachedEmbedder, kept: int) -> EmbedReport:
    """The report of a run that wrote the tables: ``counts`` of passages, concepts, facts and
    rules; ``kept``: rows whose vector was kept."""
    reason = (
        f"{kept} rows kept their vectors; only the other rows' texts were looked up"
        if kept
        else "no stored vector of this model to keep: every text looked up in the cache"
    )
    return EmbedReport(
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        cached.texts_embedded,
        cached.cache_hits,
        vectors_kept=kept,
        mode="incremental" if kept else "full",
        reason=reason,
    )
