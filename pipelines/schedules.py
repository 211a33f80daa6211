"""A cron schedule for the ``ingest`` job (``QORTEX_INGEST_CRON``, default daily at 03:00)."""

from __future__ import annotations

from typing import Mapping

from dagster import DefaultScheduleStatus, ScheduleDefinition
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

DEFAULT_CRON = "0 3 * * *"


def make_schedule(job: UnresolvedAssetJobDefinition, env: Mapping[str, str]) -> ScheduleDefinition:
    """Schedule from ``QORTEX_INGEST_CRON`` and ``QORTEX_INGEST_TIMEZONE``; running when ``QORTEX_SCHEDULE=on``."""
    status = (
        DefaultScheduleStatus.RUNNING
        if env.get("QORTEX_SCHEDULE") == "on"
        else DefaultScheduleStatus.STOPPED
    )
    return ScheduleDefinition(
        name="ingest_schedule",
        job=job,
        cron_schedule=env.get("QORTEX_INGEST_CRON") or DEFAULT_CRON,
        execution_timezone=env.get("QORTEX_INGEST_TIMEZONE") or "UTC",
        default_status=status,
    )
