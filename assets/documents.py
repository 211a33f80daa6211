"""``documents``: the source directory's files and the agent's written memories, hashed, with
additions, changes and deletions."""

from pathlib import Path

from dagster import AssetExecutionContext, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import SourceResource, StoreResource
from qortex_core.ingest.document_stage import sync_source
from qortex_core.ingest.documents import Document
from qortex_core.memory.consolidate import MemoryDocs, memory_documents
from qortex_core.storage.writer_lock import ensure_no_other_writer


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
    held: list[MemoryDocs] = []

    def live() -> tuple[Document, ...]:  # after the folder scan: a failed scan merges nothing
        held.append(memory_documents(db))
        return held[0].documents

    run = sync_source(db, source.config() if source.path else None, live)
    found, report, memories = run.found, run.report, held[0]
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
            "reason": run.reason,
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
