"""The stages' records of the rows they wrote, version to version: a chain of links covers a
span of versions only when every link is there, one after another; the embedding stage
compares only the chunks the chunk and extraction stages' links name, and every chunk when
the chain is broken."""

from __future__ import annotations

from qortex_core.ingest import row_changes
from qortex_core.storage.store import LanceStore


def test_links_cover_a_span_of_versions_only_one_after_another(tmp_path):
    store = LanceStore.open(tmp_path / "h")
    assert row_changes.touched(store, "facts", 3, 3) == []
    assert row_changes.touched(store, "facts", 3, 5) is None  # nothing recorded
    row_changes.record(store, "facts", 3, 5, ["f_b", "f_a"], ["f_c"])
    row_changes.record(store, "facts", 5, 6, ["f_a", "f_d"], [])
    assert row_changes.touched(store, "facts", 3, 6) == ["f_a", "f_b", "f_c", "f_d"]
    assert row_changes.touched(store, "facts", 5, 6) == ["f_a", "f_d"]
    assert row_changes.touched(store, "facts", 3, 7) is None  # a write no link records
    assert row_changes.touched(store, "facts", 4, 6) is None  # not a version a link starts at
    row_changes.record(store, "facts", 8, 9, ["f_e"], [])  # a gap: 6 -> 8 not recorded
    assert row_changes.touched(store, "facts", 3, 9) is None
    assert row_changes.touched(store, "facts", 8, 9) == ["f_e"]
    assert row_changes.touched(store, "concepts", 8, 9) is None  # per table


def test_a_change_too_large_or_a_rebuild_clears_the_chain(tmp_path):
    store = LanceStore.open(tmp_path / "h")
    row_changes.record(store, "facts", 1, 2, ["f_a"], [])
    big = [f"f_{i}" for i in range(row_changes.MAX_IDS + 1)]
    row_changes.record(store, "facts", 2, 3, big, [])
    assert row_changes.touched(store, "facts", 1, 2) is None  # cleared, not recorded
    row_changes.record(store, "facts", 3, 4, ["f_z"], [])
    row_changes.clear(store, "facts")
    assert row_changes.touched(store, "facts", 3, 4) is None
    for v in range(10, 10 + 2 * row_changes.KEEP):  # only the newest links are kept
        row_changes.record(store, "facts", v, v + 1, [f"f_{v}"], [])
    end = 10 + 2 * row_changes.KEEP
    assert row_changes.touched(store, "facts", end - row_changes.KEEP, end) is not None
    assert row_changes.touched(store, "facts", 10, end) is None


def _stages(home, passages):
    from qortex_core.embed import HashEmbedder, HashEmbedderConfig
    from qortex_core.ingest import stages
    from qortex_core.ingest.extract import OfflineExtractor

    embedder = HashEmbedder(HashEmbedderConfig(32))
    run = stages.IngestRun(LanceStore.open(home), home, OfflineExtractor(), embedder, passages)
    return stages.run_stages(run)


def test_the_chunk_and_extraction_stages_name_the_chunks_the_embedding_stage_compares(tmp_path):
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
    from qortex_core.ingest.embed_inputs import touched_chunks
    from qortex_core.storage.store import CHUNKS, EXTRACTIONS

    corpus = SynthCorpus(SynthConfig(passages=40, seed=3)).passages()
    home = tmp_path / "h"
    _stages(home, corpus[:30])
    store = LanceStore.open(home)
    now = {name: row_changes.version(store, name) for name in (CHUNKS, EXTRACTIONS)}
    assert touched_chunks(store, now) == []  # the record follows the tables as they are

    reports = _stages(home, corpus[:28] + corpus[30:33])  # 3 new chunks, 2 removed
    assert "only the 5 chunks written since were compared" in reports["embeddings"].reason
    store = LanceStore.open(home)
    before = {name: row_changes.version(store, name) for name in (CHUNKS, EXTRACTIONS)}
    store.replace(CHUNKS, store.read(CHUNKS))  # the same rows, written by no stage
    after = dict(before, **{CHUNKS: row_changes.version(store, CHUNKS)})
    assert touched_chunks(store, before) == [] and touched_chunks(store, after) is None
    reports = _stages(home, corpus[:28] + corpus[30:34])  # every chunk compared again
    embedded = reports["embeddings"]
    assert embedded.mode == "incremental" and "written since" not in embedded.reason
    assert embedded.rows_added > 0
