"""Asset checks: thin adapters over the check functions of :mod:`qortex_core.ops.doctor` and
:mod:`qortex_core.ops.table_checks`.

The graph has no dangling edges, every chunk is extracted or recorded as failed, and the
published snapshot loads and answers a probe query (the same probe as ``qortex doctor``).
A check whose inputs did not move since it last ran (the tables it reads, by their versions;
the snapshot it probed, by name and manifest file) gives its remembered result: an unchanged
run does not scan the corpus again, nor load the snapshot and the embedding model. What the
graph_snapshot stage already established is remembered by it: the probe its gate passed, and
the dangling edges it counted while building (a run that publishes does not check twice).
"""

from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.ingest.budget import FailureBudget, judge
from qortex_core.ingest.stage_inputs import remembered
from qortex_core.ops.probe_memo import remembered_probe
from qortex_core.ops.table_checks import extraction_states, remembered_dangling
from qortex_core.storage.store import CHUNKS, EXTRACTIONS

EXTRACT_TABLES = (CHUNKS, EXTRACTIONS)  # what the extraction checks read


def _extraction_states(store: StoreResource, extractor: ExtractorResource) -> dict:
    """:func:`extraction_states` (the three extraction checks' one pass over the chunks), read
    again only when the chunks or extractions were written."""
    db, key = store.open(), extractor.get().cache_key
    return remembered(
        db, "extraction_states", EXTRACT_TABLES, lambda: extraction_states(db, key), key
    )


@asset_check(
    asset=graph_snapshot, description="Every fact, synonym and passage link ends at a node."
)
def no_dangling_edges(store: StoreResource) -> AssetCheckResult:
    found = remembered_dangling(store.open())
    return AssetCheckResult(
        passed=sum(found.values()) == 0, metadata={f"dangling_{k}": v for k, v in found.items()}
    )


@asset_check(
    asset=extractions,
    description="Every chunk is extracted or recorded as failed; nothing silently dropped.",
)
def every_chunk_accounted(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = _extraction_states(store, extractor)["status"]
    return AssetCheckResult(passed=counts["missing"] == 0, metadata=counts)


@asset_check(
    asset=extractions, description="No chunk is left failed (failures are retried on the next run)."
)
def no_failed_extractions(store: StoreResource, extractor: ExtractorResource) -> AssetCheckResult:
    counts = _extraction_states(store, extractor)["status"]
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
    states = _extraction_states(store, extractor)
    errors, chunks = states["errors"], states["chunks"]
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
    """``qortex doctor``'s probe on the published snapshot; a pass is remembered for that
    snapshot (an unchanged run does not load it, nor the embedding model, again)."""
    ok, detail = _probe(store, embedder)
    return AssetCheckResult(
        passed=ok,
        severity=AssetCheckSeverity.ERROR,
        metadata={"probe": detail, "reason": f"probe failed: {detail}"},
    )


def _probe(store: StoreResource, embedder: EmbedderResource) -> tuple[bool, str]:
    return remembered_probe(store.open(), store.snapshots(), embedder.get())


INGEST_CHECKS = (
    no_dangling_edges,
    every_chunk_accounted,
    no_failed_extractions,
    within_failure_budget,
    snapshot_answers_probe,
)
