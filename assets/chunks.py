"""``chunks``: documents cut into token-bounded, overlapping passages (content-hash ids)."""

from dagster import AssetExecutionContext, Config, MaterializeResult, asset

from assets.documents import documents
from assets.reporting import markdown_table
from pipelines.resources import StoreResource
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents
from qortex_core.ingest.documents import read_stored_documents
from qortex_core.ingest.stages import sync_chunks
from qortex_core.memory.consolidate import forgotten_passages


class ChunkingConfig(Config):
    """Chunk size and overlap in tokens (``\\w+|[^\\w\\s]``)."""

    max_tokens: int = 512
    overlap_tokens: int = 64


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    deps=[documents],
    description="Token-aware chunks with overlap.",
)
def chunks(
    context: AssetExecutionContext, config: ChunkingConfig, store: StoreResource
) -> MaterializeResult:
    db = store.open()
    passages = chunk_documents(
        read_stored_documents(db), ChunkConfig(config.max_tokens, config.overlap_tokens)
    )
    hidden = forgotten_passages(db)  # file passages forgotten by id, while their file is unchanged
    passages = [p for p in passages if p.id not in hidden]
    report = sync_chunks(db, passages)
    context.log.info(f"{report.total} chunks ({report.added} new, {report.removed} removed)")
    return MaterializeResult(
        metadata={
            "chunks": report.total,
            "new_chunks": report.added,
            "deleted_chunks": report.removed,
            "forgotten_passages": len(hidden),
            "documents": len({p.doc_id for p in passages}),
            "max_tokens": config.max_tokens,
            "overlap_tokens": config.overlap_tokens,
            "preview": markdown_table(
                ["id", "document", "title", "text"],
                [(p.id, p.doc_id, p.title, p.text) for p in passages],
            ),
        }
    )
