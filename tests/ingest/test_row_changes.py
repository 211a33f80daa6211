"""The embedding stage's record of the fact rows it wrote, version to version: a chain of
links covers a span of versions only when every link is there, one after another."""

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
