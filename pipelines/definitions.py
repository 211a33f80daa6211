"""The Dagster code location (``workspace.yaml`` loads ``pipelines.definitions``).

Configuration is read from the environment when :func:`build_definitions` runs:

- ``QORTEX_HOME``: data home (default ``~/.qortex``; a local path or ``s3://``/``gs://``/``az://``
URI);
  ``QORTEX_SNAPSHOT_HOME``: snapshot folder when the home is a URI.
- ``QORTEX_SOURCE_DIR`` (default ``samples/docs``), ``QORTEX_DOMAIN`` (fixed domain; default: first
folder).
- ``QORTEX_EXTRACTOR``: ``auto`` (default: ``llm`` if a key or base URL is set, else ``offline``),
``llm``,
  ``offline``, ``recorded`` with ``QORTEX_OPENIE``; ``QORTEX_LLM_MODEL``, ``QORTEX_LLM_BASE_URL``,
  ``QORTEX_LLM_API_KEY`` (or ``OPENAI_API_KEY``) as Dagster ``EnvVar``.
- ``QORTEX_EMBEDDER`` (``bundled``, ``st:PATH``, ``openai:MODEL``), ``QORTEX_EMBED_BASE_URL``,
``QORTEX_EMBED_API_KEY``.
- ``QORTEX_EXECUTOR`` (``in_process`` | ``multiprocess`` | ``dask``), ``QORTEX_MAX_CONCURRENT``,
  ``QORTEX_DASK_ADDRESS`` (a ``dask.distributed`` scheduler; empty: a LocalCluster per run).
- ``QORTEX_SHARDS``: chunks, extractions and embeddings split into that many shard steps.
- ``QORTEX_INGEST_CRON``, ``QORTEX_INGEST_TIMEZONE``, ``QORTEX_SCHEDULE=on``, ``QORTEX_SENSOR=on``,
  ``QORTEX_SENSOR_INTERVAL_S``.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from dagster import Definitions

from assets import ingest_assets
from assets.factors import teleportation_factors
from pipelines.checks import INGEST_CHECKS
from pipelines.jobs import INGEST_JOB, factors_job, make_ingest_job
from pipelines.progress import LOGGERS
from pipelines.resources import SourceResource, StoreResource, build_resources
from pipelines.schedules import make_schedule
from pipelines.sensors import make_feedback_sensor, make_memories_sensor, make_source_sensor
from qortex_core.settings import get_settings


def build_definitions(
    env: Mapping[str, str],
    resources: Mapping[str, object] | None = None,
    loggers: Mapping[str, object] | None = None,
) -> Definitions:
    """Assets, checks, the ``ingest`` job, its schedule and sensor, and resources from ``env``.

    Args:
        env: configuration (normally ``os.environ``).
        resources: replacements for some of the resources built from ``env``.
        loggers: Dagster loggers (default: Dagster's console logger).

    Raises:
        ConfigError: a variable has a bad value (one line naming it), before anything is built.
    """
    settings = get_settings(env)  # validated before any work
    job = make_ingest_job(env)
    return Definitions(
        assets=[*ingest_assets(settings.shards), teleportation_factors],
        asset_checks=list(INGEST_CHECKS),
        jobs=[job, factors_job],
        schedules=[make_schedule(env)],
        sensors=[make_source_sensor(env), make_memories_sensor(env), make_feedback_sensor(env)],
        resources={**build_resources(env), **(resources or {})},
        loggers=dict(loggers) if loggers else None,
    )


def ingest_job(**overrides: str) -> Any:
    """The ``ingest`` job built from the process environment, with ``overrides`` (variable ->
    value) on top: the reconstructable target (``dagster.reconstructable(ingest_job)`` or
    ``build_reconstructable_job(..., reconstructable_kwargs=overrides)``) from which executors
    that start other processes (multiprocess, dask workers) rebuild the job. It has the
    ``progress`` and ``quiet`` loggers of ``qortex ingest`` (the run config picks one; none
    picked: Dagster's console logger)."""
    env = {**os.environ, **overrides}
    named = _named_resources(overrides)
    return build_definitions(env, resources=named, loggers=LOGGERS).resolve_job_def(INGEST_JOB)


def _named_resources(overrides: Mapping[str, str]) -> dict[str, object]:
    """The store and source as values when ``overrides`` name the home and source folder (the
    command line's): a step process on a dask worker started elsewhere then uses them, not the
    worker's own ``QORTEX_HOME`` and ``QORTEX_SOURCE_DIR`` (resources from the environment are
    resolved in the step process)."""
    out: dict[str, object] = {}
    if overrides.get("QORTEX_HOME"):
        snapshot_home = overrides.get("QORTEX_SNAPSHOT_HOME", "")
        out["store"] = StoreResource(home=overrides["QORTEX_HOME"], snapshot_home=snapshot_home)
    if overrides.get("QORTEX_SOURCE_DIR"):
        out["source"] = SourceResource(path=overrides["QORTEX_SOURCE_DIR"])
    return out


defs = build_definitions(os.environ)
