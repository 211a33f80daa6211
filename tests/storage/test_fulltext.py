"""The passages' full-text index: incremental sync, pinned versions, BM25 search."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from qortex_core.storage import fulltext
from qortex_core.storage.store import LanceStore


def _passages(rows: list[tuple[str, str, str]]) -> pa.Table:
    ids, titles, texts = zip(*rows) if rows else ((), (), ())
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "title": pa.array(titles, pa.string()),
            "text": pa.array(texts, pa.string()),
        }
    )


A = ("p_a", "Harbour", "The lighthouse keeper logs every ship in the harbour.")
B = ("p_b", "", "Quartz crystals hum when struck by the tuning fork.")
C = ("p_c", "Orchard", "Apple trees in the orchard bloom in April.")


def _search(table, text: str) -> list[str]:
    return fulltext.search(table, text, 10)[0]


def test_sync_adds_and_deletes_incrementally(tmp_path):
    db = LanceStore.open(tmp_path).db
    assert fulltext.sync(db, _passages([])) == 0  # nothing to index: no table
    v1 = fulltext.sync(db, _passages([A, B]))
    table, exact = fulltext.open_pinned(db, v1)
    assert exact and _search(table, "lighthouse ships") == ["p_a"]
    assert _search(table, "harbour") == ["p_a"]  # the title is indexed too
    assert fulltext.sync(db, _passages([A, B])) == v1  # unchanged: no new version
    v2 = fulltext.sync(db, _passages([B, C]))
    assert v2 > v1
    latest, _ = fulltext.open_pinned(db, v2)
    assert _search(latest, "lighthouse") == [] and _search(latest, "orchard apples") == ["p_c"]
    stats = latest.index_stats(latest.list_indices()[0].name)
    assert stats.num_unindexed_rows == 0  # optimize() folded the new row into the index


def test_a_pinned_version_keeps_its_passages(tmp_path):
    db = LanceStore.open(tmp_path).db
    v1 = fulltext.sync(db, _passages([A, B]))
    fulltext.sync(db, _passages([C]))
    old, exact = fulltext.open_pinned(db, v1)
    assert exact and _search(old, "lighthouse") == ["p_a"] and _search(old, "orchard") == []


def test_query_syntax_and_stop_words_are_plain_text(tmp_path):
    db = LanceStore.open(tmp_path).db
    table, _ = fulltext.open_pinned(db, fulltext.sync(db, _passages([A, B, C])))
    for text in ('"unbalanced', "AND OR NOT", "((", "   ", "the of a", "zxqv blorf"):
        assert _search(table, text) == []
    assert _search(table, 'quartz "fork') == ["p_b"]


def test_a_missing_pinned_version_falls_back_to_the_latest(tmp_path):
    db = LanceStore.open(tmp_path).db
    version = fulltext.sync(db, _passages([A]))
    table, exact = fulltext.open_pinned(db, version + 50)
    assert table is not None and not exact and _search(table, "lighthouse") == ["p_a"]
    assert fulltext.open_pinned(db, 0) == (None, False)


def _corpus(n: int) -> list[tuple[str, str, str]]:
    """Short texts over a small vocabulary: many passages tie on a query's BM25 score."""
    words = "harbour lighthouse ship quartz orchard apple river bridge stone castle".split()
    return [
        (f"p_{i:04d}", "", " ".join(words[(i * 7 + k * 3) % len(words)] for k in range(2 + i % 4)))
        for i in range(n)
    ]


def test_after_adds_and_deletes_search_equals_a_full_build(tmp_path):
    rows = _corpus(240)
    db = LanceStore.open(tmp_path / "steps").db
    fulltext.sync(db, _passages(rows[:150]))
    fulltext.sync(db, _passages(rows[:200]))  # added
    fulltext.sync(db, _passages(rows[40:200]))  # deleted
    final = rows[40:120] + rows[160:240]  # deleted and added
    steps, _ = fulltext.open_pinned(db, fulltext.sync(db, _passages(final)))
    whole = LanceStore.open(tmp_path / "whole").db
    rebuilt, _ = fulltext.open_pinned(whole, fulltext.sync(whole, _passages(final)))

    queries = ["harbour", "ship stone", "apple river bridge", "castle quartz", "orchard"]
    for text in queries:
        got, want = fulltext.search(steps, text, 10), fulltext.search(rebuilt, text, 10)
        assert got[0] == want[0], text  # equal scores ranked by id, not by where rows lie
        np.testing.assert_array_equal(got[1], want[1])
        assert len(set(want[1].tolist())) < len(want[1])  # the query has ties to rank


def test_rows_written_but_not_indexed_are_indexed_by_the_next_sync(tmp_path):
    """A run stopped between adding the rows and merging the index: the next sync sees the
    same ids, and still folds them into the index (a stale index scores BM25 differently)."""
    db = LanceStore.open(tmp_path).db
    fulltext.sync(db, _passages([A, B]))
    table = fulltext.open_latest(db)
    table.add(fulltext.passage_rows(_passages([C])))  # the stopped run's rows, unindexed
    plan = fulltext.plan_sync(db, _passages([A, B, C]))
    assert plan.new.num_rows == 0 and not plan.gone and plan.stale and not plan.idle
    version = fulltext.apply_sync(db, plan)
    latest, exact = fulltext.open_pinned(db, version)
    stats = latest.index_stats(latest.list_indices()[0].name)
    assert exact and stats.num_unindexed_rows == 0 and stats.num_indexed_rows == 3
    assert fulltext.plan_sync(db, _passages([A, B, C])).idle  # nothing left to do


def _same_as_a_full_build(tmp_path, table, final) -> None:
    whole = LanceStore.open(tmp_path / "whole").db
    rebuilt, _ = fulltext.open_pinned(whole, fulltext.sync(whole, _passages(final)))
    for text in ["harbour", "ship stone", "apple river bridge", "castle quartz", "orchard"]:
        got, want = fulltext.search(table, text, 10), fulltext.search(rebuilt, text, 10)
        assert got[0] == want[0], text
        np.testing.assert_array_equal(got[1], want[1])


def test_a_sync_that_only_deletes_scores_as_a_full_build(tmp_path):
    """The table keeps stable row ids, whose index counts deleted rows until rebuilt."""
    rows = _corpus(200)
    db = LanceStore.open(tmp_path / "steps").db
    fulltext.sync(db, _passages(rows[:150]))
    fulltext.sync(db, _passages(rows[:170]))
    steps, _ = fulltext.open_pinned(db, fulltext.sync(db, _passages(rows[10:170])))
    assert fulltext._stable(steps) and not fulltext._pending(steps)
    _same_as_a_full_build(tmp_path, steps, rows[10:170])


def test_deletes_stopped_before_the_index_rebuild_are_rebuilt_by_the_next_sync(tmp_path):
    rows = _corpus(200)
    db = LanceStore.open(tmp_path / "steps").db
    fulltext.sync(db, _passages(rows[:170]))
    table = fulltext.open_latest(db)
    fulltext._rebuild_after_deletes(table, deleting=True)  # the stopped run's mark, then ...
    table.delete("id IN ('" + "', '".join(r[0] for r in rows[:10]) + "')")  # ... its deletes
    table.optimize()
    plan = fulltext.plan_sync(db, _passages(rows[10:170]))
    assert plan.stale and not plan.idle and not plan.gone
    steps, _ = fulltext.open_pinned(db, fulltext.apply_sync(db, plan))
    assert not fulltext._pending(steps)
    _same_as_a_full_build(tmp_path, steps, rows[10:170])
    assert fulltext.plan_sync(db, _passages(rows[10:170])).idle


def test_a_stopped_syncs_mark_does_not_block_prune_or_purge(tmp_path):
    """The mark is a version tag, and LanceDB refuses to clean a tagged version: ``qortex
    prune`` (compact and clean every table) and ``purge`` (rewrite) finish the rebuild first."""
    from qortex_core.ops.purge import _rewrite_and_clean
    from qortex_core.storage.retention import optimize_tables

    def purge(home, store) -> None:
        _rewrite_and_clean(store, fulltext.PASSAGE_TEXT, dt.timedelta(0), home, [])

    rows = _corpus(120)
    for home, clean in (
        (tmp_path / "prune", lambda h, s: optimize_tables(h)),
        (tmp_path / "purge", purge),
    ):
        store = LanceStore.open(home)
        fulltext.sync(store.db, _passages(rows[:110]))
        table = fulltext.open_latest(store.db)
        fulltext._rebuild_after_deletes(table, deleting=True)  # a sync stopped after its mark
        table.delete("id IN ('p_0000', 'p_0001')")
        clean(home, store)  # raised "tagged version(s) marked for cleanup" before
        latest = fulltext.open_latest(store.db)
        assert not fulltext._pending(latest)
        _same_as_a_full_build(home, latest, rows[2:110])


def _held(db) -> list[str]:
    return sorted(
        fulltext.open_latest(db).search().select(["id"]).limit(None).to_arrow()["id"].to_pylist()
    )


def test_a_sync_started_beside_is_waited_for_and_its_version_pinned(tmp_path):
    import threading

    from qortex_core.storage import text_beside

    db = LanceStore.open(tmp_path).db
    fulltext.sync(db, _passages([A]))
    gate = threading.Event()

    def slow_read() -> pa.Table:
        gate.wait(5)  # the beside sync is still running when the second one starts
        return _passages([A, B])

    text_beside.start(db, slow_read)
    text_beside.start(db, lambda: _passages([A, B, C]))  # waits for the first: one writer
    assert text_beside.pending(db)
    gate.set()
    version = text_beside.synced(db, _passages([A, B, C]), None)
    assert not text_beside.pending(db)
    assert _held(db) == ["p_a", "p_b", "p_c"]  # nothing left for the stage's own plan
    table, exact = fulltext.open_pinned(db, version)
    assert exact and _search(table, "orchard apples") == ["p_c"]
    assert fulltext.plan_sync(db, _passages([A, B, C])).idle


def test_a_failed_sync_beside_is_done_by_the_snapshots_own(tmp_path, caplog):
    from qortex_core.storage import text_beside

    db = LanceStore.open(tmp_path).db
    fulltext.sync(db, _passages([A]))

    def broken() -> pa.Table:
        raise OSError("the passages could not be read")

    text_beside.start(db, broken)
    version = text_beside.synced(db, _passages([A, C]), None)
    assert _held(db) == ["p_a", "p_c"] and version == fulltext.open_latest(db).version
    assert "sync beside the stages failed" in caplog.text


def test_new_rows_are_index_segments_that_score_as_one_index_until_folded(tmp_path, monkeypatch):
    """Each sync that adds rows indexes them as a new segment (BM25 statistics span the
    segments); past MAX_SEGMENTS the segments are folded into one. Either way the scores
    are those of an index built at once over the same rows."""
    rows = _corpus(240)
    db = LanceStore.open(tmp_path / "steps").db
    fulltext.sync(db, _passages(rows[:150]))
    for stop in (170, 190, 210):
        fulltext.sync(db, _passages(rows[:stop]))
    table, _ = fulltext.open_pinned(db, fulltext.sync(db, _passages(rows[:220])))
    assert fulltext.segments(table) == 5  # the first index and one segment per sync
    stats = table.index_stats(table.list_indices()[0].name)
    assert stats.num_unindexed_rows == 0 and stats.num_indexed_rows == 220
    _same_as_a_full_build(tmp_path / "a", table, rows[:220])
    monkeypatch.setattr(fulltext, "MAX_SEGMENTS", 5)
    version = fulltext.sync(db, _passages(rows))  # at the bound: folded
    folded, exact = fulltext.open_pinned(db, version)
    assert exact and fulltext.segments(folded) == 1
    assert folded.index_stats(folded.list_indices()[0].name).num_indexed_rows == 240
    _same_as_a_full_build(tmp_path / "b", folded, rows)
    old, _ = fulltext.open_pinned(db, table.version)  # a snapshot's pinned version still reads
    assert fulltext.segments(old) == 5 and _search(old, "harbour") == _search(table, "harbour")
