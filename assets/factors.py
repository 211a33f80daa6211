"""``teleportation_factors``: feedback events folded into per-concept factors the retriever uses.

The sensor ``feedback_events_arrived`` (:mod:`pipelines.sensors`) requests a run of the
``factors`` job when new events arrive; ``qortex factors update`` materialises the same asset
in-process (:func:`qortex_cli.runs.local.materialize_factors`).
"""

from dagster import Config, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import StoreResource
from qortex_core.feedback.factors import concept_names, update_factors


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
            "dagster/row_count": report.concepts,
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
