"""``teleportation_factors``: feedback events folded into per-concept factors the retriever multiplies in.

A sensor (``feedback_events_arrived``) watches the ``feedback_events`` table
version and requests a run of ``factors_job`` when new events arrive; ``qortex
factors update`` materialises the same asset in-process (:func:`materialize_factors`).
"""

from pathlib import Path
from typing import Mapping

from dagster import (
    AssetSelection,
    Config,
    DefaultSensorStatus,
    MaterializeResult,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    asset,
    define_asset_job,
    sensor,
)

from assets.reporting import markdown_table
from pipelines.resources import StoreResource
from qortex_core.memory.factors import concept_names, update_factors
from qortex_core.storage.store import FEEDBACK_EVENTS


class FactorsRunConfig(Config):
    """``force``: re-fold every event even when the watermark shows nothing new."""

    force: bool = False


@asset(
    group_name="memory",
    kinds={"lancedb"},
    description="Per-concept teleportation factors folded from feedback events.",
)
def teleportation_factors(config: FactorsRunConfig, store: StoreResource) -> MaterializeResult:
    lance = store.open()
    report = update_factors(lance, force=config.force)
    names = concept_names(lance, [c for c, _ in report.boosted + report.suppressed])
    return MaterializeResult(
        metadata={
            "folded_events": report.folded,
            "concepts": report.concepts,
            "events_watermark": report.watermark,
            "skipped": report.skipped,
            "most_boosted": markdown_table(
                ["concept", "factor"], [(names[c], round(f, 4)) for c, f in report.boosted]
            ),
            "most_suppressed": markdown_table(
                ["concept", "factor"], [(names[c], round(f, 4)) for c, f in report.suppressed]
            ),
            "boosted": [[names[c], round(f, 4)] for c, f in report.boosted],
            "suppressed": [[names[c], round(f, 4)] for c, f in report.suppressed],
        }
    )


factors_job = define_asset_job(
    "factors",
    selection=AssetSelection.assets(teleportation_factors),
    description="Fold new feedback events into the teleportation factors.",
)


def make_feedback_sensor(env: Mapping[str, str]) -> SensorDefinition:
    """Sensor whose cursor is the ``feedback_events`` table version; on unless ``QORTEX_FEEDBACK_SENSOR=off``."""
    status = (
        DefaultSensorStatus.STOPPED
        if env.get("QORTEX_FEEDBACK_SENSOR") == "off"
        else DefaultSensorStatus.RUNNING
    )

    @sensor(
        name="feedback_events_arrived",
        job=factors_job,
        default_status=status,
        minimum_interval_seconds=int(env.get("QORTEX_FEEDBACK_SENSOR_INTERVAL_S") or 30),
        description="Materialise teleportation_factors when new feedback events are committed.",
    )
    def feedback_events_arrived(context: SensorEvaluationContext, store: StoreResource):
        table = store.open().open_latest(FEEDBACK_EVENTS)
        if table is None:
            return SkipReason("no feedback yet")
        version = str(table.version)
        if version == context.cursor:
            return SkipReason(f"no new feedback events (table version {version})")
        context.update_cursor(version)
        return RunRequest(run_key=f"feedback-v{version}")

    return feedback_events_arrived


def materialize_factors(
    home: str | Path, dagster_home: str | Path | None = None, force: bool = False
) -> dict:
    """Run ``factors_job`` in this process against the local instance (no daemon); the asset's metadata.

    The instance is ``dagster_home``, else ``$DAGSTER_HOME``, else ``<home>/dagster`` (as ``qortex ingest``).
    """
    import os

    from pipelines.definitions import build_definitions
    from pipelines.run_local import first_failure, instance_storage, local_instance, quiet

    home_text = str(home)
    dagster_home = (
        dagster_home
        or os.environ.get("DAGSTER_HOME")
        or (
            Path(home_text) / "dagster"
            if "://" not in home_text
            else Path.home() / ".qortex" / "dagster"
        )
    )
    defs = build_definitions(
        os.environ, resources={"store": StoreResource(home=home_text)}, loggers={"quiet": quiet}
    )
    instance = local_instance(Path(dagster_home))
    with instance_storage(Path(dagster_home)):
        result = defs.resolve_job_def(factors_job.name).execute_in_process(
            instance=instance,
            raise_on_error=False,
            run_config={
                "loggers": {"quiet": {}},
                "ops": {"teleportation_factors": {"config": {"force": force}}},
            },
        )
    if not result.success:
        raise first_failure(result, "factors update")
    event = result.get_asset_materialization_events()[0].materialization
    meta = {k: v.value for k, v in event.metadata.items()}
    return {
        "via": "dagster",
        "run_id": result.run_id,
        "folded": meta["folded_events"],
        "concepts": meta["concepts"],
        "watermark": meta["events_watermark"],
        "skipped": meta["skipped"],
        "boosted": meta["boosted"],
        "suppressed": meta["suppressed"],
    }
