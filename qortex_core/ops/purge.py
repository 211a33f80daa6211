"""Purge: make deleted and forgotten data gone from disk, not only from the next snapshot.

LanceDB keeps old table versions, and a row deleted from a table stays in its data file
(hidden by a deletion file) until the file is rewritten. ``purge`` therefore:

1. prunes snapshots to the ``keep`` newest (LATEST always kept) and writes the vector arrays
   and fact tables the kept ones hold as a base file plus a delta whole (the base file keeps
   removed rows: :mod:`qortex_core.storage.snapshot_flatten`);
2. deletes orphans: cached extractions of chunks that no longer exist (their concept and
   fact names are text of the deleted document), and blanks the text and vector of every
   revision of a forgotten memory (the revision rows stay, as history);
3. rewrites every table from its current rows (new data files hold only live rows; the
   full-text index of ``passage_text`` is rebuilt) and re-pins the latest snapshot to the
   rewritten ``passage_text`` version (same rows, so the same BM25 statistics);
4. cleans old versions: every version older than the oldest version an older retained
   snapshot pins is removed (with ``keep`` 1, every old version).

A process that has a table open at a cleaned version (a long-running retriever) reopens it
to see the rewritten one. Text of a deleted document therefore survives only inside a retained
older snapshot that still holds it. The Dagster run history (its previews quote chunk text) is
cleaned by the ``qortex purge`` command (``qortex_cli/commands/purge.py``): the library never
imports Dagster.
"""

from __future__ import annotations

import datetime as dt
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.ingest.shards import drop_staging
from qortex_core.jsonable import JsonRecord
from qortex_core.memory.records import DOC_PREFIX, MEMORIES
from qortex_core.storage import fulltext
from qortex_core.storage import snapshot as snap
from qortex_core.storage.record_lock import records_lock
from qortex_core.storage.retention import prune_snapshots
from qortex_core.storage.snapshot_flatten import flatten, replace_manifest
from qortex_core.storage.store import CHUNKS, EXTRACTIONS, LanceStore, vectors_to_arrow
from qortex_core.storage.writer_lock import writer_lock


@dataclass(frozen=True)
class PurgeReport(JsonRecord):
    """What a purge removed and kept."""

    kept: list[str]
    removed: list[str]
    orphans_removed: dict[str, int]
    optimized: dict[str, int]  # table -> its version after the rewrite and cleanup
    kept_since: str  # versions older than this (ISO time) were cleaned; "" = all old versions
    query_log_removed: int = 0


def _drop_orphans(store: LanceStore) -> dict[str, int]:
    """Cached extractions of chunks that no longer exist, deleted; rows removed per table."""
    chunks = store.read(CHUNKS)
    live = set(chunks["id"].to_pylist()) if chunks.num_rows else set()
    rows = store.read(EXTRACTIONS)
    if rows.num_rows == 0:
        return {EXTRACTIONS: 0}
    dead = sorted(
        {
            k
            for k, p in zip(rows["key"].to_pylist(), rows["passage_id"].to_pylist())
            if p not in live
        }
    )
    for start in range(0, len(dead), 500):
        store.delete(EXTRACTIONS, "key", dead[start : start + 500])
    return {EXTRACTIONS: len(dead)}


def _scrub_forgotten(store: LanceStore) -> int:
    """Forgotten memories' text and vectors blanked in every revision; rows scrubbed.

    The revision rows stay (the history keeps that a record existed and was forgotten); their
    ``text`` becomes "" and their vector zeros, so the words leave the table's live rows and,
    after the rewrite and cleanup, every file.
    """
    if MEMORIES not in store.table_names():
        return 0
    rows = store.open_latest(MEMORIES).to_arrow()
    gone = sorted(forgotten_ids(rows))
    mask = pc.and_(
        pc.is_in(rows["id"], value_set=pa.array(gone, pa.string())),
        pc.not_equal(rows["text"], ""),
    )
    scrubbed = int(pc.sum(mask).as_py() or 0)
    if not scrubbed:
        return 0
    text = pc.if_else(mask, pa.scalar("", rows.schema.field("text").type), rows["text"])
    vectors = rows["vector"].combine_chunks()
    dim = vectors.type.list_size
    flat = np.asarray(vectors.values.to_numpy(zero_copy_only=False)).reshape(-1, dim).copy()
    flat[np.asarray(mask.to_numpy(zero_copy_only=False), bool)] = 0.0  # (n, dim)
    rows = rows.set_column(rows.schema.get_field_index("text"), "text", text)
    rows = rows.set_column(rows.schema.get_field_index("vector"), "vector", vectors_to_arrow(flat))
    store.replace(MEMORIES, rows)
    return scrubbed


def forgotten_ids(rows: pa.Table) -> set[str]:
    """Records of a memories table whose text must go: each record whose newest revision (by
    revision, then write time: whatever the order of the rows) forgets it, and every record
    merged, directly or through others, into one of those."""
    newest: dict[str, tuple[int, str, str, str | None]] = {}
    for rid, rev, at, op, target in zip(
        rows["id"].to_pylist(),
        rows["revision"].to_pylist(),
        rows["created_at"].to_pylist(),
        rows["op"].to_pylist(),
        rows["target"].to_pylist(),
    ):
        if rid not in newest or (rev, at) > newest[rid][:2]:
            newest[rid] = (rev, at, op, target)
    gone = {rid for rid, (_, _, op, _) in newest.items() if op == "forget"}
    merged = {rid: t for rid, (_, _, op, t) in newest.items() if op == "merged" and t}
    while True:  # absorbed copies of a forgotten record, to any depth
        more = {rid for rid, into in merged.items() if into in gone and rid not in gone}
        if not more:
            return gone
        gone |= more


def stale_derivations(home: str | Path) -> str:
    """Why derived tables (chunks, facts, concepts, the latest snapshot) still hold forgotten
    text ("" when they do not): a forgotten memory whose document is still stored, or a
    forgotten file passage whose chunk is. Consolidating (the ingest job) rebuilds them without
    it; ``qortex purge`` does that first, then purges."""
    store = LanceStore.open(home)
    if MEMORIES not in store.table_names():
        return ""
    rows = store.open_latest(MEMORIES).to_arrow()
    gone = forgotten_ids(rows)
    if not gone:
        return ""
    memory_docs = pa.array(sorted(DOC_PREFIX + g for g in gone if g.startswith("m_")), pa.string())
    docs = store.read_columns(DOCUMENTS, ["id"]) if DOCUMENTS in store.table_names() else None
    if docs is not None and docs.num_rows and pc.any(pc.is_in(docs["id"], memory_docs)).as_py():
        return "forgotten memories are still in the documents of the latest ingest"
    passages = pa.array(sorted(g for g in gone if g.startswith("p_")), pa.string())
    chunks = store.read_columns(CHUNKS, ["id"]) if CHUNKS in store.table_names() else None
    if chunks is not None and chunks.num_rows and pc.any(pc.is_in(chunks["id"], passages)).as_py():
        return "forgotten passages are still in the chunks of the latest ingest"
    return ""


def _rewrite(store: LanceStore, name: str) -> int:
    """Rewrite ``name`` from its live rows (a new version with fresh data files).

    Full-text indexes are rebuilt on the same columns (an overwrite drops them).
    """
    from lancedb.index import FTS

    table = store.open_latest(name)
    fts = [list(i.columns) for i in table.list_indices() if i.index_type == "FTS"]
    store.replace(name, table.to_arrow())
    table = store.open_latest(name)
    if table.count_rows():
        for columns in fts:  # FTS() defaults, as the tables that have one build it
            table.create_index(columns[0], config=FTS(), replace=True)
        table = store.open_latest(name)
    return int(table.version)


def _repin(home: str | Path, table: str, version: int) -> None:
    """Point the latest snapshot's pin of ``table`` at ``version`` (atomic manifest swap)."""
    folder = snap.snapshots_dir(home) / snap.latest_name(home)
    manifest = json.loads((folder / "manifest.json").read_text())
    if table not in (manifest.get("table_versions") or {}):
        return
    manifest["table_versions"][table] = version
    manifest["purged"] = dt.datetime.now(dt.timezone.utc).isoformat()
    replace_manifest(folder, manifest)


def _older_created(home: str | Path, kept: list[str]) -> str:
    """Creation time of the oldest retained snapshot other than LATEST ("" when none)."""
    if not kept:
        return ""
    latest = snap.latest_name(home)
    times = []
    for name in kept:
        if name == latest:
            continue
        manifest = json.loads((snap.snapshots_dir(home) / name / "manifest.json").read_text())
        times.append(str(manifest.get("created", "")))
    return min((t for t in times if t), default="")


def purge(home: str | Path, keep: int = 1) -> PurgeReport:
    """Prune to ``keep`` snapshots, drop orphans, rewrite tables and clean their old versions.

    Holds the home's writer lock, so no ingest runs meanwhile, and the records lock while it
    scrubs and rewrites the memories table, so agent writes wait for it instead of being lost;
    readers are not blocked (a reader of a cleaned version reopens the newest).

    Raises:
        ConfigError: ``keep`` is below 1.
        HomeBusyError: another process is writing to ``home``.
    """
    with writer_lock(home, "qortex purge"):
        pruned = prune_snapshots(home, keep, optimize=False)
        for name in pruned.kept:  # their base files hold removed rows: written whole
            flatten(home, name)
        store = LanceStore.open(home)
        drop_staging(store)  # rows a failed sharded run staged (chunk text among them)
        orphans = _drop_orphans(store)
        since = _older_created(home, pruned.kept)
        age = dt.timedelta(0)
        if since:
            age = dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(since)
        rewritten: dict[str, int] = {}
        for name in store.table_names():
            if name == MEMORIES:
                with records_lock(home):  # writers wait: none appends to a table being replaced
                    orphans[MEMORIES] = _scrub_forgotten(store)
                    rewritten[name] = _rewrite_and_clean(store, name, age, home, pruned.kept)
            else:
                rewritten[name] = _rewrite_and_clean(store, name, age, home, pruned.kept)
        orphans.setdefault(MEMORIES, 0)
    return PurgeReport(
        pruned.kept, pruned.removed, orphans, rewritten, since, pruned.query_log_removed
    )


def _rewrite_and_clean(
    store: LanceStore, name: str, age: dt.timedelta, home: str | Path, kept: list[str]
) -> int:
    """Rewrite ``name`` from its live rows, re-pin it if the latest snapshot pins it, and clean
    every version older than ``age``; the table's version after."""
    version = _rewrite(store, name)
    if name == fulltext.PASSAGE_TEXT:
        fulltext.finish_rebuild(store.open_latest(name))
        version = int(store.open_latest(name).version)
    if name == fulltext.PASSAGE_TEXT and kept:
        _repin(home, name, version)
    with warnings.catch_warnings():  # "removes every version but the latest": meant
        warnings.simplefilter("ignore", UserWarning)
        store.open_latest(name).optimize(cleanup_older_than=age, delete_unverified=True)
    return int(store.open_latest(name).version)
