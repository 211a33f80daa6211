"""A sequence of incremental snapshot builds (passages added, removed, one changed) publishes,
array by array and table by table, what a full build of the same final tables publishes, with
the fact index on: fact vectors merged from the base, the fact cells updated from the base's
(never computed from every vector again), word frequencies updated by the change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import snapshot_cells, snapshot_facts, snapshot_read, snapshot_words
from qortex_core.ingest import stages as index
from qortex_core.ingest.cells import EXACT_CELLS, FactCellsConfig
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.snapshot_stage import build_snapshot
from qortex_core.storage import arrow_access
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(32))
CELLS = GraphConfig(fact_cells=FactCellsConfig(min_facts=0, cell_size=8))
BATCH = 7  # ids of one filtered read of touched fact rows in these builds
FILES = SynthCorpus(SynthConfig(passages=170, seed=7)).passages()


def _runs() -> list[list]:
    """Each run's corpus: a first build, files added, files removed and one changed, then
    files removed and added together."""
    first = FILES[:120]
    added = FILES[:145]
    changed = replace(FILES[5], text=FILES[5].text + " The ferry left at dawn.")
    edited = [changed if p == FILES[5] else p for p in added if p not in FILES[20:30]]
    mixed = [p for p in edited if p not in FILES[60:70]] + FILES[145:170]
    return [first, added, edited, mixed]


def _run(store: LanceStore, home: Path, corpus: list) -> dict[str, object]:
    run = index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus, graph_config=CELLS)
    return index.run_stages(run)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, LanceStore, list[dict[str, object]]]:
    home = tmp_path_factory.mktemp("merged")
    store = LanceStore.open(home)
    reports = [_run(store, home, _runs()[0])]
    with pytest.MonkeyPatch.context() as mp:  # later builds must not lay out the cells anew
        mp.setattr(snapshot_read, "full_cells", _refuse)
        mp.setattr(snapshot_facts, "WHERE_IN_MAX", BATCH)  # touched fact rows read in batches
        # the base's fact rows kept as views of its file however few rows there are
        mp.setattr(arrow_access, "RUNS_PER_ROW", 1.0)
        mp.setattr(snapshot_read, "runs_of", _recorded)
        mp.setattr(snapshot_cells, "_centroid_vectors", _centroids_recorded)
        reports += [_run(store, home, corpus) for corpus in _runs()[1:]]
    return home, store, reports


VIEWED: list[int] = []  # the fewest chunks of a column of each build's fact rows


def _recorded(table: pa.Table, order: np.ndarray) -> pa.Table:
    got = arrow_access.runs_of(table, order)
    VIEWED.append(min(c.num_chunks for c in got.columns))
    return got


CENTROIDS: list[int] = []  # each merge's kept cells, whose centroids came from the base's
CENTROID_VECTORS = snapshot_cells._centroid_vectors


def _centroids_recorded(rows, old_to_new, base_centroids, vectors_of):
    assert base_centroids is not None and len(base_centroids) == len(old_to_new)
    CENTROIDS.append(int((old_to_new >= 0).sum()))
    return CENTROID_VECTORS(rows, old_to_new, base_centroids, vectors_of)


def _refuse(*args, **kwargs):
    raise AssertionError("the fact cells were computed from every vector")


def test_each_later_build_merged_the_fact_vectors_and_cells(built):
    _, _, reports = built
    read = []
    for report in reports[1:]:
        made = report["graph_snapshot"]
        assert made.mode == "incremental" and "facts" in made.reason, made
        # the fact rows too: the base's, but for those the embedding stage wrote since
        assert "fact rows from the base" in made.reason, made
        read.append(int(made.reason.split("fact rows from the base, ")[1].split(" ")[0]))
    assert max(read) > BATCH  # in more than one filtered read
    assert len(CENTROIDS) == 3 and min(CENTROIDS) > 0  # the kept cells' centroids: the base's
    assert reports[2]["graph_snapshot"].rows_removed > 0


def test_merged_snapshot_equals_a_full_build_of_the_same_tables(built, tmp_path):
    home, store, reports = built
    merged = snap.load(home)
    model = merged.manifest["embedding_model"]
    params = {k: v for k, v in merged.manifest["params"].items() if k != "graph"}
    full = build_snapshot(store, tmp_path / "full", model, CELLS, params)  # no base: full
    assert full.mode == "full"
    rebuilt = snap.load(tmp_path / "full")

    assert sorted(merged.arrays) == sorted(rebuilt.arrays)
    assert len(merged.arrays["fact_cell_bounds"]) > 10  # many cells, some new, some removed
    for name, want in rebuilt.arrays.items():
        got = merged.arrays[name]
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert sorted(merged.tables) == sorted(rebuilt.tables)
    for name, want in rebuilt.tables.items():
        got = merged.tables[name]
        if name == snapshot_words.WORDS:  # the same counts, in another row order
            got, want = got.sort_by("word"), want.sort_by("word")
        assert got.equals(want), name
    assert merged.manifest["counts"] == rebuilt.manifest["counts"]
    assert merged.manifest["fact_cells"] == rebuilt.manifest["fact_cells"]
    # the fact tables, built from views of the base's rows, are the full build's files
    assert len(VIEWED) == 3 and min(VIEWED) > 1
    for file in ("facts.arrow", f"{snapshot_facts.FACT_LINKS}.arrow"):
        assert merged.manifest["files"][file] == rebuilt.manifest["files"][file], file


def test_a_merged_snapshot_writes_no_byte_of_a_removed_fact(built):
    home, _, _ = built
    names = snap.list_versions(home)
    before, after = snap.load(home, names[1]), snap.load(home, names[2])  # FILES[20:30] gone
    gone = set(before.tables["facts"]["id"].to_pylist()) - set(
        after.tables["facts"]["id"].to_pylist()
    )
    links = before.tables[snapshot_facts.FACT_LINKS]
    at = [i for i, f in enumerate(before.tables["facts"]["id"].to_pylist()) if f in gone]
    sources = {p for ps in links["passage_ids"].take(pa.array(at)).to_pylist() for p in ps}
    sources -= {
        p for ps in after.tables[snapshot_facts.FACT_LINKS]["passage_ids"].to_pylist() for p in ps
    }
    assert len(gone) > 20 and len(sources) >= 10
    folder = snap.snapshots_dir(home) / names[2]
    # the large tables are the base's file, linked, and a delta: the files this build wrote
    # hold no removed fact or passage (the base's file still does, until a purge:
    # test_snapshot_segments.py)
    segments = after.manifest["table_segments"]
    kept = ["facts", snapshot_facts.FACT_LINKS, "nodes", "passages", "phrase_keys"]
    assert sorted(segments) == sorted(kept)
    for table, stems in segments.items():
        base_folder = snap.snapshots_dir(home) / names[1]  # its file, or its own first segment
        base_file = next(base_folder.glob(f"{stems[0]}.arrow"), base_folder / f"{table}.arrow")
        assert (folder / f"{stems[0]}.arrow").stat().st_ino == base_file.stat().st_ino
        for file in (*(f"{s}.arrow" for s in stems[1:]), f"{table}-runs.npy"):
            data = (folder / file).read_bytes()
            assert not [f for f in gone if f.encode() in data], file
            assert not [p for p in sources if p.encode() in data], file


def test_cells_are_a_function_of_the_fact_set_not_of_the_stored_order():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(600, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ids = pa.chunked_array([pa.array([f"f_{i:05d}" for i in range(600)])])
    config = FactCellsConfig(min_facts=0, cell_size=16)
    shuffle = rng.permutation(600)
    a = snapshot_cells.full_cells(ids, v, config)
    b = snapshot_cells.full_cells(ids.take(pa.array(shuffle)), v[shuffle], config)
    assert a is not None and b is not None and len(a.bounds) > 20
    np.testing.assert_array_equal(a.centroids, b.centroids)
    np.testing.assert_array_equal(a.bounds, b.bounds)
    cells_a = [set(a.order[a.bounds[c] : a.bounds[c + 1]]) for c in range(len(a.bounds) - 1)]
    cells_b = [
        set(shuffle[b.order[b.bounds[c] : b.bounds[c + 1]]]) for c in range(len(b.bounds) - 1)
    ]
    assert cells_a == cells_b


def test_the_cell_size_doubles_so_a_fact_is_compared_with_every_centroid():
    config = FactCellsConfig(cell_size=1024)
    assert snapshot_cells.cell_size(1_450_000, config) == 1024  # 100k passages' facts
    assert snapshot_cells.cell_size(14_500_000, config) == 4096  # 1M passages'
    assert 14_500_000 / 4096 <= EXACT_CELLS


@pytest.mark.parametrize("break_with", ["rewrite", "old_base"])
def test_fact_rows_are_read_in_full_when_the_base_cannot_give_them(tmp_path, break_with):
    """A write of the facts table outside the embedding stage (the same rows rewritten, as a
    compaction does), or a base without its fact links (a snapshot of an older qortex),
    leaves no way to tell which rows changed: the facts table is read in full, with the same
    result."""
    home = tmp_path / "h"
    store = LanceStore.open(home)
    _run(store, home, FILES[:120])
    if break_with == "rewrite":
        store.replace("facts", store.read("facts"))
    else:  # the latest snapshot as an older qortex published it: no fact links
        latest = snap.load(home)
        tables = {k: t for k, t in latest.tables.items() if k != "fact_links"}
        snap.publish(home, snap.Snapshot(dict(latest.arrays), tables, dict(latest.manifest)))
    made = _run(store, home, FILES[:135])["graph_snapshot"]
    assert made.mode == "incremental" and "fact rows from the base" not in made.reason, made
    merged = snap.load(home)
    model = merged.manifest["embedding_model"]
    params = {k: v for k, v in merged.manifest["params"].items() if k != "graph"}
    assert build_snapshot(store, tmp_path / "full", model, CELLS, params).mode == "full"
    rebuilt = snap.load(tmp_path / "full")
    for name, want in rebuilt.arrays.items():
        assert np.array_equal(merged.arrays[name], want), name
    assert merged.tables["facts"].equals(rebuilt.tables["facts"])
    assert merged.tables["fact_links"].equals(rebuilt.tables["fact_links"])


def test_phrase_keys_of_concepts_the_base_holds_are_the_bases(built, monkeypatch):
    from qortex_core.ingest import snapshot_keys
    from qortex_core.ingest.snapshot_base import Base
    from qortex_core.storage.phrase_keys import PHRASE_KEYS, phrase_keys

    home, _, _ = built
    base = Base(snap.load(home))
    assert PHRASE_KEYS in base.snapshot.tables  # stored by the builds above
    held = base.keys("concepts")
    names = held["name"].to_pylist()
    names[3] = "Harbor Lighthouse Keeper"  # renamed under its id: normalised again
    concepts = pa.table(
        {"id": held["id"].to_pylist() + ["c_00000000000000aa"], "name": names + ["The Old Mill"]}
    )
    normalised: list[int] = []

    def counted(column):
        normalised.append(len(column))
        return phrase_keys(column)

    monkeypatch.setattr(snapshot_keys, "phrase_keys", counted)
    got = snapshot_keys.phrase_key_table(concepts, base)
    assert normalised == [2]  # the renamed concept and the new one
    assert got["key"].to_pylist() == phrase_keys(concepts["name"]).to_pylist()
    assert (
        got["key"][3].as_py() == "harbor lighthouse keeper"
        and got["key"][-1].as_py() == "the old mill"
    )


@pytest.mark.parametrize("held", [0, 2])
def test_phrase_keys_from_a_base_of_no_or_other_concepts(held):
    from qortex_core.ingest.snapshot_base import Base
    from qortex_core.ingest.snapshot_keys import phrase_key_table
    from qortex_core.storage.phrase_keys import PHRASE_KEYS, phrase_keys

    ids = ["c_00000000000000a1", "c_00000000000000a2"][:held]
    names = ["Old Mill", "Harbor Gate"][:held]
    nodes = pa.table(
        {
            "id": pa.array([*ids, "p_00000000000000b1"], pa.string()),
            "kind": pa.array(["phrase"] * held + ["passage"], pa.string()),
            "name": pa.array([*names, "a passage"], pa.string()),
        }
    )
    stored = pa.table({"key": phrase_keys(pa.array(names, pa.string()))})
    base = Base(
        snap.Snapshot({}, {"nodes": nodes, PHRASE_KEYS: stored}, {"counts": {"phrases": held}})
    )
    concepts = pa.table(
        {"id": ["c_00000000000000c3", "c_00000000000000c4"], "name": ["River Delta", "Old Mill"]}
    )  # none of them the base's (a base of memories only holds no concept)
    got = phrase_key_table(concepts, base)
    assert got["key"].to_pylist() == ["river delta", "old mill"]


def _base_with_lookup(ids: list[str], names: list[str]):
    """A base snapshot in memory holding ``names`` as concepts, their keys and their lookup."""
    from qortex_core.ingest.snapshot_base import Base
    from qortex_core.storage.arrow_access import sorted_key_hashes
    from qortex_core.storage.phrase_keys import PHRASE_KEYS, phrase_keys

    nodes = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "kind": pa.array(["phrase"] * len(ids), pa.string()),
            "name": pa.array(names, pa.string()),
        }
    )
    keys = phrase_keys(pa.array(names, pa.string()))
    hashes, rows = sorted_key_hashes(keys)
    arrays = {"phrase_key_hashes": hashes, "phrase_key_rows": rows}
    manifest = {"counts": {"phrases": len(ids)}}
    return Base(
        snap.Snapshot(arrays, {"nodes": nodes, PHRASE_KEYS: pa.table({"key": keys})}, manifest)
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_phrase_lookup_from_the_base_is_a_full_builds(seed, monkeypatch):
    from qortex_core.ingest import snapshot_keys
    from qortex_core.ingest.snapshot_base import reused
    from qortex_core.storage import arrow_access
    from qortex_core.storage.phrase_keys import phrase_keys

    rng = np.random.default_rng(seed)
    words = ["Old Mill", "Harbor Gate", "river delta", "RIVER  Delta", "a", "the", "Mill Road"]
    n = 400
    ids = [f"c_{i:016x}" for i in range(n)]
    names = [f"{rng.choice(words)} {i % 37}" if i % 5 else str(rng.choice(words)) for i in range(n)]
    base = _base_with_lookup(ids, names)
    kept = sorted(rng.choice(n, 300, replace=False).tolist())  # a quarter removed
    new_ids = [ids[i] for i in kept] + [f"c_{n + i:016x}" for i in range(40)]
    new_names = [names[i] for i in kept] + [str(rng.choice(words)) for _ in range(40)]
    new_names[5] = "Harbor Gate"  # renamed under its id: hashed again, ties the base's keys
    order = rng.permutation(len(new_ids))  # another snapshot order
    concepts = pa.table({"id": [new_ids[i] for i in order], "name": [new_names[i] for i in order]})
    rows, same, _ = reused(concepts, base.keys("concepts"))
    same_as = np.where(same, rows, -1)
    keys = snapshot_keys.phrase_key_table(concepts, base, same_as)["key"]
    hashed: list[int] = []

    def counted(column):
        hashed.append(len(column))
        return arrow_access.string_hashes(column)

    monkeypatch.setattr(snapshot_keys, "string_hashes", counted)
    got_hashes, got_rows = snapshot_keys.phrase_lookup(keys, base, same_as)
    want_hashes, want_rows = arrow_access.sorted_key_hashes(phrase_keys(concepts["name"]))
    assert hashed == [int((same_as < 0).sum())]  # only the concepts the base lacks
    assert np.array_equal(got_hashes, want_hashes) and got_hashes.dtype == np.int64
    assert np.array_equal(got_rows, want_rows) and got_rows.dtype == np.int32
    assert (np.diff(want_hashes) == 0).any()  # equal keys: their rows in row order matter
