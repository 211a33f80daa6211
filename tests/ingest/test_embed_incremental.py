"""The embedding stage's incremental path: after passages are added, removed, moved to another
domain and re-extracted, the four tables hold exactly the rows of a full build of the same
chunks and extractions (ids, texts, lists, vectors); a run killed between its table writes is
finished by the next one; many changes, or a table in many fragments, take the whole-table
paths and say so.

Real LanceDB homes on disk, the offline extractor and the hash embedder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import QortexError
from qortex_core.ingest import embed_delta, embed_inputs, embed_stage
from qortex_core.ingest.embed_inputs import EMBEDDED_CHUNKS, current_inputs
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stages import embed_index, extract_chunks, sync_chunks
from qortex_core.storage import compaction
from qortex_core.storage.model import Passage
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    EXTRACTIONS,
    FACTS,
    PASSAGES,
    RULES,
    LanceStore,
)

EMBED = HashEmbedder(HashEmbedderConfig(32))
KEY = OfflineExtractor().cache_key
TABLES = (PASSAGES, CONCEPTS, FACTS, RULES)
NAMES = ["Ilsa Marr", "Orin Vale", "Tomas Reed", "Kara Venn", "Lio Brandt", "Mira Holt"]


def _passage(i: int, domain: str = "d") -> Passage:
    a, b = NAMES[i % len(NAMES)], NAMES[(i * 5 + 1) % len(NAMES)]
    text = f"{a} met {b} at Harbor{i % 4}. Rule: {a} always visits Harbor{i % 4} in spring."
    return Passage(text, f"Note {i}", f"doc{i}", domain)


def _ingest(store: LanceStore, passages: list[Passage], drift: float = 1.0):
    sync_chunks(store, passages)
    extract_chunks(store, OfflineExtractor())
    return embed_index(store, EMBED, KEY, max_drift=drift, drift_floor=0)


def _sorted(store: LanceStore, name: str) -> dict[str, list]:
    rows = store.read(name)
    return rows.take(pc.sort_indices(rows["id"])).to_pydict()


def _assert_same_as_full_build(store: LanceStore, tmp: Path) -> None:
    """A fresh home given the same chunks and extractions and built in full holds the same
    rows in every table (order free) and the same record of them."""
    fresh = LanceStore.open(tmp / "full")
    fresh.replace(CHUNKS, store.read(CHUNKS))
    fresh.replace(EXTRACTIONS, store.read(EXTRACTIONS))
    assert embed_index(fresh, EMBED, KEY).mode == "full"
    for name in (*TABLES, EMBEDDED_CHUNKS):
        got, want = _sorted(store, name), _sorted(fresh, name)
        assert got.keys() == want.keys(), name
        for column in want:
            if column == "vector":
                np.testing.assert_array_equal(np.array(got[column]), np.array(want[column]))
            else:
                assert got[column] == want[column], (name, column)
    assert store.read(EMBEDDED_CHUNKS).num_rows == current_inputs(store, KEY).num_rows


def _rewrite_payload(store: LanceStore, chunk_id: str, edit) -> None:
    """Store an edited payload for one chunk's extraction (a re-extraction's result)."""
    rows = store.read(EXTRACTIONS)
    row = rows.filter(pc.equal(rows["passage_id"], chunk_id)).to_pylist()[0]
    row["payload"] = json.dumps(edit(json.loads(row["payload"])))
    store.upsert(EXTRACTIONS, pa.Table.from_pylist([row], schema=rows.schema), key="key")


def test_incremental_runs_hold_the_rows_of_a_full_build(tmp_path):
    store = LanceStore.open(tmp_path / "inc")
    corpus = [_passage(i) for i in range(24)]
    assert _ingest(store, corpus).mode == "full"

    corpus = corpus + [_passage(i) for i in range(24, 27)]  # added
    grown = _ingest(store, corpus)
    assert grown.mode == "incremental" and grown.rows_added > 0, grown
    _assert_same_as_full_build(store, tmp_path / "a")

    corpus = [p for p in corpus if p.doc_id not in ("doc0", "doc7")]  # removed
    corpus[3] = _passage(int(corpus[3].doc_id[3:]), domain="other")  # moved to another domain
    shrunk = _ingest(store, corpus)
    assert shrunk.mode == "incremental" and shrunk.rows_removed > 0, shrunk
    _assert_same_as_full_build(store, tmp_path / "b")

    # re-extracted: the first chunk (in id order) renames its concepts (their first
    # occurrence: the rows take the new names) and drops one; another loses every fact; the
    # chunk of the other domain lists no concept (its concepts are named by facts only, and
    # that domain leaves their domains)
    first, second = sorted(current_inputs(store, KEY)["id"].to_pylist())[:2]
    _rewrite_payload(
        store,
        first,
        lambda p: {**p, "concepts": [[n.upper(), "renamed"] for n, _ in p["concepts"][1:]]},
    )
    _rewrite_payload(store, second, lambda p: {**p, "facts": []})
    _rewrite_payload(store, corpus[3].id, lambda p: {**p, "concepts": []})
    changed = embed_index(store, EMBED, KEY, max_drift=1.0)
    assert changed.mode == "incremental" and changed.rows_changed > 0, changed
    assert 0 < changed.texts_embedded + changed.cache_hits < 20  # the renamed concepts
    names = set(store.read(CONCEPTS)["name"].to_pylist())
    assert {n.upper() for n in NAMES} & names  # the first chunk names them now
    _assert_same_as_full_build(store, tmp_path / "c")

    # the renaming chunk removed: its concepts take their names from the next chunk
    corpus = [p for p in corpus if p.id != first] + [_passage(30)]
    assert _ingest(store, corpus).mode == "incremental"
    assert not {n.upper() for n in NAMES} & set(store.read(CONCEPTS)["name"].to_pylist())
    _assert_same_as_full_build(store, tmp_path / "d")

    again = embed_index(store, EMBED, KEY, max_drift=1.0)
    assert again.mode == "unchanged" and again.texts_embedded == 0


def test_a_few_new_chunks_merge_only_the_chunks_that_share_their_nodes(tmp_path, monkeypatch):
    store = LanceStore.open(tmp_path)
    unique = [
        Passage(f"Karo{i} Venn met Ilsa{i} Marr at Orin{i}.", "", f"doc{i}", "d") for i in range(30)
    ]
    _ingest(store, unique)
    merged: list[int] = []
    real = embed_delta.NodeTables

    def counting(chunks, payloads):
        merged.append(len(chunks))
        return real(chunks, payloads)

    monkeypatch.setattr(embed_delta, "NodeTables", counting)
    new = Passage("Karo1 Venn met Ilsa2 Marr at Orin3.", "", "new", "d")  # three known names
    report = _ingest(store, unique + [new])
    assert report.mode == "incremental" and merged and max(merged) <= 4, merged
    assert report.passages == 31 and report.texts_embedded + report.cache_hits <= 5


def test_a_run_killed_between_table_writes_is_finished_by_the_next(tmp_path, monkeypatch):
    store = LanceStore.open(tmp_path / "inc")
    corpus = [_passage(i) for i in range(20)]
    _ingest(store, corpus)
    written: list[str] = []
    real = embed_stage.write_delta

    def dying(store_, delta):
        if len(written) == 2:
            raise QortexError("killed")
        written.append(delta.name)
        real(store_, delta)

    monkeypatch.setattr(embed_stage, "write_delta", dying)
    grown = corpus + [_passage(i) for i in range(20, 23)]
    with pytest.raises(QortexError, match="killed"):
        _ingest(store, grown)
    assert written == [PASSAGES, CONCEPTS]  # facts and rules still the old ones
    monkeypatch.setattr(embed_stage, "write_delta", real)

    redone = _ingest(store, grown)
    assert redone.mode == "full" and "stopped while writing" in redone.reason, redone
    _assert_same_as_full_build(store, tmp_path)


def test_many_changed_chunks_rebuild_every_table_and_say_why(tmp_path):
    store = LanceStore.open(tmp_path / "inc")
    corpus = [_passage(i) for i in range(10)]
    _ingest(store, corpus)
    for i in range(10, 12):  # incremental runs: the tables are held in several fragments
        corpus = corpus + [_passage(i)]
        assert _ingest(store, corpus).mode == "incremental"
    held = sum(store.count(name) for name in TABLES)
    report = _ingest(store, corpus + [_passage(i) for i in range(12, 15)], drift=0.2)
    assert report.mode == "full" and "3 of 12 chunks changed (over 20%)" in report.reason
    assert report.vectors_kept == held  # every stored row kept its vector (same id and text)
    _assert_same_as_full_build(store, tmp_path)


def test_tables_in_many_fragments_are_compacted_and_keep_their_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "SMALL_ROWS", 1 << 30)  # every fragment is small
    monkeypatch.setattr(compaction, "MAX_SMALL", 3)
    store = LanceStore.open(tmp_path / "inc")
    corpus = [_passage(i) for i in range(20)]
    _ingest(store, corpus)
    compacted: set[str] = set()
    for i in range(20, 24):
        corpus = corpus + [_passage(i)]
        report = _ingest(store, corpus)
        assert report.mode == "incremental"
        compacted |= set(report.compacted)
    assert {PASSAGES, CONCEPTS, FACTS} <= compacted
    for name in (PASSAGES, CONCEPTS, FACTS, EMBEDDED_CHUNKS):
        stats = store.open_latest(name).stats()["fragment_stats"]
        assert stats["num_fragments"] <= 3, (name, stats)
    _assert_same_as_full_build(store, tmp_path)


@pytest.mark.parametrize("fetch_max", [embed_inputs.FETCH_MAX, 1])
def test_lazy_inputs_read_the_rows_a_full_read_holds(tmp_path, monkeypatch, fetch_max):
    """The incremental path reads payloads by id (or every row, past ``FETCH_MAX`` ids): the
    rows it gets are those of a full read, and the digests tell a changed payload apart."""
    monkeypatch.setattr(embed_inputs, "FETCH_MAX", fetch_max)
    store = LanceStore.open(tmp_path / "h")
    _ingest(store, [_passage(i) for i in range(12)])
    every = current_inputs(store, KEY)
    wanted = sorted(every["id"].to_pylist())[3:7] + ["p_not_a_chunk"]
    lazy = embed_inputs.LazyInputs(
        current_inputs(store, KEY, digests=True),
        lambda only: current_inputs(store, KEY, only=only),
    )
    assert lazy.rows(wanted).to_pydict() == embed_inputs.rows_of(every, wanted).to_pydict()
    assert lazy.rows([]).num_rows == 0
    before = embed_inputs.stored_inputs(store, digests=True)
    _rewrite_payload(store, wanted[0], lambda p: {**p, "facts": []})
    diff = embed_inputs.diff_inputs(current_inputs(store, KEY, digests=True), before)
    assert (diff.reextracted, diff.added, diff.removed, diff.moved) == ([wanted[0]], [], [], [])


def _hashed_now(store: LanceStore) -> dict[str, bytes | None]:
    """Each recorded chunk's payload digest as Lance computes it from the stored payload."""
    rows = store.read_columns(EMBEDDED_CHUNKS, {"id": "id", "d": "digest(payload, 'blake3')"})
    return dict(zip(rows["id"].to_pylist(), rows["d"].to_pylist()))


def test_the_record_keeps_each_payloads_digest_and_an_older_record_still_diffs(tmp_path):
    store = LanceStore.open(tmp_path / "inc")
    corpus = [_passage(i) for i in range(12)]
    _ingest(store, corpus)
    first = sorted(current_inputs(store, KEY)["id"].to_pylist())[0]
    _rewrite_payload(store, first, lambda p: {**p, "facts": []})
    assert _ingest(store, corpus + [_passage(12)]).mode == "incremental"
    kept = store.read_columns(EMBEDDED_CHUNKS, ["id", embed_inputs.DIGEST])
    assert dict(zip(kept["id"].to_pylist(), kept[embed_inputs.DIGEST].to_pylist())) == (
        _hashed_now(store)
    )  # the re-extracted and the new chunk's digests were recorded with their rows
    # a record written before the column: the diff hashes its payloads, the column stays away
    store.replace(EMBEDDED_CHUNKS, store.read(EMBEDDED_CHUNKS).drop_columns([embed_inputs.DIGEST]))
    _rewrite_payload(store, first, lambda p: {**p, "rules": []})
    changed = _ingest(store, corpus + [_passage(12), _passage(13)])
    assert changed.mode == "incremental" and changed.rows_added > 0
    assert embed_inputs.DIGEST not in store.read(EMBEDDED_CHUNKS).column_names
    assert embed_index(store, EMBED, KEY, max_drift=1.0).mode == "unchanged"
