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

from typing import Mapping

from dagster import (
    AssetSelection,
    ExecutorDefinition,
    define_asset_job,
    in_process_executor,
    multiprocess_executor,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from qortex_core.errors import ConfigError

EXECUTORS = ("in_process", "multiprocess")


def make_executor(env: Mapping[str, str]) -> ExecutorDefinition:
    """The executor named by ``QORTEX_EXECUTOR``.

    Raises:
        ConfigError: an unknown executor name or a bad ``QORTEX_MAX_CONCURRENT``.
    """
    name = env.get("QORTEX_EXECUTOR", "in_process") or "in_process"
    if name == "in_process":
        return in_process_executor
    if name != "multiprocess":
        raise ConfigError(f"unknown executor {name!r}: use one of {', '.join(EXECUTORS)}")
    raw = env.get("QORTEX_MAX_CONCURRENT", "2")
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"QORTEX_MAX_CONCURRENT must be a positive integer, got {raw!r}")
    # spawn, never fork: LanceDB and torch hold threads that a forked child would inherit half-dead
    return multiprocess_executor.configured(
        {"max_concurrent": int(raw), "start_method": {"spawn": {}}}
    )


def make_ingest_job(env: Mapping[str, str]) -> UnresolvedAssetJobDefinition:
    """Every ingestion asset and its checks, on the configured executor."""
    return define_asset_job(
        "ingest",
        selection=AssetSelection.groups("ingest"),
        executor_def=make_executor(env),
        description="documents -> chunks -> extractions -> embeddings -> synonym_edges -> graph_snapshot",
    )
