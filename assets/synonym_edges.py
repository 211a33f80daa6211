"""``synonym_edges``: kNN between concept vectors above a cosine threshold."""

from dagster import MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import StoreResource
from qortex_core.ingest.stages import sync_synonyms, upstream_of
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage.store import CONCEPTS, SYNONYMS


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
    edges, concepts = db.read(SYNONYMS), db.read(CONCEPTS)
    names = (
        dict(zip(concepts["id"].to_pylist(), concepts["name"].to_pylist()))
        if concepts.num_rows
        else {}
    )
    top = sorted(edges.to_pylist(), key=lambda r: -r["weight"]) if edges.num_rows else []
    return MaterializeResult(
        metadata={
            "synonym_edges": count,
            "dagster/row_count": count,
            "concepts": len(names),
            "mode": report.mode,  # unchanged | incremental | full
            "reason": report.reason,
            "rows_added": report.added,
            "rows_removed": report.removed,
            "concepts_matched": report.concepts_matched,
            "concepts_removed": report.concepts_removed,
            "preview": markdown_table(
                ["a", "b", "cosine"],
                [(names.get(r["a"]), names.get(r["b"]), f"{r['weight']:.3f}") for r in top],
            ),
        }
    )
