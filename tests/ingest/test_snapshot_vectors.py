"""The snapshot's vector files, streamed from LanceDB and permuted a block at a time
(ingest/snapshot_vectors.py): same rows as the stored table, same files whatever the block size,
pages released, staged files linked into the snapshot and never left behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import SnapshotError
from qortex_core.ingest import snapshot_cells
from qortex_core.ingest import snapshot_vectors as sv
from qortex_core.ingest.cells import FactCellsConfig
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.snapshot_cells import full_cells
from qortex_core.ingest.stages import build_index, build_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import CONCEPTS, FACTS, LanceStore

INDEXED = GraphConfig(fact_cells=FactCellsConfig(min_facts=0, cell_size=16))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("vectors")
    store = LanceStore.open(path)
    passages = SynthCorpus(SynthConfig(passages=150, seed=4)).passages()
    build_index(store, path, passages, OfflineExtractor(), HashEmbedder(HashEmbedderConfig(16)))
    return path, store


def _stored_vectors(store: LanceStore, name: str) -> tuple[list, np.ndarray]:
    rows = store.read(name)
    return rows["id"].to_pylist(), np.array(rows["vector"].to_pylist(), np.float32)


def test_stored_then_permuted_files_hold_the_stored_rows_for_any_block_size(
    home, tmp_path, monkeypatch
):
    _, store = home
    ids, want = _stored_vectors(store, FACTS)
    stored = tmp_path / "stored.npy"
    sv.write_stored(store, FACTS, store.read_without(FACTS, ["vector"])["id"], stored)
    assert np.array_equal(np.load(stored), want)
    order = np.random.default_rng(0).permutation(len(ids))
    sv.write_permuted(stored, order, tmp_path / "one.npy")
    monkeypatch.setattr(sv, "BLOCK_BYTES", 3 * 16 * 4)  # three rows a block: many blocks
    sv.write_permuted(stored, order, tmp_path / "many.npy")
    one, many = (tmp_path / "one.npy").read_bytes(), (tmp_path / "many.npy").read_bytes()
    assert one == many  # byte for byte, header included
    assert np.array_equal(np.load(tmp_path / "one.npy"), want[order])
    buffer = tmp_path / "saved.npy"
    np.save(buffer, want[order])
    assert buffer.read_bytes() == one  # the header np.save writes


def test_permutation_spills_beside_the_output_and_removes_the_spill(tmp_path, monkeypatch):
    rows = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    np.save(tmp_path / "src.npy", rows)
    order = np.random.default_rng(2).permutation(40)
    monkeypatch.setattr(sv, "BLOCK_BYTES", 7 * 3 * 4)  # 7-row blocks: a short last block
    sv.write_permuted(tmp_path / "src.npy", order, tmp_path / "out.npy")
    assert np.array_equal(np.load(tmp_path / "out.npy"), rows[order])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npy", "src.npy"]


@pytest.mark.parametrize(
    "order",
    [np.array([0, 1, 1, 3]), np.array([0, 1, 2]), np.array([0, 1, 2, 4]), np.array([-1, 0, 1, 2])],
)
def test_an_order_that_is_not_a_permutation_is_a_snapshot_error(tmp_path, order):
    np.save(tmp_path / "src.npy", np.ones((4, 2), np.float32))
    with pytest.raises(SnapshotError, match="not a permutation"):
        sv.write_permuted(tmp_path / "src.npy", order, tmp_path / "out.npy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.npy"]


def test_cells_from_a_mapped_file_equal_cells_from_memory(home, tmp_path, monkeypatch):
    _, store = home
    ids, want = _stored_vectors(store, FACTS)
    path = tmp_path / "facts.npy"
    np.save(path, want)
    config = FactCellsConfig(min_facts=0, cell_size=16)
    monkeypatch.setattr(snapshot_cells, "_BLOCK", 32)  # several blocks, a release after each
    calls = []
    keys = pa.chunked_array([pa.array(ids, pa.string())])
    with sv.mapped(path) as (rows, release):
        mapped_cells = full_cells(keys, rows, config, lambda: (calls.append(1), release()))
    memory_cells = full_cells(keys, want, config)
    assert mapped_cells is not None and memory_cells is not None and calls
    assert np.array_equal(mapped_cells.order, memory_cells.order)
    assert np.array_equal(mapped_cells.centroids, memory_cells.centroids)


def _rss_file_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"RssFile:\s+(\d+)", status).group(1))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_release_drops_the_mapped_pages_from_the_process(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.ones((1 << 16, 256), np.float32))  # 64 MB
    with sv.mapped(path) as (rows, release):
        before = _rss_file_kb()
        assert float(rows.sum()) == rows.size  # every page read
        touched = _rss_file_kb()
        release()
        after = _rss_file_kb()
    assert touched - before > 48_000  # the pages were resident...
    assert touched - after > 48_000  # ...and are not any more


def test_snapshot_links_its_vector_files_and_leaves_no_staging_folder(home):
    path, store = home
    report = build_snapshot(store, path, "hash3-16", INDEXED, force=True)
    loaded = snap.load(path)  # verifies every checksum
    facts = loaded.tables["facts"]["id"].to_pylist()
    ids, want = _stored_vectors(store, FACTS)
    at = {fid: i for i, fid in enumerate(ids)}
    assert len(loaded.arrays["fact_cell_bounds"]) > 2  # the facts are stored cell by cell
    assert np.array_equal(np.asarray(loaded.arrays["fact_vectors"]), want[[at[f] for f in facts]])
    assert os.stat(report.path / "fact_vectors.npy").st_nlink == 1  # the staged name is gone
    assert not [p for p in snap.snapshots_dir(path).iterdir() if p.name.startswith(".tmp-")]


def test_a_failed_build_leaves_no_staging_folder(home, monkeypatch):
    path, store = home
    latest = snap.latest_name(path)
    read_columns = store.read_columns

    def read_then_write(name, columns):  # another writer appends between the two reads
        rows = read_columns(name, columns)
        if name == CONCEPTS and "passage_ids" in columns:  # the snapshot's read of the rows
            monkeypatch.setattr(store, "read_columns", read_columns)
            full = store.read(CONCEPTS)
            store.append(CONCEPTS, full.slice(0, 1).set_column(0, "id", pa.array(["c_extra"])))
        return rows

    monkeypatch.setattr(store, "read_columns", read_then_write)
    with pytest.raises(SnapshotError, match="concepts changed"):
        build_snapshot(store, path, "hash3-16", INDEXED, force=True)
    assert snap.latest_name(path) == latest
    assert not [p for p in snap.snapshots_dir(path).iterdir() if p.name.startswith(".tmp-")]


def test_fact_texts_read_after_the_graph_match_their_rows(home):
    path, store = home
    build_snapshot(store, path, "hash3-16", INDEXED, force=True)
    snapshot_facts = snap.load(path).tables["facts"].to_pylist()
    stored = {r["id"]: r for r in store.read(FACTS).to_pylist()}
    assert len(snapshot_facts) == len(stored) > 50
    assert [r["id"] for r in snapshot_facts] != sorted(stored)  # cell order, not stored order
    for row in snapshot_facts:
        want = stored[row["id"]]
        assert (row["subject"], row["predicate"], row["object"]) == (
            want["subject"],
            want["predicate"],
            want["object"],
        )


def _resident_kb(path: Path) -> int:
    """Resident kB of this process's maps of ``path`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_release_drops_a_snapshot_maps_resident_pages_and_keeps_its_values(tmp_path):
    path = tmp_path / "fact_vectors.npy"
    values = np.random.default_rng(0).standard_normal((16_384, 64)).astype(np.float32)  # 4 MB
    np.save(path, values)
    mapped = np.load(path, mmap_mode="r")  # as a snapshot's arrays are loaded
    view = mapped[100:]
    assert float(np.asarray(view, np.float64).sum()) != 0.0  # every page read
    assert _resident_kb(path) >= 3_000
    sv.release(view)  # through a view of the map, as a pass over blocks holds it
    assert _resident_kb(path) < 1_000
    assert np.array_equal(mapped, values)  # read again from the page cache
    sv.release(values)  # not a map: nothing to do
    assert values.sum() == pytest.approx(float(np.asarray(mapped, np.float64).sum()), rel=1e-5)
