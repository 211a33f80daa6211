"""A sensor on the source directory: a run when the file listing or any modification time changes."""

from typing import Mapping

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from pipelines.resources import SourceResource, StoreResource
from qortex_core.errors import QortexError
from qortex_core.ingest.documents import fingerprint


def make_source_sensor(
    job: UnresolvedAssetJobDefinition, env: Mapping[str, str]
) -> SensorDefinition:
    """Sensor whose cursor is the hash of the source listing with sizes and mtimes; on when ``QORTEX_SENSOR=on``."""
    status = (
        DefaultSensorStatus.RUNNING
        if env.get("QORTEX_SENSOR") == "on"
        else DefaultSensorStatus.STOPPED
    )

    @sensor(
        name="source_changed",
        job=job,
        minimum_interval_seconds=int(env.get("QORTEX_SENSOR_INTERVAL_S") or 60),
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


def make_memories_sensor(
    job: UnresolvedAssetJobDefinition, env: Mapping[str, str]
) -> SensorDefinition:
    """Sensor whose cursor is the ``memories`` table version: agent writes (remember, update,
    forget) are consolidated into the graph; on when ``QORTEX_MEMORY_SENSOR=on``."""
    status = (
        DefaultSensorStatus.RUNNING
        if env.get("QORTEX_MEMORY_SENSOR") == "on"
        else DefaultSensorStatus.STOPPED
    )

    @sensor(
        name="memories_arrived",
        job=job,
        minimum_interval_seconds=int(env.get("QORTEX_MEMORY_SENSOR_INTERVAL_S") or 30),
        default_status=status,
        description="Consolidate written memories into the graph when the memories table moves.",
    )
    def memories_arrived(context: SensorEvaluationContext, store: StoreResource):
        from qortex_core.memory.records import MemoryTable

        try:
            version = MemoryTable(store.open()).version()
        except QortexError as exc:
            return SkipReason(str(exc))
        if version == 0:
            return SkipReason("no memory written yet")
        if str(version) == context.cursor:
            return SkipReason(f"memories unchanged (version {version})")
        context.update_cursor(str(version))
        return RunRequest(run_key=f"memories-{version}")

    return memories_arrived
