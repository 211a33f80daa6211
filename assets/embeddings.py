"""``embeddings``: passages, concepts, facts and rules tables with vectors (cached by model and
text)."""

from dagster import AssetExecutionContext, MaterializeResult, asset

from assets.reporting import markdown_table, progress_logger
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.ingest.stages import EmbedReport, embed_index, upstream_of


def embedding_metadata(report: EmbedReport, model_name: str) -> dict:
    """The ``embeddings`` asset's metadata (one shard or merged shards alike)."""
    rows = {
        "passages": report.passages,
        "concepts": report.concepts,
        "facts": report.facts,
        "rules": report.rules,
    }
    return {
        **rows,
        "texts_embedded": report.texts_embedded,
        "cache_hits": report.cache_hits,  # of the texts looked up in the cache (not the kept)
        "vectors_kept": report.vectors_kept,  # rows whose id and text were stored: not looked up
        "rows_added": report.rows_added,  # rows of the four tables under a new id
        "rows_changed": report.rows_changed,  # rows rewritten under an id they held
        "rows_removed": report.rows_removed,
        "compacted": ", ".join(report.compacted) or "none",  # tables rewritten: many fragments
        "mode": report.mode,
        "reason": report.reason,
        "embedding_model": model_name,
        "dagster/row_count": report.passages,
        "rows": markdown_table(["table", "rows"], list(rows.items())),
    }


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    deps=[upstream_of("embeddings")],
    description="Vectors for passages, concepts, facts and rules; only texts never embedded before "
    "are sent.",
)
def embeddings(
    context: AssetExecutionContext,
    store: StoreResource,
    embedder: EmbedderResource,
    extractor: ExtractorResource,
) -> MaterializeResult:
    model = embedder.get()
    # stages in this process one after another: the passages' BM25 index syncs beside them
    in_process = context.job_def.executor_def.name == "execute_in_process_executor"
    report = embed_index(
        store.open(),
        model,
        extractor.get().cache_key,
        progress=progress_logger(context),
        sync_text=in_process,
    )
    return MaterializeResult(metadata=embedding_metadata(report, model.name))
