"""The embedding stage writes each table a block of rows at a time while it embeds them: the
tables equal a one-block run, each is one new version, and an embedder that fails in a later
block fails the stage with its own error while the table keeps its old rows."""

from __future__ import annotations

import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import EmbedderWrapper, HashEmbedder, HashEmbedderConfig
from qortex_core.errors import QortexError
from qortex_core.ingest import embed_stage, vector_reuse
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stage_inputs import INPUTS_STATE
from qortex_core.ingest.stages import embed_index, extract_chunks, sync_chunks
from qortex_core.ingest.vector_reuse import MODEL_STATE
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, RULES, LanceStore

TABLES = (PASSAGES, CONCEPTS, FACTS, RULES)


class FailingEmbedder(EmbedderWrapper):
    """The hashing embedder, which refuses every call after its first ``calls``."""

    def __init__(self, calls: int) -> None:
        super().__init__(HashEmbedder(HashEmbedderConfig(16)))
        self.left = calls

    def embed(self, texts):
        self.left -= 1
        if self.left < 0:
            raise QortexError("embedding endpoint refused the request")
        return self.inner.embed(texts)


def _home(path):
    store = LanceStore.open(path)
    sync_chunks(store, SynthCorpus(SynthConfig(passages=60, seed=5)).passages())
    extract_chunks(store, OfflineExtractor(), 16)
    return store


def _sorted(store, name):
    table = store.read(name).sort_by("id")
    # ingested_at is the wall-clock second each home was ingested: the two homes may differ
    drop = [c for c in ("ingested_at",) if c in table.column_names]
    return table.drop_columns(drop).to_pylist()


def test_block_by_block_tables_equal_one_block(tmp_path, monkeypatch):
    key = OfflineExtractor().cache_key
    whole = _home(tmp_path / "whole")
    embed_index(whole, HashEmbedder(HashEmbedderConfig(16)), key)
    monkeypatch.setattr(embed_stage, "BLOCK_ROWS", 37)  # every table in several blocks
    blocks = _home(tmp_path / "blocks")
    before = blocks.versions()
    report = embed_index(blocks, HashEmbedder(HashEmbedderConfig(16)), key)
    assert report.facts > 37 * 3 and report.concepts > 37 * 3
    for name in TABLES:
        assert _sorted(blocks, name) == _sorted(whole, name)
        assert blocks.versions()[name] == before.get(name, 0) + 1  # one new version each


def test_a_failure_in_a_later_block_keeps_the_table_and_says_why(tmp_path, monkeypatch):
    key = OfflineExtractor().cache_key
    store = _home(tmp_path)
    embed_index(store, HashEmbedder(HashEmbedderConfig(16)), key)
    kept = _sorted(store, FACTS)
    version = store.versions()[FACTS]
    store.set_stage_digest("embeddings", "stale")  # the next run rebuilds the tables
    store.set_stage_digest(INPUTS_STATE, "stale")
    store.set_stage_digest(MODEL_STATE, "")  # no vector kept: every row goes to the cache
    monkeypatch.setattr(embed_stage, "BLOCK_ROWS", 37)
    # new fact texts: passages and concepts are cache hits, every block of facts calls the model
    monkeypatch.setattr(vector_reuse, "fact_text", lambda s, p, o: f"{s} {p} {o} (v2)")
    failing = FailingEmbedder(calls=1)  # the first block (made before the write) succeeds
    with pytest.raises(QortexError, match="endpoint refused"):  # raised from inside the write
        embed_index(store, failing, key)
    assert failing.left < 0  # it failed in a later block, while the table was being written
    assert store.versions()[FACTS] == version and _sorted(store, FACTS) == kept
