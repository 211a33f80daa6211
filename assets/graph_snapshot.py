"""``graph_snapshot``: the immutable graph snapshot, published by an atomic pointer switch."""

from dagster import Config, MaterializeResult, asset

from assets.reporting import markdown_table
from pipelines.resources import EmbedderResource, ExtractorResource, StoreResource
from qortex_core.errors import QortexError
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.stages import SnapshotReport, build_snapshot, upstream_of
from qortex_core.ops.doctor import probe_gate
from qortex_core.ops.probe_memo import recorder
from qortex_core.ops.table_checks import graph_marks, remember_dangling
from qortex_core.storage import snapshot as snap


class GraphWeights(Config):
    """Edge weights of the published graph (run config; defaults are :class:`GraphConfig`'s)."""

    fact_weight: float = 1.0
    passage_weight: float = 1.0
    synonym_scale: float = 1.0
    relation_weights: dict[str, float] = {}  # e.g. {"is_a": 0.5}: typed facts' weight multipliers


@asset(
    group_name="ingest",
    kinds={"numpy"},
    deps=[upstream_of("graph_snapshot")],
    description="Versioned graph snapshot (CSR arrays), published only once it answers a probe.",
)
def graph_snapshot(
    config: GraphWeights,
    store: StoreResource,
    embedder: EmbedderResource,
    extractor: ExtractorResource,
) -> MaterializeResult:
    weights = GraphConfig(
        config.fact_weight,
        config.passage_weight,
        config.synonym_scale,
        tuple(sorted(config.relation_weights.items())),
    )
    try:
        before = snap.latest_name(store.snapshots())
    except QortexError:
        before = ""
    db, home, model = store.open(), store.snapshots(), embedder.get()
    marks = graph_marks(db)  # before the build reads: what its dangling-edge count is of
    report = build_snapshot(
        db,
        home,
        model.name,
        weights,
        params={"extractor": extractor.get().cache_key},
        # LATEST moves only if it answers; the pass is the probe check's verdict
        verify=probe_gate(home, model, on_pass=recorder(db, home, model)),
    )
    if report.dangling is not None:  # the no_dangling_edges check need not read them again
        remember_dangling(db, marks, report.dangling)
    return MaterializeResult(metadata=_metadata(report, before))


def _metadata(report: SnapshotReport, before: str) -> dict:
    """The published snapshot, how it was made, and its graph in counts."""
    counts = report.counts
    nodes = {"phrase": counts.phrases, "passage": counts.passages}
    edges = {
        "fact": counts.facts,
        "synonym": counts.synonym_edges,
        "contains": counts.contains,
        "total (undirected, merged)": counts.edges,
    }
    return {
        "status": "unchanged" if report.name == before else "published",
        "mode": report.mode,  # unchanged | incremental | full
        "reason": report.reason,
        "rows_added": report.rows_added,
        "rows_changed": report.rows_changed,
        "rows_removed": report.rows_removed,
        "snapshots_retired": len(report.retired),  # past QORTEX_SNAPSHOT_KEEP, deleted
        "dagster/row_count": counts.nodes,
        "snapshot": report.name,
        "snapshot_version": report.version,
        "path": str(report.path),
        "nodes": counts.nodes,
        "edges": counts.edges,
        "rules": counts.rules,
        **{f"nodes_{k}": v for k, v in nodes.items()},
        "edges_fact": counts.facts,
        "edges_synonym": counts.synonym_edges,
        "edges_contains": counts.contains,
        "graph": markdown_table(
            ["kind", "count"],
            [(f"{k} nodes", v) for k, v in nodes.items()]
            + [(f"{k} edges", v) for k, v in edges.items()],
        ),
    }
