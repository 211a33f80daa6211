"""Asset checks: thin adapters over the check functions of :mod:`qortex_core.ops.doctor`.

The graph has no dangling edges, every chunk is extracted or recorded as failed, and the
published snapshot loads and answers a probe query (the same probe as ``qortex doctor``).
"""

from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.ingest.budget import FailureBudget, judge
from qortex_core.ingest.stage_inputs import remembered
from qortex_core.ops.doctor import (
    DoctorConfig,
    check_probe,
    dangling_edges,
    extraction_status,
    failed_extraction_errors,
)
from qortex_core.storage.store import CHUNKS, CONCEPTS, EXTRACTIONS, FACTS, PASSAGES, SYNONYMS

GRAPH_TABLES = (CONCEPTS, PASSAGES, FACTS, SYNONYMS)
EXTRACT_TABLES = (CHUNKS, EXTRACTIONS)  # what the extraction checks read


def _extraction_status(store: StoreResource, extractor: ExtractorResource) -> dict[str, int]:
    """:func:`extraction_status`, read again only when the chunks or extractions were written."""
    db, key = store.open(), extractor.get().cache_key
    return remembered(
        db, "extraction_status", EXTRACT_TABLES, lambda: extraction_status(db, key), key
    )


@asset_check(
    asset=graph_snapshot, description="Every fact, synonym and passage link ends at a node."
)
def no_dangling_edges(store: StoreResource) -> AssetCheckResult:
    db = store.open()
    found = remembered(db, "dangling_edges", GRAPH_TABLES, lambda: dangling_edges(db))
    return AssetCheckResult(
        passed=sum(found.values()) == 0, metadata={f"dangling_{k}": v for k, v in found.items()}
    )


@asset_check(
    asset=extractions,
    description="Every chunk is extracted or recorded as failed; nothing silently dropped.",
)
def every_chunk_accounted(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = _extraction_status(store, extractor)
    return AssetCheckResult(passed=counts["missing"] == 0, metadata=counts)


@asset_check(
    asset=extractions, description="No chunk is left failed (failures are retried on the next run)."
)
def no_failed_extractions(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = _extraction_status(store, extractor)
    return AssetCheckResult(
        passed=counts["failed"] == 0, severity=AssetCheckSeverity.WARN, metadata=counts
    )


@asset_check(
    asset=extractions,
    blocking=True,
    description="Failed chunks within the failure budget (any HTTP 401/403/404, or over 5% "
    "failed, fails the run: no snapshot is published and the previous one keeps answering).",
)
def within_failure_budget(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    db, key = store.open(), extractor.get().cache_key
    errors, chunks = remembered(
        db, "failed_extractions", EXTRACT_TABLES, lambda: failed_extraction_errors(db, key), key
    )
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
    blocking=True,
    description="The latest snapshot loads, was built with the configured embedder and answers "
    "a probe query (the probe of `qortex doctor`; graph_snapshot runs it before it moves LATEST, "
    "so a failure here fails the run).",
)
def snapshot_answers_probe(store: StoreResource, embedder: EmbedderResource) -> AssetCheckResult:
    """``qortex doctor``'s probe on the published snapshot."""
    check = check_probe(store.snapshots(), embedder.get(), DoctorConfig(probe_embeds=False))
    return AssetCheckResult(
        passed=check.ok,
        severity=AssetCheckSeverity.ERROR,
        metadata={"probe": check.detail, "reason": f"probe failed: {check.detail}"},
    )


INGEST_CHECKS = (
    no_dangling_edges,
    every_chunk_accounted,
    no_failed_extractions,
    within_failure_budget,
    snapshot_answers_probe,
)
