"""``synonym_edges``: kNN between concept vectors above a cosine threshold."""

from dagster import MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import StoreResource
from qortex_core.ingest.stages import sync_synonyms, upstream_of
from qortex_core.ingest.synonym_stage import heaviest_edges
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage.store import CONCEPTS


@asset(
    group_name="ingest",
    kinds={"lancedb"},
    deps=[upstream_of("synonym_edges")],
    description="Synonym edges between concepts.",
)
def synonym_edges(store: StoreResource) -> MaterializeResult:
    db = store.open()
    config = SynonymConfig()
    report = sync_synonyms(db, config)
    count = report.edges
    top = heaviest_edges(db)  # the preview reads 10 names, not every concept and its vector
    return MaterializeResult(
        metadata={
            "synonym_edges": count,
            "dagster/row_count": count,
            "concepts": db.count(CONCEPTS),
            "mode": report.mode,  # unchanged | incremental | full
            "reason": report.reason,
            "rows_added": report.added,
            "rows_removed": report.removed,
            "concepts_matched": report.concepts_matched,
            "concepts_removed": report.concepts_removed,
            "preview": markdown_table(
                ["a", "b", "cosine"],
                [(a, b, f"{w:.3f}") for a, b, w in top],
            ),
        }
    )
