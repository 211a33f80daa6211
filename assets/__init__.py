"""Dagster assets: one per ingestion stage, each a thin adapter over one ``qortex_core`` call."""

from dagster import AssetsDefinition

from assets.chunks import chunks
from assets.documents import documents
from assets.embeddings import embeddings
from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from assets.sharded import sharded_assets
from assets.synonym_edges import synonym_edges
from qortex_core.ingest.stages import STAGE_NAMES

_BY_NAME = {
    a.key.to_user_string(): a
    for a in (chunks, documents, embeddings, extractions, graph_snapshot, synonym_edges)
}
INGEST_ASSETS = tuple(_BY_NAME[name] for name in STAGE_NAMES)  # the one stage order


def ingest_assets(shards: int = 1) -> tuple[AssetsDefinition, ...]:
    """The ingestion assets: :data:`INGEST_ASSETS` for one shard; for more, ``chunks``,
    ``extractions`` and ``embeddings`` split into shard steps and merged (:mod:`assets.sharded`).
    """
    if shards == 1:
        return INGEST_ASSETS
    return (documents, *sharded_assets(shards), synonym_edges, graph_snapshot)


__all__ = [
    "INGEST_ASSETS",
    "chunks",
    "documents",
    "embeddings",
    "extractions",
    "graph_snapshot",
    "ingest_assets",
    "synonym_edges",
]
