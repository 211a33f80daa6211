"""Consolidating written memories (the ingest job with no source folder, as `qortex
consolidate` runs it) goes through the embedding stage's incremental path: only the memories'
passages and the nodes they name are written, and the asset's metadata says so.

A real Dagster run in process over a real home: the offline extractor and the hash embedder."""

from __future__ import annotations

import pytest

import qortex_core
from qortex_cli.runs.local import run_ingest
from qortex_core.embed import HashEmbedder, HashEmbedderConfig

pytestmark = pytest.mark.slow


def test_consolidating_memories_takes_the_incremental_path(tmp_path, monkeypatch):
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:32")
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    source, home = tmp_path / "src" / "notes", tmp_path / "home"
    source.mkdir(parents=True)
    for i in range(12):
        (source / f"p{i}.md").write_text(f"# Karo{i} Venn\n\nKaro{i} Venn met Ilsa Marr at Orin.\n")
    first = run_ingest(source.parent, home, progress=False).metadata["embeddings"]
    assert first["mode"] == "full"

    memory = qortex_core.open(home, embedder=HashEmbedder(HashEmbedderConfig(32)))
    for i in range(3):
        memory.remember(f"Ilsa Marr taught Tomas{i} Reed at Orin.", time="2026-01-10")
    emb = run_ingest(None, home, progress=False).metadata["embeddings"]
    assert emb["mode"] == "incremental", emb["reason"]
    assert emb["rows_added"] >= 3 and emb["rows_removed"] == 0  # the memories' passages
    assert emb["passages"] == 15 and emb["vectors_kept"] > 0
