"""``chunks``: documents cut into token-bounded, overlapping passages (content-hash ids)."""

from dagster import AssetExecutionContext, Config, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import EmbedderResource, StoreResource
from qortex_core.embed import TokenWindow, token_window
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents
from qortex_core.ingest.documents import Document, read_stored_documents
from qortex_core.ingest.stages import ChunkReport, sync_chunks, upstream_of
from qortex_core.memory.consolidate import forgotten_passages
from qortex_core.storage.model import Passage


class ChunkingConfig(Config):
    """Chunk size cap and overlap, in the embedder's own tokens (its window caps the size)."""

    max_tokens: int = 512
    overlap_tokens: int = 64


def chunk(
    config: ChunkingConfig, window: TokenWindow, documents: list[Document]
) -> tuple[list[Passage], dict]:
    """The documents' passages and the sizing metadata (sizes, tokenizer, longest chunk)."""
    size = min(config.max_tokens, window.max_tokens)  # (title + chunk) fits the model's window
    overlap = min(config.overlap_tokens, size // 2)
    passages = chunk_documents(documents, ChunkConfig(size, overlap), window.count)
    return passages, {
        "max_tokens": size,
        "overlap_tokens": overlap,
        "tokenizer": window.tokenizer,
        "embedder_window": window.max_tokens,
        "longest_chunk_tokens": max((window.count(p.full_text) for p in passages), default=0),
    }


def chunk_metadata(report: ChunkReport, passages: list[Passage], hidden: int, sizing: dict) -> dict:
    """The ``chunks`` asset's metadata (one shard or merged shards alike)."""
    return {
        "chunks": report.total,
        "new_chunks": report.added,
        "deleted_chunks": report.removed,
        "forgotten_passages": hidden,
        "documents": len({p.doc_id for p in passages}),
        **sizing,
        "dagster/row_count": report.total,
        "preview": markdown_table(
            ["id", "document", "title", "text"],
            [(p.id, p.doc_id, p.title, p.text) for p in passages],
        ),
    }


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
    passages, sizing = chunk(config, token_window(embedder.get()), read_stored_documents(db))
    hidden = forgotten_passages(db)  # file passages forgotten by id, while their file is unchanged
    passages = [p for p in passages if p.id not in hidden]
    report = sync_chunks(db, passages)
    context.log.info(f"{report.total} chunks ({report.added} new, {report.removed} removed)")
    return MaterializeResult(metadata=chunk_metadata(report, passages, len(hidden), sizing))
