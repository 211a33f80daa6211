"""LanceStore on a real LanceDB in tmp_path, and the library's typed errors for bad homes and queries."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from conftest import BRIDGE_QUESTION

from qortex_core.errors import HomeError, QueryError, SnapshotError
from qortex_core.storage.store import LanceStore


def rows(ids: list[str], text: str) -> pa.Table:
    return pa.table({"id": ids, "text": [f"{text} {i}" for i in ids]})


def test_upsert_read_delete_replace_and_versions(tmp_path):
    store = LanceStore.open(tmp_path)
    assert store.read("chunks").num_rows == 0
    assert store.versions() == {}
    store.upsert("chunks", rows(["a", "b"], "v1"))
    v1 = store.versions()["chunks"]
    store.upsert("chunks", rows(["b", "c"], "v2"))  # b replaced, c added
    got = {r["id"]: r["text"] for r in store.read("chunks").to_pylist()}
    assert got == {"a": "v1 a", "b": "v2 b", "c": "v2 c"}
    assert store.read_where("chunks", "id", ["c", "zz"])["id"].to_pylist() == ["c"]
    store.delete("chunks", "id", ["a", "it's"])  # a quote in a key must not break the filter
    assert sorted(store.read("chunks")["id"].to_pylist()) == ["b", "c"]
    store.replace("chunks", rows(["x"], "v3"))
    assert store.read("chunks")["id"].to_pylist() == ["x"]
    assert store.versions()["chunks"] > v1
    # a second handle (another process would see the same) reads what was committed
    assert LanceStore.open(tmp_path).read("chunks")["text"].to_pylist() == ["v3 x"]


def test_home_is_a_file(tmp_path):
    home = tmp_path / "home"
    home.write_text("keep me")
    with pytest.raises(HomeError, match="cannot create data home"):
        LanceStore.open(home)
    with pytest.raises(HomeError, match="cannot create data home"):
        LanceStore.open(home / "sub")
    assert home.read_text() == "keep me"


def test_lancedb_folder_is_a_file(tmp_path):
    (tmp_path / "lancedb").write_text("x")
    with pytest.raises(HomeError, match="LanceDB folder"):
        LanceStore.open(tmp_path)


def test_damaged_table_is_a_home_error(tmp_path):
    store = LanceStore.open(tmp_path)
    store.upsert("chunks", rows(["a"], "v1"))
    for version_dir in (tmp_path / "lancedb" / "chunks.lance").glob("_versions"):
        for f in version_dir.iterdir():
            f.write_bytes(b"garbage")
    with pytest.raises(HomeError, match="'chunks'.*unreadable"):
        LanceStore.open(tmp_path).read("chunks")


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs Linux sysfs")
def test_home_on_a_read_only_filesystem():
    # sysfs refuses new folders even to root: a home that really cannot be created
    with pytest.raises(HomeError, match="cannot create data home"):
        LanceStore.open("/sys/qortex-test-home")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    try:
        with pytest.raises(HomeError, match="not writable"):
            LanceStore.open(home)
    finally:
        home.chmod(0o700)


# -- the retriever's typed errors ---------------------------------------------------------
def test_retriever_errors(tmp_path, toy_home, embedder):
    from qortex_core.query.retriever import Retriever

    with pytest.raises(SnapshotError, match="no snapshot published"):
        Retriever.open(tmp_path / "missing", embedder=embedder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(HomeError, match="not a directory"):
        Retriever.open(tmp_path / "file", embedder=embedder)
    retriever = Retriever.open(toy_home, embedder=embedder)
    for text in ("", "   ", "\n\t", None):
        with pytest.raises(QueryError, match="empty"):
            retriever.query(text)
    for top_k in (0, -1, 10_000, 2.5, True):
        with pytest.raises(QueryError, match="top_k"):
            retriever.query(BRIDGE_QUESTION, top_k=top_k)
    with pytest.raises(QueryError, match="unknown mode"):
        retriever.query(BRIDGE_QUESTION, mode="pagerank")
    assert retriever.query(BRIDGE_QUESTION, top_k=1).passages  # still answers after the errors


def test_read_where_filters_in_lance_or_reads_every_row_with_the_same_rows(tmp_path, monkeypatch):
    from qortex_core.storage import store as store_module

    store = LanceStore.open(tmp_path)
    names = [f"k{i:03d}" for i in range(200)] + ["it's", "a,b"]
    store.upsert("chunks", rows(names, "t"))
    store.upsert("chunks", rows(["k150", "k007"], "u"))  # updated rows keep their ids
    wanted = ["k007", "it's", "a,b", "k150", "missing", "k199"]
    filtered = store.read_where("chunks", "id", wanted)
    monkeypatch.setattr(store_module, "WHERE_IN_MAX", 2)  # past it: one scan, then a filter
    scanned = store.read_where("chunks", "id", wanted)
    assert filtered.schema.equals(store.read("chunks").schema)
    assert filtered.sort_by("id").equals(scanned.sort_by("id"))
    got = dict(zip(filtered["id"].to_pylist(), filtered["text"].to_pylist()))
    assert got == {
        "k007": "u k007",
        "it's": "t it's",
        "a,b": "t a,b",
        "k150": "u k150",
        "k199": "t k199",
    }
    empty = store.read_where("chunks", "id", [])
    assert empty.num_rows == 0 and empty.schema.equals(filtered.schema)
    assert store.read_where("absent", "id", ["a"]).num_rows == 0
