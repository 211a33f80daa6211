"""The synonym_edges stage updates its edges for the concepts that changed and keeps the rest:
the edges equal a full build's over the same concepts; it rebuilds in full when the concepts
drifted or a run was killed between its writes, and says so."""

from __future__ import annotations

import multiprocessing as mp
import signal
from pathlib import Path

import numpy as np
import pytest
from synonym_runs import index_stages, killed_sync

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.ingest.synonym_stage import BASIS, heaviest_edges, sync_synonyms
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore

CORPUS = SynthCorpus(SynthConfig(passages=400, seed=3)).passages()
FIRST = CORPUS[:360]
FINAL = CORPUS[20:]  # 20 passages removed, 40 added


def _concepts_of(home: Path, passages) -> LanceStore:
    """A store whose concepts (with vectors) are those of ``passages``; no synonyms yet run."""
    return index_stages(LanceStore.open(home), passages)


def _edges(store: LanceStore) -> dict[frozenset, float]:
    rows = store.read(SYNONYMS)
    return {
        frozenset((a, b)): w
        for a, b, w in zip(rows["a"].to_pylist(), rows["b"].to_pylist(), rows["weight"].to_pylist())
    }


def _same_edges(got: dict[frozenset, float], want: dict[frozenset, float]) -> None:
    assert got.keys() == want.keys()
    keys = sorted(want, key=sorted)
    np.testing.assert_allclose([got[k] for k in keys], [want[k] for k in keys], atol=1e-5)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory) -> dict[frozenset, float]:
    """The edges of a full build over the final corpus."""
    store = _concepts_of(tmp_path_factory.mktemp("full"), FINAL)
    assert sync_synonyms(store).mode == "full"
    return _edges(store)


@pytest.mark.parametrize(
    ("delete_list", "rewrite_share"),
    [(1000, 1.0), (2, 1.0), (1000, 0.0)],
    ids=["predicate", "predicates", "rewrite"],
)
def test_incremental_edges_equal_a_full_build(
    tmp_path, rebuilt, monkeypatch, delete_list, rewrite_share
):
    from qortex_core.ingest import synonym_stage

    # the ids of the dropped rows: one delete, deletes of 2 ids each, or a filtered rewrite
    monkeypatch.setattr(synonym_stage, "_DELETE_LIST", delete_list)
    monkeypatch.setattr(synonym_stage, "_REWRITE_SHARE", rewrite_share)
    store = _concepts_of(tmp_path, FIRST)
    first = sync_synonyms(store)
    assert first.mode == "full" and first.reason == "no incremental state"
    index_stages(store, FINAL)

    report = sync_synonyms(store, max_drift=1.0)

    assert report.mode == "incremental", report
    assert report.concepts_matched > 0 and report.concepts_removed > 0
    assert report.added > 0 and report.removed > 0  # the change touched edges both ways
    assert report.edges == store.count(SYNONYMS) == first.edges + report.added - report.removed
    _same_edges(_edges(store), rebuilt)
    assert store.count(BASIS) == store.count("concepts")
    again = sync_synonyms(store)
    assert (again.mode, again.added, again.removed) == ("unchanged", 0, 0)


def test_drift_past_the_bound_rebuilds_in_full(tmp_path, rebuilt):
    store = _concepts_of(tmp_path, FIRST)
    sync_synonyms(store)
    index_stages(store, FINAL)

    report = sync_synonyms(store, max_drift=0.01)

    assert report.mode == "full" and report.reason.startswith("drift: ")
    _same_edges(_edges(store), rebuilt)


def test_a_run_killed_between_writes_is_finished_by_a_full_build(tmp_path, rebuilt):
    store = _concepts_of(tmp_path, FIRST)
    sync_synonyms(store)
    index_stages(store, FINAL)

    proc = mp.get_context("spawn").Process(target=killed_sync, args=(str(tmp_path),))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL

    report = sync_synonyms(LanceStore.open(tmp_path), max_drift=1.0)
    assert report.mode == "full" and "interrupted" in report.reason
    _same_edges(_edges(LanceStore.open(tmp_path)), rebuilt)


def test_heaviest_edges_name_the_top_edges(tmp_path):
    store = _concepts_of(tmp_path, FIRST)
    sync_synonyms(store)
    concepts, edges = store.read(CONCEPTS), store.read(SYNONYMS).to_pylist()
    names = dict(zip(concepts["id"].to_pylist(), concepts["name"].to_pylist()))
    want = sorted(edges, key=lambda r: -r["weight"])[:5]

    top = heaviest_edges(store, 5)

    assert [w for _, _, w in top] == [r["weight"] for r in want]
    named = {frozenset((names[r["a"]], names[r["b"]])): r["weight"] for r in edges}
    assert all(named[frozenset((a, b))] == w for a, b, w in top)  # real edges, by name
    above = {k for k, w in named.items() if w > want[-1]["weight"]}  # ties may go either way
    assert above <= {frozenset(t[:2]) for t in top}


def test_a_compaction_of_the_tables_keeps_the_next_run_incremental(tmp_path, rebuilt):
    store = _concepts_of(tmp_path, FIRST)
    sync_synonyms(store)
    for name in (SYNONYMS, BASIS):  # what retention and purge do: new versions, same rows
        store.open_latest(name).optimize()
    index_stages(store, FINAL)

    fresh = LanceStore.open(tmp_path)  # as the next run opens it
    report = sync_synonyms(fresh, max_drift=1.0)

    assert report.mode == "incremental", report
    _same_edges(_edges(fresh), rebuilt)
