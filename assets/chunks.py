"""``chunks``: documents cut into token-bounded, overlapping passages (content-hash ids)."""

from dagster import AssetExecutionContext, Config, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import EmbedderResource, StoreResource
from qortex_core.embed import token_window
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents
from qortex_core.ingest.documents import read_stored_documents
from qortex_core.ingest.stages import sync_chunks, upstream_of
from qortex_core.memory.consolidate import forgotten_passages


class ChunkingConfig(Config):
    """Chunk size cap and overlap, in the embedder's own tokens (its window caps the size)."""

    max_tokens: int = 512
    overlap_tokens: int = 64


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    deps=[upstream_of("chunks")],
    description="Chunks with overlap, sized by the embedder's tokenizer to fit its window.",
)
def chunks(
    context: AssetExecutionContext,
    config: ChunkingConfig,
    store: StoreResource,
    embedder: EmbedderResource,
) -> MaterializeResult:
    db = store.open()
    window = token_window(embedder.get())
    size = min(config.max_tokens, window.max_tokens)  # (title + chunk) fits the model's window
    overlap = min(config.overlap_tokens, size // 2)
    passages = chunk_documents(read_stored_documents(db), ChunkConfig(size, overlap), window.count)
    hidden = forgotten_passages(db)  # file passages forgotten by id, while their file is unchanged
    passages = [p for p in passages if p.id not in hidden]
    longest = max((window.count(p.full_text) for p in passages), default=0)
    report = sync_chunks(db, passages)
    context.log.info(f"{report.total} chunks ({report.added} new, {report.removed} removed)")
    return MaterializeResult(
        metadata={
            "chunks": report.total,
            "new_chunks": report.added,
            "deleted_chunks": report.removed,
            "forgotten_passages": len(hidden),
            "documents": len({p.doc_id for p in passages}),
            "max_tokens": size,
            "overlap_tokens": overlap,
            "tokenizer": window.tokenizer,
            "embedder_window": window.max_tokens,
            "longest_chunk_tokens": longest,
            "dagster/row_count": report.total,
            "preview": markdown_table(
                ["id", "document", "title", "text"],
                [(p.id, p.doc_id, p.title, p.text) for p in passages],
            ),
        }
    )
