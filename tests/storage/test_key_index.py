"""The key columns' BTREE indexes (:mod:`qortex_core.storage.key_index`) on real LanceDB tables:
made once a table is large enough, extended only once enough rows were written since (a small
write leaves the table's version alone), merged past a number of segments; and a table read,
upserted and deleted through its index holds exactly what an unindexed twin holds."""

from __future__ import annotations

import pyarrow as pa
import pytest

from qortex_core.storage import key_index
from qortex_core.storage.store import LanceStore, StoreConfig


def _rows(start: int, stop: int, tag: str = "a") -> pa.Table:
    return pa.table(
        {
            "id": [f"k{i:05d}" for i in range(start, stop)],
            "v": [f"{tag}{i}" for i in range(start, stop)],
        }
    )


@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(key_index, "UNINDEXED_MAX", 10)
    monkeypatch.setattr(key_index, "MAX_SEGMENTS", 3)


def _index(table):
    (index,) = table.list_indices()
    return table.index_stats(index.name)


def test_an_index_is_made_extended_and_merged_as_rows_arrive(tmp_path, small_bounds):
    store = LanceStore(StoreConfig(tmp_path))
    store.replace("t", _rows(0, 40))
    table = store.db.open_table("t")
    assert key_index.keep(table, "id", min_rows=41) == ""  # too small: scanned
    assert table.list_indices() == []
    assert key_index.keep(table, "id", min_rows=40) == "created"
    assert _index(table).num_unindexed_rows == 0

    store.append("t", _rows(40, 50))  # 10 new rows: within the bound, left to the scan
    table.checkout_latest()
    version = table.version
    assert key_index.keep(table, "id", min_rows=40) == ""
    assert table.version == version and _index(table).num_unindexed_rows == 10

    segments = []
    for start in (50, 61, 72):  # past the bound each time: a new segment, then a merge
        store.append("t", _rows(start, start + 11))
        table.checkout_latest()
        done = key_index.keep(table, "id", min_rows=40)
        segments.append((done, _index(table).num_indices))
        assert _index(table).num_unindexed_rows == 0
    assert segments == [("extended", 2), ("extended", 3), ("merged", 1)]


def test_lookups_upserts_and_deletes_through_the_index_match_a_scan(tmp_path, small_bounds):
    homes = {kind: LanceStore(StoreConfig(tmp_path / kind)) for kind in ("indexed", "scanned")}
    for kind, store in homes.items():
        store.replace("t", _rows(0, 60))
        if kind == "indexed":
            assert key_index.keep_tables(store, {"t": ("id",)}) == {}  # under MIN_ROWS: none
            key_index.keep(store.db.open_table("t"), "id", min_rows=1)
        store.append("t", _rows(60, 70))  # unindexed rows
        store.upsert("t", _rows(55, 65, tag="b"))  # indexed and unindexed rows replaced
        store.upsert("t", _rows(70, 72, tag="c"))  # new rows
        store.delete("t", "id", ["k00003", "k00061", "k00071", "missing"])
    indexed, scanned = homes["indexed"], homes["scanned"]
    assert [list(i.columns) for i in indexed.db.open_table("t").list_indices()] == [["id"]]
    assert scanned.db.open_table("t").list_indices() == []
    want = ["k00002", "k00003", "k00056", "k00061", "k00064", "k00070", "k00071"]
    got = [s.read_where("t", "id", want).sort_by("id") for s in (indexed, scanned)]
    assert got[0].equals(got[1])
    assert got[0]["id"].to_pylist() == ["k00002", "k00056", "k00064", "k00070"]
    assert got[0]["v"].to_pylist() == ["a2", "b56", "b64", "c70"]
    full = [s.read("t").sort_by("id") for s in (indexed, scanned)]
    assert full[0].equals(full[1]) and full[0].num_rows == 72 - 3


def test_a_read_only_store_writes_no_index(tmp_path, monkeypatch):
    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    LanceStore(StoreConfig(tmp_path)).replace("t", _rows(0, 5))
    reader = LanceStore(StoreConfig(tmp_path, read_only=True))
    assert key_index.keep_tables(reader, {"t": ("id",)}) == {}
    writer = LanceStore(StoreConfig(tmp_path))
    assert key_index.keep_tables(writer, {"t": ("id",), "absent": ("id",)}) == {"t.id": "created"}
    assert key_index.keep_tables(writer, {"t": ("id",)}) == {}  # up to date: nothing written
