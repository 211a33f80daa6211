"""The chunks stage in proportion to the change: only the documents whose signature moved since
they were chunked are read and chunked again, and only their chunk rows are touched.

The full stage (:func:`qortex_core.ingest.document_chunks.chunk_stored`) chunks every document
and keeps one row per chunk id (a content hash): when two documents hold the same chunk, the row
names the later document (by id). The increment gives the same rows. It knows each chunk's
documents from the chunk manifest (document id -> the signature chunked) and the set of chunk
ids more than one document produced (``shared``): a change that touches a shared id is done by
the full stage, which counts the producers again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from qortex_core.ingest import row_changes
from qortex_core.ingest.chunk_stage import CHUNKS_KEYED, ChunkReport, chunk_table
from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.ingest.stage_inputs import table_mark
from qortex_core.storage import id_keys, ids, key_index, times
from qortex_core.storage.arrow_access import equal_at
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CHUNKS, LanceStore

CHUNK_MANIFEST = "chunk_manifest"  # document id -> the signature its chunks were made from
SHARED_STATE = "chunks_shared"  # stage-state row: chunk ids made by more than one document
SETTINGS_STATE = "chunks_settings"  # stage-state row: the settings of the manifest's chunks


@dataclass(frozen=True)
class Change:
    """The documents chunked again (new or changed signature) and those gone."""

    changed: tuple[str, ...]
    removed: tuple[str, ...]


def _stamp(store: LanceStore, settings: str) -> str:
    """The settings and the chunks table's mark: the manifest describes the chunks table only
    while nothing else has written it (a run from passages, say)."""
    return ids.digest(settings, table_mark(store, CHUNKS), size=16)


def change_since(store: LanceStore, settings: str) -> Change | None:
    """What moved in the documents table since the manifest's chunks were made (None: no usable
    manifest, other settings, or the chunks table written since: the full stage runs)."""
    if store.stage_digest(SETTINGS_STATE) != _stamp(store, settings):
        return None
    now, chunked = _keyed(store, DOCUMENTS), _keyed(store, CHUNK_MANIFEST)
    at = id_keys.index_in(now["id"], chunked["id"])  # (documents,) manifest row, -1 none
    same = np.zeros(len(at), bool)  # (documents,) chunked with the signature it has now
    known = np.flatnonzero(at >= 0)
    same[known] = equal_at(now["signature"], known, chunked["signature"], at[known])
    changed = now["id"].filter(pa.array(~same)).to_pylist()
    gone = ~id_keys.is_in(chunked["id"], now["id"])  # (manifest,) its document deleted
    return Change(
        tuple(sorted(changed)), tuple(sorted(chunked["id"].filter(pa.array(gone)).to_pylist()))
    )


def _keyed(store: LanceStore, table: str) -> pa.Table:
    """``table``'s ids and signatures (an empty table: no row, the same columns)."""
    rows = store.read_columns(table, ["id", "signature"])
    return rows if rows.num_rows else _manifest_rows({})


def record_full(store: LanceStore, settings: str, passages: list[Passage]) -> None:
    """After a full run: the manifest is the documents table, ``shared`` counted afresh."""
    producers: dict[str, set[str]] = {}
    for p in passages:
        producers.setdefault(p.id, set()).add(p.doc_id)
    shared = sorted(k for k, docs in producers.items() if len(docs) > 1)
    rows = store.read_columns(DOCUMENTS, ["id", "signature"])
    store.set_stage_digest(SETTINGS_STATE, "")  # the manifest is being replaced
    store.replace(CHUNK_MANIFEST, rows if rows.num_rows else _manifest_rows({}))
    store.set_stage_digest(SHARED_STATE, json.dumps(shared))
    store.set_stage_digest(SETTINGS_STATE, _stamp(store, settings))


def _manifest_rows(signatures: dict[str, str]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(signatures), pa.string()),
            "signature": pa.array(list(signatures.values()), pa.string()),
        }
    )


def _winners(passages: list[Passage]) -> tuple[dict[str, Passage], set[str]]:
    """Per chunk id, the passage of the last document (by id) that made it; and the ids that
    several documents made."""
    winner: dict[str, Passage] = {}
    makers: dict[str, set[str]] = {}
    for p in sorted(passages, key=lambda p: p.doc_id):  # stable: a document's own order kept
        winner[p.id] = p
        makers.setdefault(p.id, set()).add(p.doc_id)
    return winner, {k for k, docs in makers.items() if len(docs) > 1}


def _placed(store: LanceStore, key: str, values: list[str]) -> dict[str, dict]:
    rows = store.read_where(CHUNKS, key, values)
    columns = ["id", "doc_id", "domain", "time", "ingested_at"]
    if not rows.num_rows:
        return {}
    return {r["id"]: r for r in rows.select(columns).to_pylist()}


@dataclass(frozen=True)
class Increment:
    """The rows to write and delete, and the chunk ids made shared by this change."""

    writes: list[Passage]
    ingested: dict[str, str | None]
    stale: list[str]
    shared: set[str]
    added: int


def plan(
    store: LanceStore, change: Change, passages: list[Passage], shared: set[str]
) -> Increment | None:
    """The rows the full stage would write and delete for this change (None: a shared chunk id
    is touched: only the full stage can tell its producers)."""
    touched = set(change.changed) | set(change.removed)
    winner, several = _winners(passages)
    before = _placed(store, "doc_id", sorted(touched))  # the touched documents' rows
    others = _placed(store, "id", sorted(set(winner) - set(before)))  # the ids' other rows
    if (set(winner) | set(before)) & shared:
        return None
    stamp = times.now_iso()
    writes: list[Passage] = []
    ingested: dict[str, str | None] = {}
    added = 0
    for pid, p in winner.items():
        row = before.get(pid) or others.get(pid)
        if row is not None and row["doc_id"] not in touched and row["doc_id"] > p.doc_id:
            several.add(pid)  # an unchanged, later document keeps the row
            continue
        if row is not None and row["doc_id"] not in touched:
            several.add(pid)  # made by an unchanged document too
        if row is None:
            writes.append(p)
            ingested[pid] = p.ingested_at or stamp
            added += 1
        elif (row["doc_id"], row["domain"], row["time"]) != (p.doc_id, p.domain, p.time):
            writes.append(p)  # same text, new home or time: it keeps its ingest time
            ingested[pid] = row["ingested_at"]
    stale = sorted(pid for pid in before if pid not in winner)
    return Increment(writes, ingested, stale, several, added)


def apply(
    store: LanceStore, change: Change, done: Increment, shared: set[str], settings: str
) -> ChunkReport:
    """Write the increment, then the manifest and ``shared`` (a crash before they are written
    makes the next run chunk in full)."""
    store.set_stage_digest(SETTINGS_STATE, "")
    before = row_changes.version(store, CHUNKS)
    if done.writes:
        store.upsert(CHUNKS, chunk_table(done.writes, done.ingested))
    store.delete(CHUNKS, "id", done.stale)
    key_index.keep_tables(store, CHUNKS_KEYED)
    row_changes.record_since(store, CHUNKS, before, [p.id for p in done.writes], done.stale)
    if change.changed:  # the signatures chunked now
        now = store.read_where(DOCUMENTS, "id", list(change.changed), ["id", "signature"])
        store.upsert(CHUNK_MANIFEST, now.cast(_manifest_rows({}).schema))
    store.delete(CHUNK_MANIFEST, "id", list(change.removed))
    store.set_stage_digest(SHARED_STATE, json.dumps(sorted(shared | done.shared)))
    store.set_stage_digest(SETTINGS_STATE, _stamp(store, settings))
    key_index.keep_tables(store, {CHUNK_MANIFEST: ("id",)})
    return ChunkReport(store.count(CHUNKS), done.added, len(done.stale))


def shared_ids(store: LanceStore) -> set[str]:
    return set(json.loads(store.stage_digest(SHARED_STATE) or "[]"))
