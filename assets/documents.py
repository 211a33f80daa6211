"""``documents``: the source directory's files, hashed, with additions, changes and deletions."""

from dagster import AssetExecutionContext, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import SourceResource, StoreResource
from qortex_core.errors import DatasetError
from qortex_core.ingest.documents import load_documents, sync_documents


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    description="Source files (md, txt, corpus json) with content hashes.",
)
def documents(
    context: AssetExecutionContext, source: SourceResource, store: StoreResource
) -> MaterializeResult:
    found = load_documents(source.config())
    if (
        not found.documents
    ):  # a missing mount must not wipe the index: publish nothing, change nothing
        raise DatasetError(
            f"no usable document under {source.path} ({len(found.skipped)} files skipped); nothing was changed"
        )
    report = sync_documents(store.open(), found.documents)
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
            "skipped_files": len(found.skipped),
            "source": source.path,
            "changes": markdown_table(["document", "change"], changes),
            "skipped": markdown_table(
                ["file", "reason"], [(s.path, s.reason) for s in found.skipped]
            ),
            "preview": markdown_table(
                ["document", "domain", "kind", "sections", "hash"],
                [
                    (d.doc_id, d.domain, d.kind, len(d.sections), d.content_hash[:12])
                    for d in found.documents
                ],
            ),
        }
    )
