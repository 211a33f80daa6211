"""Asset checks: thin adapters over the check functions of :mod:`qortex_core.ops.doctor` and
:mod:`qortex_core.ops.table_checks`.

The graph has no dangling edges, every chunk is extracted or recorded as failed, and the
published snapshot loads and answers a probe query (the same probe as ``qortex doctor``).
A check whose inputs did not move since it last ran (the tables it reads, by their versions;
the snapshot it probed, by name and manifest file) gives its remembered result: an unchanged
run does not scan the corpus again, nor load the snapshot and the embedding model.
"""

from pathlib import Path

from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.errors import QortexError
from qortex_core.ingest.budget import FailureBudget, judge
from qortex_core.ingest.stage_inputs import remembered
from qortex_core.ops.doctor import DoctorConfig, check_probe
from qortex_core.ops.table_checks import (
    dangling_edges,
    extraction_status,
    failed_extraction_errors,
)
from qortex_core.storage import snapshot as snap
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
    """``qortex doctor``'s probe on the published snapshot; a pass is remembered for that
    snapshot (an unchanged run does not load it, nor the embedding model, again)."""
    ok, detail = _probe(store, embedder)
    return AssetCheckResult(
        passed=ok,
        severity=AssetCheckSeverity.ERROR,
        metadata={"probe": detail, "reason": f"probe failed: {detail}"},
    )


def _probe(store: StoreResource, embedder: EmbedderResource) -> tuple[bool, str]:
    """The probe's verdict and detail, run again only when ``LATEST`` names another snapshot,
    that snapshot's manifest file is not the one that passed, or the embedder changed."""
    home, model = store.snapshots(), embedder.get()

    def probe() -> list:
        check = check_probe(home, model, DoctorConfig(probe_embeds=False))
        return [check.ok, check.detail]

    published = _published(home)
    if published is None:  # nothing to remember it by: the probe says what is wrong
        ok, detail = probe()
        return bool(ok), str(detail)
    db = store.open()
    ok, detail = remembered(db, "snapshot_probe", (), probe, *published, model.name, keep=_passed)
    return bool(ok), str(detail)


def _passed(verdict: list) -> bool:
    return bool(verdict[0])


def _published(home: Path) -> tuple[str, str] | None:
    """The snapshot ``LATEST`` names and its manifest file's stat (None: it cannot be read)."""
    try:
        name = snap.latest_name(home)
        st = (snap.snapshots_dir(home) / name / "manifest.json").stat()
    except (QortexError, OSError):
        return None
    return name, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


INGEST_CHECKS = (
    no_dangling_edges,
    every_chunk_accounted,
    no_failed_extractions,
    within_failure_budget,
    snapshot_answers_probe,
)
