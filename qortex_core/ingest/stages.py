"""The ingestion stages as ONE sequence (:data:`STAGES`): the Dagster assets' order and
dependencies, the in-process runner, ``qortex eval``, :func:`build_index` and the kill tests
all read it.

documents -> chunks -> extractions -> embeddings -> synonym_edges -> graph_snapshot; the stage
functions live in :mod:`.document_stage`, :mod:`.document_chunks`, :mod:`.chunk_stage`,
:mod:`.embed_stage` and :mod:`.snapshot_stage`, and :func:`run_stage` runs one by name. Every
stage is incremental by content hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

from qortex_core.embed import Embedder, token_window
from qortex_core.ingest.allocators import give_back
from qortex_core.ingest.chunk_stage import (
    ChunkReport,
    ExtractReport,
    Progress,
    extract_chunks,
    extraction_key,
    no_progress,
    read_chunks,
    read_extractions,
    sync_chunks,
)
from qortex_core.ingest.document_chunks import chunk_stored
from qortex_core.ingest.document_stage import DocumentsRun, Memories, sync_source
from qortex_core.ingest.documents import SourceConfig
from qortex_core.ingest.embed_stage import EmbedReport, embed_index
from qortex_core.ingest.extract import Extractor
from qortex_core.ingest.graph import (
    GraphConfig,
)
from qortex_core.ingest.snapshot_stage import SnapshotReport, build_snapshot
from qortex_core.ingest.synonym_stage import SynonymReport, build_synonyms, sync_synonyms
from qortex_core.storage.model import Passage
from qortex_core.storage.store import (
    LanceStore,
)

__all__ = [
    "STAGES",
    "STAGE_NAMES",
    "ChunkReport",
    "DocumentsRun",
    "EmbedReport",
    "ExtractReport",
    "IngestRun",
    "Progress",
    "no_progress",
    "SnapshotReport",
    "Stage",
    "SynonymReport",
    "build_index",
    "build_snapshot",
    "build_synonyms",
    "embed_index",
    "extract_chunks",
    "extraction_key",
    "read_chunks",
    "read_extractions",
    "run_stage",
    "run_stages",
    "sync_chunks",
    "sync_synonyms",
    "upstream_of",
]


# -- the stage sequence -------------------------------------------------------------------
@dataclass(frozen=True)
class IngestRun:
    """The inputs of one in-process run of the stages (the Dagster assets read theirs from
    resources and run config).

    Attributes:
        store: the LanceDB store of the data home.
        home: where snapshots are published.
        extractor: the extraction stage's extractor (its ``cache_key`` keys the extractions).
        embedder: the embedding stage's embedder (its ``name`` lands in the manifest).
        passages: the chunks to index (the chunks table is made to hold exactly these) when
            the run has no documents (neither ``source`` nor ``memories``).
        progress: ``(stage, done, total)`` callback of the extraction and embedding stages.
        extract_batch: chunks per extractor call and per extractions upsert.
        graph_config: edge weights of the published graph.
        params: extra manifest parameters.
        source: the source folder the documents stage reads; None: the stored file documents
            are kept.
        memories: the memory documents the documents stage syncs; None: the stored ones are
            kept. With a source or memories the chunks stage chunks the stored documents
            (``passages`` unused); with neither the documents stage does nothing.
    """

    store: LanceStore
    home: str | Path
    extractor: Extractor
    embedder: Embedder
    passages: Sequence[Passage] = ()
    progress: Progress = no_progress
    extract_batch: int = 64
    graph_config: GraphConfig = GraphConfig()
    params: dict | None = None
    source: SourceConfig | None = None
    memories: Memories | None = None

    @property
    def from_documents(self) -> bool:
        """Whether the run starts from documents (a source or memories), not from passages."""
        return self.source is not None or self.memories is not None


@dataclass(frozen=True)
class Stage:
    """One ingestion stage: its name (the Dagster asset's name) and its library function."""

    name: str
    run: Callable[[IngestRun], object]


def _run_documents(run: IngestRun) -> DocumentsRun | None:
    if not run.from_documents:
        return None  # the run starts from passages
    return sync_source(run.store, run.source, run.memories)


def _run_chunks(run: IngestRun) -> ChunkReport:
    if run.from_documents:  # default sizing; forgotten file passages are hidden by the asset only
        window = partial(token_window, run.embedder)  # made only when there is work
        return chunk_stored(run.store, window, set(), identity=run.embedder.name).report
    return sync_chunks(run.store, run.passages)


def _run_extractions(run: IngestRun) -> ExtractReport:
    return extract_chunks(run.store, run.extractor, run.extract_batch, run.progress)


def _run_embeddings(run: IngestRun) -> EmbedReport:
    return embed_index(run.store, run.embedder, run.extractor.cache_key, run.progress)


def _run_synonyms(run: IngestRun) -> SynonymReport:
    return sync_synonyms(run.store)


def _run_snapshot(run: IngestRun) -> SnapshotReport:
    params = dict(run.params or {}, extractor=run.extractor.cache_key)
    return build_snapshot(run.store, run.home, run.embedder.name, run.graph_config, params)


STAGES = (
    Stage("documents", _run_documents),
    Stage("chunks", _run_chunks),
    Stage("extractions", _run_extractions),
    Stage("embeddings", _run_embeddings),
    Stage("synonym_edges", _run_synonyms),
    Stage("graph_snapshot", _run_snapshot),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)


def upstream_of(name: str) -> str:
    """The stage before ``name`` (an asset's dependency).

    Raises:
        KeyError: ``name`` is the first stage or not a stage.
    """
    at = STAGE_NAMES.index(name)
    if at == 0:
        raise KeyError(f"{name} is the first stage")
    return STAGE_NAMES[at - 1]


def run_stage(name: str, run: IngestRun) -> object:
    """Run the stage called ``name`` of :data:`STAGES` on ``run``; its report.

    Raises:
        KeyError: ``name`` is not a stage.
    """
    stage = next((s for s in STAGES if s.name == name), None)
    if stage is None:
        raise KeyError(f"{name} is not a stage")
    return stage.run(run)


def run_stages(
    run: IngestRun, after: Callable[[str, object], None] | None = None
) -> dict[str, object]:
    """Every stage of :data:`STAGES` in order (:func:`run_stage`); their reports by stage name.

    Args:
        run: the inputs.
        after: called with (stage name, report) as each stage finishes (timings, tests).
    """
    reports: dict[str, object] = {}
    for name in STAGE_NAMES:
        reports[name] = run_stage(name, run)
        give_back()  # what the stage freed: the next one starts from the process's own size
        if after is not None:
            after(name, reports[name])
    return reports


def build_index(
    store: LanceStore,
    home: str | Path,
    passages: Sequence[Passage],
    extractor: Extractor,
    embedder: Embedder,
) -> Path:
    """Every stage in order, without Dagster: chunks, extractions, embeddings, synonyms, snapshot.

    The chunks table is made to hold exactly ``passages``; returns the published snapshot's path.
    """
    reports = run_stages(IngestRun(store, home, extractor, embedder, passages))
    report = reports["graph_snapshot"]
    assert isinstance(report, SnapshotReport)
    return report.path
