"""Graph exploration on a small real graph: the toy corpus indexed with its recorded triples
(``toy_home``), read through ``Memory.neighbors``, ``path`` and ``entity``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TOY_CORPUS, TOY_TRIPLES

import qortex_core
from qortex_core.errors import QueryError, SnapshotError
from qortex_core.ingest import stages as index
from qortex_core.query.recognition import fact_triples
from qortex_core.storage import ids, snapshot_files
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore


def _partners(name: str) -> dict[str, set[str]]:
    """Concept -> predicates of the toy triples that link it to ``name`` (the expected edges)."""
    out: dict[str, set[str]] = {}
    for triples in TOY_TRIPLES:
        for s, p, o in triples:
            if name in (s, o):
                out.setdefault(o if s == name else s, set()).add(p)
    return out


def _in_blocks(home: Path, embedder, monkeypatch) -> None:
    """Publish the home's snapshot again with its facts table in record batches of 2 rows (as
    a big snapshot's is, by blocks of ``BLOCK_ROWS``): a retriever reads it by row."""
    monkeypatch.setattr(snapshot_files, "BLOCK_ROWS", 2)
    # a full build: an incremental one would link the base's file in (segmented_table.py)
    index.build_snapshot(LanceStore.open(home), home, embedder.name, force=True, merge_base=False)
    assert snap.load_latest_good(home)[0].tables["facts"]["predicate"].num_chunks > 2


@pytest.fixture(params=["one batch", "blocks"])
def mem(request, toy_home: Path, embedder, monkeypatch):
    if request.param == "blocks":
        _in_blocks(toy_home, embedder, monkeypatch)
    return qortex_core.open(toy_home, embedder=embedder)


def test_a_facts_table_in_blocks_gives_the_same_rows_by_index(
    toy_home: Path, embedder, monkeypatch
) -> None:
    whole = snap.load_latest_good(toy_home)[0].tables["facts"]
    _in_blocks(toy_home, embedder, monkeypatch)
    blocks = snap.load_latest_good(toy_home)[0].tables["facts"]
    assert blocks.equals(whole)  # the same rows, only chunked
    rows = np.array([whole.num_rows - 1, 0, 3, 0])
    expected = [tuple(whole.slice(int(r), 1).to_pylist()[0][k] for k in ("subject", "predicate",
                "object")) for r in rows]  # fmt: skip
    assert fact_triples(blocks, rows) == expected


def test_neighbours_are_the_concepts_the_triples_link(mem) -> None:
    found = mem.neighbors("Lune")
    assert (found.resolved.name, found.resolved.how, found.resolved.score) == ("Lune", "exact", 1.0)
    by_name = {n.name: n for n in found.neighbors}
    expected = _partners("Lune")
    assert expected.keys() <= by_name.keys()
    for name, predicates in expected.items():
        assert set(by_name[name].relation.split("; ")) == predicates
        assert by_name[name].depth == 1 and by_name[name].via == "Lune"
    extra = by_name.keys() - expected.keys()
    assert all(by_name[n].relation == "synonym" for n in extra)  # no invented relation
    json.dumps(found.to_dict())  # JSON-ready


def test_depth_two_reaches_through_one_concept_and_limit_cuts_the_far_ones(mem) -> None:
    two = mem.neighbors("Orlan Vesk", depth=2)
    depth = {n.name: (n.depth, n.via) for n in two.neighbors}
    assert depth["Ostrania"] == (1, "Orlan Vesk") and depth["composer"] == (1, "Orlan Vesk")
    assert depth["Velmora"] == (2, "Ostrania") and depth["Tessa Brin"] == (2, "composer")
    assert [n.depth for n in two.neighbors] == sorted(n.depth for n in two.neighbors)
    cut = mem.neighbors("Orlan Vesk", depth=2, limit=2)
    assert cut.truncated and [n.depth for n in cut.neighbors] == [1, 1]


def test_a_name_not_in_the_graph_resolves_to_the_nearest_concept(mem) -> None:
    exact = mem.neighbors("  orlan VESK ")  # normalised: still the exact name
    assert exact.resolved.how == "exact" and exact.resolved.name == "Orlan Vesk"
    near = mem.neighbors("Orlan Vesc")
    assert near.resolved.how == "nearest" and near.resolved.name == "Orlan Vesk"
    assert 0 < near.resolved.score < 1
    assert near.resolved.concept_id == ids.concept_id("Orlan Vesk")


def test_path_follows_facts_and_says_each_edge(mem) -> None:
    bridge = mem.path("Orlan Vesk", "Velmora")
    assert bridge.found and bridge.length == 2
    assert [(s.name, s.edge) for s in bridge.steps] == [
        ("Orlan Vesk", ""), ("Ostrania", "born in"), ("Velmora", "governed from"),
    ]  # fmt: skip
    longer = mem.path("Orlan Vesk", "Lune")
    assert longer.found and longer.length == 3
    assert [s.name for s in longer.steps] == ["Orlan Vesk", "composer", "Tessa Brin", "Lune"]
    assert not mem.path("Orlan Vesk", "Lune", max_len=2).found
    assert not mem.path("Ivo Lark", "Velmora").found  # the painter's passage links nowhere
    json.dumps(longer.to_dict())


def test_entity_lists_its_facts_with_their_source_passages(mem) -> None:
    info = mem.entity("Lune")
    stated = {(f.subject, f.predicate, f.object): {p.title for p in f.passages} for f in info.facts}
    titles = {row["text"]: row["title"] for row in TOY_CORPUS}
    expected = {
        tuple(t): {titles[row["text"]]}
        for row, triples in zip(TOY_CORPUS, TOY_TRIPLES)
        for t in triples
        if "Lune" in (t[0], t[2])
    }
    assert stated == expected
    assert {p.title for p in info.mentioned_in} == {"Dravia", "Tessa Brin", "Miravel Hall"}
    assert info.degree == len(_partners("Lune"))


def test_forgotten_passages_are_not_cited_or_crossed(mem) -> None:
    hall = next(p for p in mem.entity("Lune").mentioned_in if p.title == "Miravel Hall")
    mem.forget(hall.id)
    info = mem.entity("Lune")
    assert hall.id not in {p.id for p in info.mentioned_in}
    assert ("Miravel Hall", "located in", "Lune") not in {
        (f.subject, f.predicate, f.object) for f in info.facts
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.neighbors("Lune", depth=0), "depth"),
        (lambda m: m.neighbors("Lune", limit=5000), "limit"),
        (lambda m: m.neighbors("   "), "non-empty"),
        (lambda m: m.path("Lune", "Dravia", max_len=99), "max_len"),
    ],
)
def test_bad_arguments_are_one_query_error(mem, call, message) -> None:
    with pytest.raises(QueryError, match=message):
        call(mem)


def test_a_home_without_a_snapshot_says_consolidate_first(tmp_path: Path, embedder) -> None:
    mem = qortex_core.open(tmp_path / "empty", embedder=embedder)
    with pytest.raises(SnapshotError, match="consolidate"):
        mem.neighbors("anything")
