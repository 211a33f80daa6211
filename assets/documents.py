"""``documents``: the source directory's files and the agent's written memories, hashed, with
additions, changes and deletions."""

from pathlib import Path

import pyarrow as pa
from dagster import AssetExecutionContext, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import SourceResource, StoreResource
from qortex_core.errors import DatasetError
from qortex_core.ingest.documents import DocumentSet, sync_documents
from qortex_core.ingest.source_manifest import (
    SourceScan,
    record_manifest,
    scan_documents,
    stored_file_ids,
)
from qortex_core.memory.consolidate import memory_documents
from qortex_core.storage.writer_lock import ensure_no_other_writer


def _files(source: SourceResource, db) -> SourceScan:
    """The source folder's documents (only the files whose stat moved are read); with no folder
    configured, the file documents stored, kept as they are."""
    if not source.path:
        return SourceScan(DocumentSet((), (), stored_file_ids(db)), pa.table({}))
    scan = scan_documents(db, source.config())
    found = scan.found
    if not (found.documents or found.kept):
        # a missing mount must not wipe the index: publish nothing, change nothing
        raise DatasetError(
            f"no usable document under {source.path} ({len(found.skipped)} files skipped); "
            "nothing was changed"
        )
    return scan


def _reason(found: DocumentSet, source: SourceResource) -> str:
    """Why the documents step read what it read (the ``reason`` metadata)."""
    if not source.path:
        return "no source folder: the stored file documents kept, written memories synced"
    if found.kept:
        return "files whose size, mtime and inode match the manifest were not read"
    return "no file matched the manifest (first run, or every file changed): every file read"


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    description="Source files (md, txt, corpus json) and live written memories, content-hashed.",
)
def documents(
    context: AssetExecutionContext,
    source: SourceResource,
    store: StoreResource,
) -> MaterializeResult:
    # a run from the UI, a schedule or a sensor stops here while `qortex ingest` writes the home
    ensure_no_other_writer(store.home if "://" in store.home else Path(store.home).expanduser())
    db = store.open()
    scan = _files(source, db)
    found = scan.found
    memories = memory_documents(db)
    report = sync_documents(db, found.documents + memories.documents, found.kept)
    record_manifest(db, scan, report.deleted)
    for skip in found.skipped:
        context.log.warning(f"skipped {skip.path}: {skip.reason}")
    changes = (
        [(d, "new") for d in report.new]
        + [(d, "changed") for d in report.changed]
        + [(d, "deleted") for d in report.deleted]
    )
    return MaterializeResult(
        metadata={
            "documents": report.total,
            "dagster/row_count": report.total,
            "new_documents": len(report.new),
            "changed_documents": len(report.changed),
            "deleted_documents": len(report.deleted),
            "unchanged_documents": report.unchanged,
            "rows_added": len(report.new),
            "rows_changed": len(report.changed),
            "rows_removed": len(report.deleted),
            "files_read": len(found.documents),
            "files_unchanged_by_stat": len(found.kept),
            "mode": "incremental" if found.kept else "full",
            "reason": _reason(found, source),
            "skipped_files": len(found.skipped),
            "memories": len(memories.documents),
            "merged_memories": len(memories.merged),
            "memories_version": memories.version,
            "memory_vectors_cached": memories.cached_vectors,
            "source": source.path or "(stored documents)",
            "changes": markdown_table(["document", "change"], changes),
            "skipped": markdown_table(
                ["file", "reason"], [(s.path, s.reason) for s in found.skipped]
            ),
            "preview": markdown_table(
                ["document", "domain", "kind", "sections", "hash"],
                [
                    (d.doc_id, d.domain, d.kind, len(d.sections), d.content_hash[:12])
                    for d in found.documents + memories.documents
                ],
            ),
        }
    )
