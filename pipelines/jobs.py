"""The ``ingest`` job and the executor it runs on, chosen from configuration.

``QORTEX_EXECUTOR``: ``in_process`` (default: one process, resources and the
embedding model loaded once), ``multiprocess`` (one spawned process per step;
``QORTEX_MAX_CONCURRENT`` caps parallel steps) or ``dask`` (``dagster-dask``: each
step a task on a ``dask.distributed`` worker; the scheduler at
``QORTEX_DASK_ADDRESS``, else a ``LocalCluster`` of ``QORTEX_MAX_CONCURRENT``
worker processes per run). ``QORTEX_SHARDS`` > 1 splits chunking, extraction and
embedding into that many shard steps (:mod:`assets.sharded`) that these executors
run at once. Workers on other machines need the data home as an object-store URI
(``QORTEX_HOME=s3://...``), ``QORTEX_SNAPSHOT_HOME`` a shared mounted path and
``DAGSTER_HOME`` an instance they all reach (Postgres).
"""

from __future__ import annotations

from typing import Any, Mapping

from dagster import (
    AssetSelection,
    ExecutorDefinition,
    HookContext,
    define_asset_job,
    in_process_executor,
    multiprocess_executor,
    success_hook,
)

from assets.factors import teleportation_factors
from qortex_core.errors import ConfigError
from qortex_core.ingest.allocators import give_back
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
    if settings.executor == "dask":
        return _dask_executor(settings.dask_address, settings.max_concurrent)
    # spawn, never fork: LanceDB and torch hold threads that a forked child would inherit half-dead
    return multiprocess_executor.configured(
        {"max_concurrent": settings.max_concurrent, "start_method": {"spawn": {}}}
    )


def _dask_executor(address: str, workers: int) -> ExecutorDefinition:
    """The ``dagster-dask`` executor (:mod:`pipelines.dask_executor`): each step a task on a
    ``dask.distributed`` worker.

    Args:
        address: the scheduler (``tcp://host:8786``); empty: a ``LocalCluster`` of ``workers``
            worker processes (one thread each: Dagster steps are not thread-safe) per run.

    Raises:
        ConfigError: ``dagster-dask`` is not installed.
    """
    try:
        from pipelines.dask_executor import qortex_dask_executor
    except ImportError:
        raise ConfigError(
            "QORTEX_EXECUTOR=dask needs dagster-dask: pip install 'qortex[distributed]'"
        ) from None
    cluster: dict[str, Any] = (
        {"existing": {"address": address}}
        if address
        else {"local": {"n_workers": workers, "threads_per_worker": 1, "processes": True}}
    )
    return qortex_dask_executor.configured({"cluster": cluster})


@success_hook(name="qortex_memory_back")
def memory_back(context: HookContext) -> None:
    """After each step: the memory it freed back to the operating system. Steps that share a
    process (the in-process executor) would otherwise each keep the last one's heap: a 100k
    full build's anonymous memory only grew, stage after stage."""
    give_back()


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
        hooks={memory_back},
    )
