"""Sharded stages (qortex_core/ingest/shards.py) build the same graph as the one-shard stages.

Real LanceDB homes under tmp_path, the real bundled embedder and the offline extractor; the
shards run one after another here (the Dagster tests run them in parallel processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from snapshot_graph import snapshot_graph

from qortex_core.embed import token_window
from qortex_core.ingest import shards as sh
from qortex_core.ingest import stages
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents
from qortex_core.ingest.documents import SourceConfig, load_documents
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage.store import CHUNKS, EMBEDDINGS, EXTRACTIONS, LanceStore

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "docs"


def _passages(embedder):
    window = token_window(embedder)
    docs = load_documents(SourceConfig(root=SAMPLES)).documents
    return chunk_documents(docs, ChunkConfig(48, 8), window.count)  # small chunks: many per doc


def _sharded_build(store: LanceStore, home: Path, passages, embedder, count: int, token: str):
    ex = OfflineExtractor()
    for i in range(count):
        sh.stage_chunks(store, passages, sh.Shard(i, count, token))
    sh.merge_chunks(store, count, token)
    staged = [sh.stage_extractions(store, ex, sh.Shard(i, count, token)) for i in range(count)]
    merged = sh.merge_extractions(store, count, token)
    for i in range(count):
        sh.stage_embeddings(store, embedder, ex.cache_key, sh.Shard(i, count, token))
    report = sh.merge_embeddings(store, embedder, ex.cache_key, count, token)
    stages.build_synonyms(store)
    stages.build_snapshot(store, home, embedder.name, stages.GraphConfig())
    return staged, merged, report


@pytest.mark.parametrize("count", [3, 8])  # 8 shards over 4 documents: some shards are empty
def test_sharded_stages_build_the_one_shard_graph(tmp_path: Path, embedder, count: int) -> None:
    passages = _passages(embedder)
    one = LanceStore.open(tmp_path / "one")
    stages.build_index(one, tmp_path / "one", passages, OfflineExtractor(), embedder)

    many = LanceStore.open(tmp_path / "many")
    staged, merged, report = _sharded_build(
        many, tmp_path / "many", passages, embedder, count, "r1"
    )
    assert sum(s.chunks for s in staged) == len({p.id for p in passages}) == merged.chunks
    assert merged.extracted == merged.chunks and merged.cached == merged.failed == 0
    assert report.texts_embedded == len(set(many.read(EMBEDDINGS)["key"].to_pylist()))
    assert report.mode == "full" and report.reason.startswith("first build")  # embed_index's
    tables = ("passages", "concepts", "facts", "rules")
    assert report.rows_added == sum(many.count(n) for n in tables) > 0
    assert snapshot_graph(tmp_path / "many") == snapshot_graph(tmp_path / "one")
    assert not [n for n in many.table_names() if n.startswith("staging_")]  # merges cleaned up
    by_shard = {sh.shard_of(p.doc_id, count) for p in passages}
    assert len(by_shard) > 1  # the documents really were split


def test_each_document_belongs_to_one_stable_shard() -> None:
    doc_ids = [f"notes/{n}.md" for n in range(200)]
    first = [sh.shard_of(d, 4) for d in doc_ids]
    assert first == [sh.shard_of(d, 4) for d in doc_ids]  # a content hash, not process state
    sizes = [first.count(i) for i in range(4)]
    assert min(sizes) > 25  # spread over every shard (200 / 4 = 50 expected)
    with pytest.raises(sh.ShardError):
        sh.Shard(4, 4, "r1")
    with pytest.raises(sh.ShardError):
        sh.Shard(0, 4, "no-dashes")
    assert sh.run_token("0f3c-AB12-x") == "0f3cab12x"


def test_merge_refuses_a_missing_shard_and_changes_nothing(tmp_path: Path, embedder) -> None:
    passages = _passages(embedder)
    store = LanceStore.open(tmp_path)
    sh.stage_chunks(store, passages, sh.Shard(0, 2, "r1"))
    sh.stage_chunks(store, passages, sh.Shard(1, 2, "r0"))  # shard 1 staged by another run
    with pytest.raises(sh.ShardError, match="shard\\(s\\) 1 of 2 did not run"):
        sh.merge_chunks(store, 2, "r1")
    assert CHUNKS not in store.table_names()  # nothing merged
    assert sh.drop_staging(store, "extractions") == []
    assert sh.drop_staging(store) == [sh.staging_table("chunks", sh.Shard(1, 2, "r0"))] + [
        sh.staging_table("chunks", sh.Shard(0, 2, "r1"))
    ]  # what `qortex purge` drops: text a failed run staged
    sh.stage_chunks(store, passages, sh.Shard(0, 2, "r1"))
    sh.stage_chunks(store, passages, sh.Shard(1, 2, "r1"))
    report, merged = sh.merge_chunks(store, 2, "r1")
    assert report.total == store.count(CHUNKS) == len({p.id for p in passages})
    assert not [n for n in store.table_names() if n.startswith("staging_")]  # r0's stale one too


def test_shard_extraction_writes_only_its_staging_table(tmp_path: Path, embedder) -> None:
    passages = _passages(embedder)
    store = LanceStore.open(tmp_path)
    stages.sync_chunks(store, passages)
    ex = OfflineExtractor()
    report = sh.stage_extractions(store, ex, sh.Shard(0, 2, "r1"))
    assert EXTRACTIONS not in store.table_names()  # the shared table is left to the merge
    mine = [p for p in passages if sh.shard_of(p.doc_id, 2) == 0]
    staged = store.read(sh.staging_table("extractions", sh.Shard(0, 2, "r1")))
    assert sorted(staged["passage_id"].to_pylist()) == sorted({p.id for p in mine})
    assert report.chunks == report.extracted == len({p.id for p in mine}) > 0
