"""The one stage runner (:func:`run_stage`): the documents stage is a real library function
(the source folder into the documents table, the same :func:`sync_source` the asset calls), a
run with a source chunks the stored documents, and a run from passages is unchanged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from qortex_core.embed import HashEmbedder, HashEmbedderConfig, token_window
from qortex_core.errors import DatasetError
from qortex_core.ingest import stages
from qortex_core.ingest.document_chunks import chunk
from qortex_core.ingest.document_stage import sync_source
from qortex_core.ingest.documents import (
    DOCUMENTS,
    Document,
    Section,
    SourceConfig,
    read_stored_documents,
)
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CHUNKS, LanceStore

EMBEDDER = HashEmbedder(HashEmbedderConfig(32))
MEMORY = Document("memory:m1", "d", "memory", (Section("", "Ivo Lark paints harbours."),), "h1")


def _source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "people").mkdir(parents=True)
    (root / "people" / "vesk.md").write_text("# Orlan Vesk\n\nOrlan Vesk was born in Ostrania.\n")
    (root / "places.txt").write_text("Ostrania is governed from Velmora.\n")
    an_hour_ago = time.time() - 3600  # not "racy": a file written just before a read is read again
    for path in (root / "people" / "vesk.md", root / "places.txt"):
        os.utime(path, (an_hour_ago, an_hour_ago))
    return root


def _run(home: Path, **inputs) -> stages.IngestRun:
    return stages.IngestRun(LanceStore.open(home), home, OfflineExtractor(), EMBEDDER, **inputs)


def test_a_run_with_a_source_reads_it_and_chunks_the_stored_documents(tmp_path):
    root = _source(tmp_path)
    run = _run(tmp_path / "home", source=SourceConfig(root))
    reports = stages.run_stages(run)
    docs = reports["documents"]
    assert isinstance(docs, stages.DocumentsRun)
    assert docs.report.new == ("people/vesk.md", "places.txt") and not docs.found.skipped
    want, _ = chunk(token_window(EMBEDDER), read_stored_documents(run.store))
    assert sorted(run.store.read(CHUNKS)["id"].to_pylist()) == sorted(p.id for p in want)
    passages = snap.load(tmp_path / "home").tables["passages"]["text"].to_pylist()
    assert any("born in Ostrania" in text for text in passages)

    (root / "places.txt").unlink()  # the next run sees the deletion, reads no unchanged file
    again = stages.run_stage("documents", run)
    assert isinstance(again, stages.DocumentsRun)
    assert again.report.deleted == ("places.txt",) and again.found.kept == ("people/vesk.md",)


def test_a_run_from_passages_reads_no_documents(tmp_path):
    passages = [Passage("Orlan Vesk was born in Ostrania.", "Orlan Vesk", "vesk", "d")]
    run = _run(tmp_path / "home", passages=passages)
    reports = stages.run_stages(run)
    assert reports["documents"] is None and run.store.count(DOCUMENTS) == 0
    assert run.store.read(CHUNKS)["id"].to_pylist() == [passages[0].id]


def test_memories_are_synced_when_given_and_kept_when_not(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    first = sync_source(store, None, lambda: [MEMORY])
    assert first.report.new == ("memory:m1",)
    root = _source(tmp_path)
    kept = sync_source(store, SourceConfig(root))  # no memories given: the stored one stays
    assert kept.report.deleted == () and kept.report.total == 3
    gone = sync_source(store, SourceConfig(root), lambda: [])
    assert gone.report.deleted == ("memory:m1",)


def test_an_empty_source_changes_nothing_and_merges_no_memory(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    sync_source(store, SourceConfig(_source(tmp_path)))
    empty = tmp_path / "empty"
    empty.mkdir()
    called = []
    with pytest.raises(DatasetError, match="no usable document"):
        sync_source(store, SourceConfig(empty), lambda: called.append(1) or [])
    assert called == [] and store.count(DOCUMENTS) == 2


def test_an_unknown_stage_is_a_key_error(tmp_path):
    with pytest.raises(KeyError, match="not a stage"):
        stages.run_stage("nope", _run(tmp_path / "home"))
