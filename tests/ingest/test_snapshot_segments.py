"""An incremental build keeps the facts' and concepts' vectors as the base's file, linked, plus a
delta and a row map, and the fact tables as the base's file plus a delta and runs of rows; it
publishes what a full build publishes, a retriever answers from it as from the full build, and
a change past the delta's share writes the arrays and tables whole again."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import SnapshotError
from qortex_core.ingest import stages as index
from qortex_core.ingest.cells import FactCellsConfig
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.snapshot_stage import build_snapshot
from qortex_core.query.retriever import MODES, Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.segmented_rows import SegmentedRows
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(32))
CELLS = GraphConfig(fact_cells=FactCellsConfig(min_facts=0, cell_size=8))
FILES = SynthCorpus(SynthConfig(passages=200, seed=11)).passages()
SPLIT = ("fact_vectors", "phrase_vectors")
# kept as the base's file plus a delta too (segmented_table.py)
TABLES = ("fact_links", "facts", "nodes", "passages", "phrase_keys")
# a first build, two small additions, one removal together with an addition, then a removal
# of a third of the passages (past the delta's share: written whole)
RUNS = [FILES[:150], FILES[:152], FILES[:154], FILES[3:155], FILES[60:155]]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, LanceStore, list[str]]:
    home = tmp_path_factory.mktemp("segments")
    store = LanceStore.open(home)
    names = []
    for corpus in RUNS:
        run = index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus, graph_config=CELLS)
        index.run_stages(run)
        names.append(snap.latest_name(home))
    return home, store, names


def _full(store: LanceStore, home: Path, folder: Path) -> snap.Snapshot:
    merged = snap.load(home)
    params = {k: v for k, v in merged.manifest["params"].items() if k != "graph"}
    made = build_snapshot(store, folder, merged.manifest["embedding_model"], CELLS, params)
    assert made.mode == "full"
    return snap.load(folder)


def test_small_changes_link_the_base_file_and_write_a_delta(built):
    home, _, names = built
    first, second, third = (snap.load(home, n) for n in names[:3])
    assert "segments" not in first.manifest
    for later in (second, third):
        assert sorted(later.manifest["segments"]) == sorted(SPLIT)
        for name in SPLIT:
            array = later.arrays[name]
            assert isinstance(array, SegmentedRows) and len(array.segments) == 2
            assert len(array.segments[1]) < 0.125 * len(array)  # the delta: a few rows
    folder = snap.snapshots_dir(home)
    for name in SPLIT:  # the first build's file is the segment both later ones read
        stems = [snap.load(home, n).manifest["segments"][name] for n in names[1:3]]
        assert stems[0][0] == stems[1][0] and stems[0][1] != stems[1][1]
        base_inode = os.stat(folder / names[0] / f"{name}.npy").st_ino
        for n, s in zip(names[1:3], stems):
            assert os.stat(folder / n / f"{s[0]}.npy").st_ino == base_inode
    for later, n in ((second, names[1]), (third, names[2])):  # the fact tables: the same way
        assert sorted(later.manifest["table_segments"]) == sorted(TABLES)
        for table in TABLES:
            parts = later.table_parts[table]
            assert len(parts.segments) == 2 and parts.segments[1].num_rows < 0.125 * len(
                later.tables[table]
            )
            assert len(parts.runs) > 2  # rows inserted within the base's
            assert f"{table}.arrow" not in later.manifest["files"]
            linked = folder / n / f"{parts.names[0]}.arrow"
            assert os.stat(linked).st_ino == os.stat(folder / names[0] / f"{table}.arrow").st_ino


def test_a_segmented_snapshot_equals_a_full_build_and_answers_as_one(built, tmp_path):
    home, store, names = built
    # the last build is plain: compare the one before it, a snapshot of the store as it was
    fourth = snap.load(home, names[3])
    assert sorted(fourth.manifest["segments"]) == sorted(SPLIT)
    rebuilt_home = tmp_path / "again"
    store_now = LanceStore.open(rebuilt_home)
    for corpus in RUNS[3:4]:
        run = index.IngestRun(
            store_now, rebuilt_home, OfflineExtractor(), EMBED, corpus, graph_config=CELLS
        )
        index.run_stages(run)
    rebuilt = snap.load(rebuilt_home)
    assert "segments" not in rebuilt.manifest
    for name in SPLIT:
        got, want = fourth.arrays[name], rebuilt.arrays[name]
        assert got.dtype == want.dtype and np.array_equal(np.asarray(got), want), name
    assert sorted(fourth.manifest["table_segments"]) == sorted(TABLES)
    assert "table_segments" not in rebuilt.manifest
    for table in TABLES:  # the same rows as the full build's plain files (another home's:
        # its passages were ingested at another time)
        got, want = (t.tables[table] for t in (fourth, rebuilt))
        if "ingested_at" in got.column_names:
            got, want = got.drop_columns(["ingested_at"]), want.drop_columns(["ingested_at"])
        assert got.equals(want), table
    queries = [f"{p.title} {p.text.split('.')[0]}" for p in RUNS[3][::15]]
    mine = Retriever.open(home, embedder=EMBED, version=names[3])
    theirs = Retriever.open(rebuilt_home, embedder=EMBED)
    for mode in MODES:
        for q in queries:
            a = [(h.id, h.score) for h in mine.query(q, top_k=10, mode=mode).passages]
            b = [(h.id, h.score) for h in theirs.query(q, top_k=10, mode=mode).passages]
            assert a == b, (mode, q)


def test_a_change_past_the_deltas_share_writes_the_arrays_whole(built, tmp_path):
    home, store, names = built
    last = snap.load(home, names[4])
    assert "segments" not in last.manifest and "table_segments" not in last.manifest
    rebuilt = _full(store, home, tmp_path / "full")
    for name in SPLIT:
        assert isinstance(last.arrays[name], np.memmap)
        assert np.array_equal(last.arrays[name], rebuilt.arrays[name]), name


def test_a_row_map_that_points_past_its_segments_is_a_snapshot_error(built, tmp_path):
    home, _, names = built
    folder = snap.snapshots_dir(home) / names[2]
    manifest = snap.load(home, names[2]).manifest
    rows_file = folder / "fact_vectors-rows.npy"
    data = np.load(rows_file)
    data[0] = 10**8
    np.save(rows_file, data)  # its checksum no longer matches: refused when verified
    with pytest.raises(SnapshotError, match="checksum mismatch in fact_vectors-rows.npy"):
        snap.load(home, names[2])
    with pytest.raises(SnapshotError, match="fact_vectors cannot be read: .*past its segments"):
        snap.load(home, names[2], verify=False)
    assert manifest["segments"]["fact_vectors"][1] != manifest["segments"]["fact_vectors"][0]


def test_purge_writes_segmented_arrays_whole_so_no_removed_rows_vector_stays(tmp_path):
    from qortex_core.ops.purge import purge

    home = tmp_path / "home"
    store = LanceStore.open(home)
    for corpus in (FILES[:150], FILES[3:151]):  # three passages removed, one added
        run = index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus, graph_config=CELLS)
        index.run_stages(run)
    before = snap.load(home)
    assert sorted(before.manifest["segments"]) == sorted(SPLIT)
    wanted = {name: np.array(before.arrays[name]) for name in SPLIT}
    base = before.arrays["fact_vectors"]
    held = base.segments[0]  # rows the base file holds that the array no longer uses
    unused = np.setdiff1d(np.arange(len(held)), base.rows[base.rows < len(held)])
    assert len(unused) > 0
    lost = np.array(held[unused])
    assert sorted(before.manifest["table_segments"]) == sorted(TABLES)
    kept_facts = set(before.tables["facts"]["id"].to_pylist())
    base_facts = before.table_parts["facts"].segments[0]["id"].to_pylist()
    removed = [f for f in base_facts if f not in kept_facts]  # in the base file, not the table
    assert removed
    del before, base, held
    purge(home, keep=1)
    after = snap.load(home)
    assert "segments" not in after.manifest and "table_segments" not in after.manifest
    assert set(after.tables["facts"]["id"].to_pylist()) == kept_facts
    segment_files = [p.name for t in TABLES for p in after.path.glob(f"{t}-*")]
    assert segment_files == [] and (after.path / "fact_links.arrow").is_file()
    data = (after.path / "facts.arrow").read_bytes()
    assert not [f for f in removed if f.encode() in data]  # removed facts' text
    folder = snap.snapshots_dir(home) / snap.latest_name(home)
    assert sorted(p.name for p in folder.glob("*_vectors*.npy")) == [
        "fact_vectors.npy",
        "passage_vectors.npy",
        "phrase_vectors.npy",
    ]
    for name in SPLIT:
        assert isinstance(after.arrays[name], np.memmap)
        assert np.array_equal(after.arrays[name], wanted[name]), name
    data = np.asarray(after.arrays["fact_vectors"])
    assert not any((data == row).all(axis=1).any() for row in lost)  # removed facts' vectors


def test_runs_of_a_fact_table_that_point_past_its_segments_are_a_snapshot_error(built):
    home, _, names = built
    folder = snap.snapshots_dir(home) / names[1]
    runs_file = folder / "facts-runs.npy"
    runs = np.load(runs_file)
    runs[-1, 1] += 10**6
    np.save(runs_file, runs)  # its checksum no longer matches: refused when verified
    with pytest.raises(SnapshotError, match="checksum mismatch in facts-runs.npy"):
        snap.load(home, names[1])
    with pytest.raises(SnapshotError, match="table facts cannot be read: .*past its segments"):
        snap.load(home, names[1], verify=False)
