"""After a sequence of incremental runs (files added, a file changed, files deleted, a memory
forgotten), every query mode returns the same top 10 as a full rebuild of the same final corpus.

The runs go through the stage sequence (:func:`run_stages`) on one data home; the synonym and
snapshot stages must take their incremental paths there (the reports say so), and the rebuild
runs every stage from nothing in a second home. A memory reaches the snapshot as the passages of
its document ``memory:<id>``; forgetting it removes that document's passages. The synonym stage
runs with a small ``exact_max``, so its edges come from the cell search (as above 20,000
concepts), whose cells an incremental run updates. Both again with the key columns' BTREE
indexes (:mod:`qortex_core.storage.key_index`) made from the first row and extended or merged
by every run, as a large home's are.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.synonym_stage import sync_synonyms
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.query.retriever import MODES, Retriever
from qortex_core.storage import compaction, key_index
from qortex_core.storage.model import Passage
from qortex_core.storage.store import FACTS, SYNONYMS, LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(64))
SYNTH = SynthCorpus(SynthConfig(passages=160, seed=5))
FILES = SYNTH.passages()
MEMORIES = [
    Passage(
        f"{SYNTH.entity_name(r)} met {SYNTH.entity_name(r + 1)} at the harbour.", "", f"memory:m{r}"
    )
    for r in range(3)
]
QUERIES = SYNTH.queries(25) + ["Who met at the harbour?"]
CELLS = SynonymConfig(exact_max=100, cell_size=24, probes=4)  # the cell path on ~800 concepts


@pytest.fixture(scope="module", autouse=True)
def cell_search():
    """The stage sequence's synonym stage with :data:`CELLS`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index, "sync_synonyms", lambda store: sync_synonyms(store, CELLS))
        yield


def _run(home: Path, passages: list[Passage]) -> dict[str, object]:
    run = index.IngestRun(LanceStore.open(home), home, OfflineExtractor(), EMBED, passages)
    return index.run_stages(run)


def _answers(home: Path) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Each (mode, query)'s top 10 passages and scores."""
    retriever = Retriever.open(home, embedder=EMBED)
    return {
        (mode, q): [(h.id, h.score) for h in retriever.query(q, top_k=10, mode=mode).passages]
        for mode in MODES
        for q in QUERIES
    }


def _runs() -> list[list[Passage]]:
    """The corpus of each run: files and memories; the last one is the final corpus."""
    first = FILES[:140] + MEMORIES
    added = first + FILES[140:150]  # new files
    changed = replace(FILES[3], text=FILES[3].text + " The museum reopened in spring.")
    edited = [changed if p == FILES[3] else p for p in added if p not in FILES[10:14]]
    forgotten = [p for p in edited if p != MEMORIES[1]]
    return [first, added, edited, forgotten]


@pytest.fixture(scope="module", params=["scanned", "indexed", "compacted"])
def keys(request):
    """``indexed``: every keyed table gets its index at once, a few rows written extend it
    and two segments are merged (a large home's cycle, on small tables). ``compacted``: the
    same, and every stage merges its tables' fragments after its writes
    (:mod:`qortex_core.storage.compaction`), as a home does once runs have piled them up."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param != "scanned":
            patch.setattr(key_index, "MIN_ROWS", 1)
            patch.setattr(key_index, "UNINDEXED_MAX", 3)
            patch.setattr(key_index, "MAX_SEGMENTS", 2)
        if request.param == "compacted":
            patch.setattr(compaction, "SMALL_ROWS", 1 << 30)  # every fragment is small
            patch.setattr(compaction, "MAX_SMALL", 2)
        yield request.param


@pytest.fixture(scope="module")
def incremental(tmp_path_factory, keys) -> tuple[Path, list[dict[str, object]]]:
    home = tmp_path_factory.mktemp("incremental")
    return home, [_run(home, corpus) for corpus in _runs()]


def test_keyed_tables_are_indexed_only_when_asked(incremental, keys):
    home, _ = incremental
    facts = LanceStore.open(home).db.open_table(FACTS)
    indexes = facts.list_indices()
    assert [list(i.columns) for i in indexes] == ([] if keys == "scanned" else [["id"]])
    if keys != "scanned":  # extended by the runs that wrote facts, not left to the scan
        assert facts.index_stats(indexes[0].name).num_unindexed_rows <= 3
    fragments = len(facts.to_lance().get_fragments())
    # a fragment for each run that wrote facts, merged after its writes when compacted
    assert (fragments == 1) if keys == "compacted" else (fragments >= 3), fragments


def test_incremental_runs_took_their_incremental_paths(incremental):
    home, reports = incremental
    for at, report in enumerate(reports[1:], 1):
        synonyms, snapshot = report["synonym_edges"], report["graph_snapshot"]
        # the forgotten memory's concepts are named in other passages too: no concept changed
        assert synonyms.mode == ("unchanged" if at == 3 else "incremental"), synonyms
        assert snapshot.mode == "incremental", snapshot
        assert "fact rows from the base" in snapshot.reason, snapshot  # the facts' links held
        embedded = report["embeddings"]  # only the chunks the earlier stages wrote: compared
        assert embedded.mode == "incremental" and "chunks written since" in embedded.reason
        assert snapshot.rows_added + snapshot.rows_changed + snapshot.rows_removed > 0
    layout = json.loads(LanceStore.open(home).stage_digest("synonyms"))["layout"]
    assert layout.startswith("flat"), layout  # the cell search, not the exact one
    edited = reports[2]["graph_snapshot"]
    assert edited.rows_removed > 0 and edited.rows_added > 0  # deleted files, the changed one


def test_every_mode_answers_as_a_full_rebuild(incremental, tmp_path):
    home, reports = incremental
    rebuilt = _run(tmp_path / "rebuilt", _runs()[-1])
    assert rebuilt["graph_snapshot"].counts == reports[-1]["graph_snapshot"].counts

    edges = [LanceStore.open(h).read(SYNONYMS) for h in (home, tmp_path / "rebuilt")]
    pairs = [set(map(frozenset, zip(e["a"].to_pylist(), e["b"].to_pylist()))) for e in edges]
    assert pairs[0] == pairs[1] and len(pairs[1]) > 20  # the synonym edges a rebuild finds

    got, want = _answers(home), _answers(tmp_path / "rebuilt")

    for key in want:
        assert [h for h, _ in got[key]] == [h for h, _ in want[key]], key
        np.testing.assert_allclose(
            [s for _, s in got[key]], [s for _, s in want[key]], atol=1e-5, err_msg=str(key)
        )
    assert any(want[("hipporag", q)] for q in QUERIES)  # the queries find something
