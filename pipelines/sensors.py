"""Sensors: the source directory changed or memories were written (run ``ingest``), new feedback
events (``factors``)."""

from __future__ import annotations

from typing import Mapping

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from pipelines.jobs import FACTORS_JOB, INGEST_JOB
from pipelines.resources import SourceResource, StoreResource
from qortex_core.errors import QortexError
from qortex_core.ingest.documents import fingerprint
from qortex_core.settings import get_settings
from qortex_core.storage.store import FEEDBACK_EVENTS


def make_source_sensor(env: Mapping[str, str]) -> SensorDefinition:
    """Sensor whose cursor is the hash of the source listing with sizes and mtimes.

    On when ``QORTEX_SENSOR=on``; polls every ``QORTEX_SENSOR_INTERVAL_S`` seconds (60).
    """
    settings = get_settings(env)
    status = DefaultSensorStatus.RUNNING if settings.sensor == "on" else DefaultSensorStatus.STOPPED

    @sensor(
        name="source_changed",
        job_name=INGEST_JOB,
        minimum_interval_seconds=settings.sensor_interval_s,
        default_status=status,
        description="Ingest when files under the source directory change.",
    )
    def source_changed(context: SensorEvaluationContext, source: SourceResource):
        try:
            current = fingerprint(source.config())
        except QortexError as exc:
            return SkipReason(str(exc))
        if current == context.cursor:
            return SkipReason("source directory unchanged")
        context.update_cursor(current)
        return RunRequest(run_key=current)

    return source_changed


MEMORIES_ONLY = {"resources": {"source": {"config": {"path": ""}}}}
"""Run config of the ``memories_arrived`` sensor's runs: no source folder, so the run syncs the
written memories and keeps the stored file documents as they are (the ``source_changed``
sensor and the schedule ingest the folder)."""


def _run_per_version(
    context: SensorEvaluationContext,
    version: int,
    *,
    none_yet: str,
    unchanged: str,
    run_key: str,
    run_config: dict | None = None,
) -> SkipReason | RunRequest:
    """One run per new version of a watched LanceDB table (the cursor); 0: no table yet."""
    if not version:
        return SkipReason(none_yet)
    if str(version) == context.cursor:
        return SkipReason(unchanged.format(version=version))
    context.update_cursor(str(version))
    return RunRequest(run_key=run_key.format(version=version), run_config=run_config or {})


def make_feedback_sensor(env: Mapping[str, str]) -> SensorDefinition:
    """Sensor whose cursor is the ``feedback_events`` table version.

    On unless ``QORTEX_FEEDBACK_SENSOR=off``; polls every ``QORTEX_FEEDBACK_SENSOR_INTERVAL_S``
    seconds (30).
    """
    settings = get_settings(env)
    status = (
        DefaultSensorStatus.STOPPED
        if settings.feedback_sensor == "off"
        else DefaultSensorStatus.RUNNING
    )

    @sensor(
        name="feedback_events_arrived",
        job_name=FACTORS_JOB,
        default_status=status,
        minimum_interval_seconds=settings.feedback_sensor_interval_s,
        description="Materialise teleportation_factors when new feedback events are committed.",
    )
    def feedback_events_arrived(context: SensorEvaluationContext, store: StoreResource):
        table = store.open().open_latest(FEEDBACK_EVENTS)
        return _run_per_version(
            context,
            table.version if table is not None else 0,
            none_yet="no feedback yet",
            unchanged="no new feedback events (table version {version})",
            run_key="feedback-v{version}",
        )

    return feedback_events_arrived


def make_memories_sensor(env: Mapping[str, str]) -> SensorDefinition:
    """Sensor whose cursor is the ``memories`` table version: agent writes (remember, update,
    forget) are consolidated into the graph by the ``ingest`` job, run with no source folder
    (:data:`MEMORIES_ONLY`), as ``qortex consolidate`` does.

    On when ``QORTEX_MEMORY_SENSOR=on``; polls every ``QORTEX_MEMORY_SENSOR_INTERVAL_S`` (30).
    """
    settings = get_settings(env)
    status = (
        DefaultSensorStatus.RUNNING
        if settings.memory_sensor == "on"
        else DefaultSensorStatus.STOPPED
    )

    @sensor(
        name="memories_arrived",
        job_name=INGEST_JOB,
        minimum_interval_seconds=settings.memory_sensor_interval_s,
        default_status=status,
        description="Consolidate written memories into the graph when the memories table moves.",
    )
    def memories_arrived(context: SensorEvaluationContext, store: StoreResource):
        from qortex_core.memory.records import MemoryTable

        try:
            version = MemoryTable(store.open()).version()
        except QortexError as exc:
            return SkipReason(str(exc))
        return _run_per_version(
            context,
            version,
            none_yet="no memory written yet",
            unchanged="memories unchanged (version {version})",
            run_key="memories-v{version}",
            run_config=MEMORIES_ONLY,  # the memory increment only: the folder is not listed
        )

    return memories_arrived
