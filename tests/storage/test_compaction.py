"""Merging the small fragments runs leave (:mod:`qortex_core.storage.compaction`) on real
LanceDB tables: nothing is written until :data:`MAX_SMALL` small fragments have piled up; then
they are merged, the large fragment stays as it was, every row reads back the same and in the
same order, and the key index still finds them (``key_index.keep_tables`` runs both)."""

from __future__ import annotations

import pytest

from qortex_core.storage import compaction, key_index
from qortex_core.storage.store import LanceStore, StoreConfig
from tests.storage.test_key_index import _rows  # ids k00000.., values a0..


@pytest.fixture
def bounds(monkeypatch):
    monkeypatch.setattr(compaction, "SMALL_ROWS", 50)
    monkeypatch.setattr(compaction, "MAX_SMALL", 4)
    monkeypatch.setattr(key_index, "MIN_ROWS", 1)


def _fragments(store: LanceStore) -> list[tuple[int, int]]:
    """(id, rows) of each fragment of table ``t``."""
    dataset = store.db.open_table("t").to_lance()
    return [(f.fragment_id, f.metadata.physical_rows) for f in dataset.get_fragments()]


def test_small_fragments_are_merged_once_they_pile_up(tmp_path, bounds):
    store = LanceStore(StoreConfig(tmp_path))
    store.replace("t", _rows(0, 200))  # a full build: one large fragment
    assert key_index.keep_tables(store, {"t": ("id",)}) == {"t.id": "created"}
    large = _fragments(store)[0]
    for start in range(200, 209, 3):  # three runs: three small fragments, under the bound
        store.append("t", _rows(start, start + 3))
        store.delete("t", "id", [f"k{start - 100:05d}"])  # a row of the large one replaced
        version = store.db.open_table("t").version
        assert key_index.keep_tables(store, {"t": ("id",)}) == {}
        assert store.db.open_table("t").version == version  # nothing written
    assert len(_fragments(store)) == 4
    store.append("t", _rows(209, 212))  # the fourth small fragment: merged
    before = store.read("t")
    assert key_index.keep_tables(store, {"t": ("id",)}) == {"t": "compacted"}
    after = _fragments(store)
    assert after[0] == large and len(after) == 2  # the large fragment as it was, one merged
    assert after[1][1] == 12
    assert store.read("t").equals(before)  # every row, in the same order
    table = store.db.open_table("t")
    (index,) = table.list_indices()
    assert table.index_stats(index.name).num_unindexed_rows <= 12
    got = store.read_where("t", "id", ["k00005", "k00210", "k00100"], ["id", "v"])
    assert sorted(got["v"].to_pylist()) == ["a210", "a5"]  # k00100 was deleted


def test_a_read_only_store_is_never_compacted(tmp_path, bounds):
    store = LanceStore(StoreConfig(tmp_path))
    store.replace("t", _rows(0, 10))
    for start in range(10, 30, 4):
        store.append("t", _rows(start, start + 4))
    reader = LanceStore(StoreConfig(tmp_path, read_only=True))
    assert key_index.keep_tables(reader, {"t": ("id",)}) == {}
    assert len(_fragments(store)) == 6
    assert compaction.compact(store.db.open_table("t")) == 5  # every fragment small here
    assert [rows for _, rows in _fragments(store)] == [30]
