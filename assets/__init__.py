"""Dagster assets: one per ingestion stage, each a thin adapter over one ``qortex_core`` call."""

from assets.chunks import chunks
from assets.documents import documents
from assets.embeddings import embeddings
from assets.extractions import extractions
from assets.graph_snapshot import graph_snapshot
from assets.synonym_edges import synonym_edges

INGEST_ASSETS = (documents, chunks, extractions, embeddings, synonym_edges, graph_snapshot)

__all__ = [
    "INGEST_ASSETS",
    "chunks",
    "documents",
    "embeddings",
    "extractions",
    "graph_snapshot",
    "synonym_edges",
]
