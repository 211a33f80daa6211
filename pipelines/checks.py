"""Asset checks: the graph has no dangling edges, every chunk is extracted or recorded as failed,
and the published snapshot loads and answers a probe query."""

import numpy as np
from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.ingest.budget import FailureBudget, judge
from qortex_core.ingest.stages import extraction_key, read_chunks
from qortex_core.query.retriever import Retriever
from qortex_core.storage.store import CONCEPTS, EXTRACTIONS, FACTS, PASSAGES, SYNONYMS, LanceStore


def _column(store: LanceStore, table: str, column: str) -> list:
    rows = store.read(table)
    return rows[column].to_pylist() if rows.num_rows else []


def dangling_edges(store: LanceStore) -> dict[str, int]:
    """Edges whose endpoint is not a node: fact and synonym endpoints, concept -> passage links."""
    concepts, passages = set(_column(store, CONCEPTS, "id")), set(_column(store, PASSAGES, "id"))
    facts = list(zip(_column(store, FACTS, "subject_id"), _column(store, FACTS, "object_id")))
    synonyms = list(zip(_column(store, SYNONYMS, "a"), _column(store, SYNONYMS, "b")))
    links = [pid for plist in _column(store, CONCEPTS, "passage_ids") for pid in plist]
    return {
        "fact": sum(s not in concepts or o not in concepts for s, o in facts),
        "synonym": sum(a not in concepts or b not in concepts for a, b in synonyms),
        "contains": sum(pid not in passages for pid in links),
    }


@asset_check(
    asset=graph_snapshot, description="Every fact, synonym and passage link ends at a node."
)
def no_dangling_edges(store: StoreResource) -> AssetCheckResult:
    found = dangling_edges(store.open())
    return AssetCheckResult(
        passed=sum(found.values()) == 0, metadata={f"dangling_{k}": v for k, v in found.items()}
    )


def extraction_status(store: LanceStore, extractor_key: str) -> dict[str, int]:
    """Chunks with a successful extraction, a recorded failure, or nothing at all."""
    status = dict(zip(_column(store, EXTRACTIONS, "key"), _column(store, EXTRACTIONS, "status")))
    found = [status.get(extraction_key(p.id, extractor_key)) for p in read_chunks(store)]
    return {
        "ok": sum(s == "ok" for s in found),
        "failed": sum(s not in (None, "ok") for s in found),
        "missing": sum(s is None for s in found),
    }


@asset_check(
    asset=extractions,
    description="Every chunk is extracted or recorded as failed; nothing silently dropped.",
)
def every_chunk_accounted(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = extraction_status(store.open(), extractor.get().cache_key)
    return AssetCheckResult(passed=counts["missing"] == 0, metadata=counts)


@asset_check(
    asset=extractions, description="No chunk is left failed (failures are retried on the next run)."
)
def no_failed_extractions(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = extraction_status(store.open(), extractor.get().cache_key)
    return AssetCheckResult(
        passed=counts["failed"] == 0, severity=AssetCheckSeverity.WARN, metadata=counts
    )


def failed_extraction_errors(store: LanceStore, extractor_key: str) -> tuple[list[str], int]:
    """The recorded errors of the current chunks whose extraction failed, and the chunk count."""
    rows = store.read(EXTRACTIONS)
    found = (
        {
            k: (s, e)
            for k, s, e in zip(
                rows["key"].to_pylist(), rows["status"].to_pylist(), rows["error"].to_pylist()
            )
        }
        if rows.num_rows
        else {}
    )
    chunks = read_chunks(store)
    states = [found.get(extraction_key(p.id, extractor_key)) for p in chunks]
    return [str(e) for s, e in filter(None, states) if s != "ok"], len(chunks)


@asset_check(
    asset=extractions,
    blocking=True,
    description="Failed chunks within the failure budget (any HTTP 401/403/404, or over 5% "
    "failed, fails the run: no snapshot is published and the previous one keeps answering).",
)
def within_failure_budget(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    errors, chunks = failed_extraction_errors(store.open(), extractor.get().cache_key)
    verdict = judge(errors, chunks, FailureBudget.from_env())
    return AssetCheckResult(
        passed=verdict.passed,
        severity=AssetCheckSeverity.ERROR,
        description=verdict.message,
        metadata={
            "chunks": verdict.chunks,
            "failed": verdict.failed,
            "permanent": verdict.permanent,
            "reason": verdict.message,
        },
    )


@asset_check(
    asset=graph_snapshot,
    description="The latest snapshot loads (checksums verified) and answers a probe query.",
)
def snapshot_answers_probe(store: StoreResource, embedder: EmbedderResource) -> AssetCheckResult:
    """Query the snapshot with one of its own passages (its stored vector, so no model is loaded or called)."""
    retriever = Retriever.open(store.snapshots(), embedder=embedder.get())
    passages = retriever.snapshot.tables["passages"]
    if passages.num_rows == 0:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            metadata={"reason": "snapshot has no passages"},
        )
    row = passages.num_rows // 2
    probe = passages.slice(row, 1).to_pylist()[0]
    vector = np.asarray(retriever.passage_vectors[row], dtype=np.float32)
    text = f"{probe['title']} {probe['text']}"[:2000]
    graph = retriever.search(text, vector, top_k=3, mode="hipporag")
    dense = retriever.search(text, vector, top_k=1, mode="dense")
    found = bool(dense.passages) and dense.passages[0].id == probe["id"]
    model = retriever.snapshot.manifest.get("embedding_model")
    return AssetCheckResult(
        passed=bool(graph.passages) and found and model == embedder.get().name,
        metadata={
            "snapshot": retriever.snapshot.manifest.get("name", ""),
            "probe_passage": probe["id"],
            "hipporag_hits": len(graph.passages),
            "dense_top1_is_probe": found,
            "embedding_model": str(model),
            "fallback": graph.fallback or "",
        },
    )


INGEST_CHECKS = (
    no_dangling_edges,
    every_chunk_accounted,
    no_failed_extractions,
    within_failure_budget,
    snapshot_answers_probe,
)
