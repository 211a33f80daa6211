"""A cron schedule for the ``ingest`` job (``QORTEX_INGEST_CRON``, default daily at 03:00)."""

from __future__ import annotations

from typing import Mapping

from dagster import DefaultScheduleStatus, ScheduleDefinition

from pipelines.jobs import INGEST_JOB
from qortex_core.settings import DEFAULT_CRON, get_settings

__all__ = ["DEFAULT_CRON", "make_schedule"]


def make_schedule(env: Mapping[str, str]) -> ScheduleDefinition:
    """Schedule from ``QORTEX_INGEST_CRON`` and ``QORTEX_INGEST_TIMEZONE``.

    Running when ``QORTEX_SCHEDULE=on``, stopped otherwise.
    """
    settings = get_settings(env)
    status = (
        DefaultScheduleStatus.RUNNING
        if settings.schedule == "on"
        else DefaultScheduleStatus.STOPPED
    )
    return ScheduleDefinition(
        name="ingest_schedule",
        job_name=INGEST_JOB,
        cron_schedule=settings.ingest_cron,
        execution_timezone=settings.ingest_timezone,
        default_status=status,
    )
