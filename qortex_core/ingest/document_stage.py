"""The ``documents`` stage: the source folder's files (only those whose stat moved are read) and
the documents given by the caller (the agent's written memories), synced into the documents
table with additions, changes and deletions; the Dagster asset and the in-process runner both
call :func:`sync_source`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from qortex_core.errors import DatasetError
from qortex_core.ingest.documents import (
    DOCUMENTS,
    Document,
    DocumentReport,
    DocumentSet,
    SourceConfig,
    sync_documents,
)
from qortex_core.ingest.source_manifest import (
    MANIFEST,
    SourceScan,
    record_manifest,
    scan_documents,
    stored_file_ids,
)
from qortex_core.storage import key_index
from qortex_core.storage.store import LanceStore

Memories = Callable[[], Sequence[Document]]  # the live written memories, as documents


@dataclass(frozen=True)
class DocumentsRun:
    """One run of the documents stage.

    Attributes:
        report: what changed in the documents table.
        found: the files read, skipped and kept unchanged by stat.
        memories: the memory documents synced (empty when the stored ones were kept).
        reason: why the stage read what it read.
    """

    report: DocumentReport
    found: DocumentSet
    memories: tuple[Document, ...]
    reason: str


def scan_source(store: LanceStore, source: SourceConfig | None) -> SourceScan:
    """The source folder's documents (only the files whose stat moved are read); with no folder,
    the stored file documents, kept as they are.

    Raises:
        DatasetError: the folder holds no usable document (a missing mount must not wipe the
            index: nothing is changed).
    """
    if source is None:
        return SourceScan(DocumentSet((), (), stored_file_ids(store)), pa.table({}))
    scan = scan_documents(store, source)
    found = scan.found
    if not (found.documents or found.kept):
        raise DatasetError(
            f"no usable document under {source.root} ({len(found.skipped)} files skipped); "
            "nothing was changed"
        )
    return scan


def stored_memory_ids(store: LanceStore) -> tuple[str, ...]:
    """The ids of the memory documents stored (kept as they are when no memories are given)."""
    rows = store.read_columns(DOCUMENTS, ["id", "kind"])
    if not rows.num_rows:
        return ()
    ids_, kinds = rows["id"].to_pylist(), rows["kind"].to_pylist()
    return tuple(sorted(i for i, k in zip(ids_, kinds) if k == "memory"))


def _reason(found: DocumentSet, source: SourceConfig | None) -> str:
    if source is None:
        return "no source folder: the stored file documents kept, written memories synced"
    if found.kept:
        return "files whose size, mtime and inode match the manifest were not read"
    return "no file matched the manifest (first run, or every file changed): every file read"


def sync_source(
    store: LanceStore, source: SourceConfig | None, memories: Memories | None = None
) -> DocumentsRun:
    """Make the documents table hold the source folder's documents and the live memories.

    Args:
        store: the data home's store.
        source: the source folder; None: the stored file documents are kept as they are.
        memories: returns the memory documents, called after the folder is scanned (so a scan
            that fails changes nothing); None: the stored memory documents are kept.

    Raises:
        DatasetError: the source folder holds no usable document.
    """
    scan = scan_source(store, source)
    found = scan.found
    kept = found.kept
    if memories is None:
        live: tuple[Document, ...] = ()
        kept += stored_memory_ids(store)
    else:
        live = tuple(memories())
    report = sync_documents(store, found.documents + live, kept)
    record_manifest(store, scan, report.deleted)
    key_index.keep_tables(store, {DOCUMENTS: ("id",), MANIFEST: ("id",)})
    return DocumentsRun(report, found, live, _reason(found, source))
