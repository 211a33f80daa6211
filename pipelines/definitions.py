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
from typing import Mapping

from dagster import Definitions, LoggerDefinition

from assets import ingest_assets
from assets.factors import teleportation_factors
from pipelines.checks import INGEST_CHECKS
from pipelines.jobs import factors_job, make_ingest_job
from pipelines.resources import build_resources
from pipelines.schedules import make_schedule
from pipelines.sensors import make_feedback_sensor, make_memories_sensor, make_source_sensor
from qortex_core.settings import get_settings


def build_definitions(
    env: Mapping[str, str],
    resources: Mapping[str, object] | None = None,
    loggers: Mapping[str, LoggerDefinition] | None = None,
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


defs = build_definitions(os.environ)
