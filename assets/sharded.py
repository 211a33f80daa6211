"""The ingestion assets split into shards (``QORTEX_SHARDS`` = N > 1), one Dagster step each.

``documents -> chunks_s0..chunks_s{N-1} -> chunks -> extractions_s0.. -> extractions ->
embeddings_s0.. -> embeddings -> synonym_edges -> graph_snapshot``: shard ``i`` of a stage works
on the documents whose id hashes to ``i`` (:func:`qortex_core.ingest.shards.shard_of`) and writes
only its own staging table; the stage's usual asset (same key, same metadata, same checks) then
merges every shard's rows as the one writer of the shared table. The executor runs a stage's
shards at once (multiprocess: a process each; dask: a task each on the cluster's workers); each
shard's metadata names the worker (``worker``, ``pid``) that ran it.
"""

import os
import socket
import sys

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    MaterializeResult,
    asset,
)

from assets.chunks import ChunkingConfig, chunk, chunk_metadata
from assets.embeddings import embedding_metadata
from assets.extractions import counters, extraction_metadata
from assets.reporting import progress_logger
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.embed import token_window
from qortex_core.ingest import shards as sh
from qortex_core.ingest.documents import read_stored_documents
from qortex_core.memory.consolidate import forgotten_passages

SHARD_TAG = "qortex/shard"  # op tag: the shard index (the dask executor places shards by it)


def shard_key(stage: str, index: int) -> str:
    """The asset name of shard ``index`` of ``stage`` (``chunks_s0``)."""
    return f"{stage}_s{index}"


def _shard(context: AssetExecutionContext, index: int, count: int) -> sh.Shard:
    return sh.Shard(index, count, sh.run_token(context.run_id))


def worker() -> dict[str, str | int]:
    """Which process ran this step: the dask worker's address inside a dask worker, else
    ``host:pid``; and the pid."""
    where = f"{socket.gethostname()}:{os.getpid()}"
    if "distributed" in sys.modules:  # imported by a dask worker; never imported here
        from distributed import get_worker

        try:
            where = get_worker().address
        except ValueError:  # not inside a dask worker
            pass
    return {"worker": where, "pid": os.getpid()}


def shard_metadata(context: AssetExecutionContext, stage: str, count: int) -> list[dict]:
    """This run's metadata of every shard of ``stage``, in shard order.

    Raises:
        ShardError: a shard has no materialization in this run.
    """
    out = []
    for i in range(count):
        event = context.instance.get_latest_materialization_event(AssetKey(shard_key(stage, i)))
        if event is None or event.run_id != context.run_id or not event.asset_materialization:
            raise sh.ShardError(f"{shard_key(stage, i)} did not run in this run")
        out.append({k: v.value for k, v in event.asset_materialization.metadata.items()})
    return out


# -- chunks -------------------------------------------------------------------------------
def _chunk_shard(index: int, count: int) -> AssetsDefinition:
    @asset(
        name=shard_key("chunks", index),
        group_name="ingest",
        op_tags={SHARD_TAG: str(index)},
        kinds={"lancedb"},
        deps=["documents"],
        description=f"Chunks of shard {index} of {count} of the documents, staged for `chunks`.",
    )
    def chunk_shard(
        context: AssetExecutionContext,
        config: ChunkingConfig,
        store: StoreResource,
        embedder: EmbedderResource,
    ) -> MaterializeResult:
        db = store.open()
        mine = [d for d in read_stored_documents(db) if sh.shard_of(d.doc_id, count) == index]
        passages, sizing = chunk(config, token_window(embedder.get()), mine)
        staged = sh.stage_chunks(db, passages, _shard(context, index, count))
        return MaterializeResult(
            metadata={**worker(), "documents": len(mine), "chunks": staged, **sizing}
        )

    return chunk_shard


def _merged_chunks(count: int) -> AssetsDefinition:
    @asset(
        name="chunks",
        group_name="ingest",
        kinds={"lancedb"},
        deps=[shard_key("chunks", i) for i in range(count)],
        description=f"Chunks with overlap: the {count} shards' staged chunks merged.",
    )
    def chunks(context: AssetExecutionContext, store: StoreResource) -> MaterializeResult:
        db = store.open()
        hidden = frozenset(forgotten_passages(db))
        token = sh.run_token(context.run_id)
        report, passages = sh.merge_chunks(db, count, token, hidden)
        shards = shard_metadata(context, "chunks", count)
        sizing = {k: shards[0][k] for k in ("max_tokens", "overlap_tokens", "tokenizer")}
        sizing["embedder_window"] = shards[0]["embedder_window"]
        sizing["longest_chunk_tokens"] = max(s["longest_chunk_tokens"] for s in shards)
        context.log.info(f"{report.total} chunks ({report.added} new, {report.removed} removed)")
        return MaterializeResult(metadata=chunk_metadata(report, passages, len(hidden), sizing))

    return chunks


# -- extractions --------------------------------------------------------------------------
def _extraction_shard(index: int, count: int) -> AssetsDefinition:
    @asset(
        name=shard_key("extractions", index),
        group_name="ingest",
        op_tags={SHARD_TAG: str(index)},
        kinds={"openai", "lancedb"},
        deps=["chunks"],
        pool="llm",
        description=f"OpenIE of shard {index} of {count} of the chunks, staged for `extractions`.",
    )
    def extraction_shard(
        context: AssetExecutionContext, store: StoreResource, extractor: ExtractorResource
    ) -> MaterializeResult:
        ex = extractor.get()
        before = counters(ex)
        shard = _shard(context, index, count)
        report = sh.stage_extractions(store.open(), ex, shard, progress=progress_logger(context))
        used = {name: value - before[name] for name, value in counters(ex).items()}
        return MaterializeResult(
            metadata={**worker(), **extraction_metadata(context, report, ex, used)}
        )

    return extraction_shard


def _merged_extractions(count: int) -> AssetsDefinition:
    @asset(
        name="extractions",
        group_name="ingest",
        kinds={"openai", "lancedb"},
        deps=[shard_key("extractions", i) for i in range(count)],
        description=f"OpenIE per chunk: the {count} shards' staged extractions merged.",
    )
    def extractions(
        context: AssetExecutionContext, store: StoreResource, extractor: ExtractorResource
    ) -> MaterializeResult:
        report = sh.merge_extractions(store.open(), count, sh.run_token(context.run_id))
        shards = shard_metadata(context, "extractions", count)
        used = {
            "calls": sum(s["llm_calls"] for s in shards),
            "prompt_tokens": sum(s["prompt_tokens"] for s in shards),
            "completion_tokens": sum(s["completion_tokens"] for s in shards),
        }
        metadata = extraction_metadata(context, report, extractor.get(), used)
        return MaterializeResult(metadata=metadata)

    return extractions


# -- embeddings ---------------------------------------------------------------------------
def _embedding_shard(index: int, count: int) -> AssetsDefinition:
    @asset(
        name=shard_key("embeddings", index),
        group_name="ingest",
        op_tags={SHARD_TAG: str(index)},
        kinds={"lancedb"},
        deps=["extractions"],
        description=f"Vectors of shard {index} of {count} not cached yet, staged for `embeddings`.",
    )
    def embedding_shard(
        context: AssetExecutionContext,
        store: StoreResource,
        embedder: EmbedderResource,
        extractor: ExtractorResource,
    ) -> MaterializeResult:
        key, shard = extractor.get().cache_key, _shard(context, index, count)
        embedded, hits = sh.stage_embeddings(store.open(), embedder.get(), key, shard)
        return MaterializeResult(
            metadata={**worker(), "texts_embedded": embedded, "cache_hits": hits}
        )

    return embedding_shard


def _merged_embeddings(count: int) -> AssetsDefinition:
    @asset(
        name="embeddings",
        group_name="ingest",
        kinds={"lancedb"},
        deps=[shard_key("embeddings", i) for i in range(count)],
        description=f"Vectors for passages, concepts, facts and rules: the {count} shards' new "
        "vectors merged into the cache, the tables built from it.",
    )
    def embeddings(
        context: AssetExecutionContext,
        store: StoreResource,
        embedder: EmbedderResource,
        extractor: ExtractorResource,
    ) -> MaterializeResult:
        model, key = embedder.get(), extractor.get().cache_key
        token = sh.run_token(context.run_id)
        progress = progress_logger(context)
        report = sh.merge_embeddings(store.open(), model, key, count, token, progress)
        return MaterializeResult(metadata=embedding_metadata(report, model.name))

    return embeddings


def sharded_assets(count: int) -> tuple[AssetsDefinition, ...]:
    """The shard assets and the three merging assets (keys ``chunks``, ``extractions``,
    ``embeddings``) for ``count`` > 1 shards, in stage order."""
    out: list[AssetsDefinition] = []
    for shard, merged in (
        (_chunk_shard, _merged_chunks),
        (_extraction_shard, _merged_extractions),
        (_embedding_shard, _merged_embeddings),
    ):
        out += [shard(i, count) for i in range(count)]
        out.append(merged(count))
    return tuple(out)
