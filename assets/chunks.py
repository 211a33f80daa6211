"""``chunks``: documents cut into token-bounded, overlapping passages (content-hash ids)."""

from functools import partial

from dagster import AssetExecutionContext, Config, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import EmbedderResource, StoreResource
from qortex_core.embed import TokenWindow, token_window
from qortex_core.ingest import document_chunks
from qortex_core.ingest.documents import Document
from qortex_core.ingest.stages import ChunkReport, upstream_of
from qortex_core.memory.consolidate import forgotten_passages
from qortex_core.storage.model import Passage


class ChunkingConfig(Config):
    """Chunk size cap and overlap, in the embedder's own tokens (its window caps the size)."""

    max_tokens: int = 512
    overlap_tokens: int = 64


def chunk(
    config: ChunkingConfig, window: TokenWindow, documents: list[Document]
) -> tuple[list[Passage], dict]:
    """The documents' passages and the sizing metadata (:func:`document_chunks.chunk`)."""
    return document_chunks.chunk(window, documents, config.max_tokens, config.overlap_tokens)


def chunk_metadata(report: ChunkReport, passages: list[Passage], hidden: int, sizing: dict) -> dict:
    """The ``chunks`` asset's metadata (one shard or merged shards alike)."""
    return {
        "chunks": report.total,
        "new_chunks": report.added,
        "deleted_chunks": report.removed,
        "forgotten_passages": hidden,
        "documents": len({p.doc_id for p in passages}),  # chunked by this run
        "rows_added": report.added,
        "rows_removed": report.removed,
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
    hidden = forgotten_passages(db)  # file passages forgotten by id, while their file is unchanged
    model = embedder.get()  # its tokenizer is loaded only when there is something to chunk
    run = document_chunks.chunk_stored(
        db,
        partial(token_window, model),
        hidden,
        config.max_tokens,
        config.overlap_tokens,
        identity=model.name,
    )
    report = run.report
    context.log.info(f"{report.total} chunks ({report.added} new, {report.removed} removed)")
    metadata = chunk_metadata(report, run.passages, len(hidden), run.sizing)
    return MaterializeResult(metadata={**metadata, "mode": run.mode, "reason": run.reason})
