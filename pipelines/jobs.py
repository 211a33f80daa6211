"""The ``ingest`` job and the executor it runs on, chosen from configuration.

``QORTEX_EXECUTOR``: ``in_process`` (default: one process, resources and the
embedding model loaded once) or ``multiprocess`` (one spawned process per step;
``QORTEX_MAX_CONCURRENT`` caps parallel steps). Beyond one machine, swap the
executor for ``dagster_k8s.k8s_job_executor`` (one pod per step) or
``dagster_celery.celery_executor`` (steps on Celery workers) in
:func:`make_executor`; with either, the data home must be an object-store URI
(``QORTEX_HOME=s3://...``) and ``QORTEX_SNAPSHOT_HOME`` a shared mounted path.
"""

from __future__ import annotations

from typing import Any, Mapping

from dagster import (
    AssetSelection,
    ExecutorDefinition,
    define_asset_job,
    in_process_executor,
    multiprocess_executor,
)

from assets.factors import teleportation_factors
from qortex_core.ingest.stages import STAGE_NAMES
from qortex_core.settings import get_settings

INGEST_JOB = "ingest"
FACTORS_JOB = "factors"

factors_job = define_asset_job(
    FACTORS_JOB,
    selection=AssetSelection.assets(teleportation_factors),
    description="Fold new feedback events into the teleportation factors.",
)


def make_executor(env: Mapping[str, str]) -> ExecutorDefinition:
    """The executor named by ``QORTEX_EXECUTOR``.

    Raises:
        ConfigError: an unknown executor name or a bad ``QORTEX_MAX_CONCURRENT``.
    """
    settings = get_settings(env)
    if settings.executor == "in_process":
        return in_process_executor
    # spawn, never fork: LanceDB and torch hold threads that a forked child would inherit half-dead
    return multiprocess_executor.configured(
        {"max_concurrent": settings.max_concurrent, "start_method": {"spawn": {}}}
    )


WRITER_TAG = "qortex/writer"  # dagster.yaml limits runs with this tag to one at a time


def make_ingest_job(env: Mapping[str, str]) -> Any:
    """Every ingestion asset and its checks, on the configured executor.

    Returns:
        the unresolved asset job ``define_asset_job`` makes (Dagster keeps its class private).
    """
    return define_asset_job(
        INGEST_JOB,
        selection=AssetSelection.groups("ingest"),
        executor_def=make_executor(env),
        description=" -> ".join(STAGE_NAMES),
        tags={WRITER_TAG: "ingest"},  # queued runs of it go one at a time (dagster.yaml)
    )
