"""Metadata filters of a search (``filters=``): the syntax and its errors, LanceDB's predicate
against the same test in Python, the fresh tier (dense and full-text channels), a home written
before the JSON column, the graph tier after a real consolidation, and tenants.

Real LanceDB homes on disk and the hashing embedder (the model is not the point); the graph tier
is built by the real ingest job (Dagster in-process, offline extractor).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import qortex_core
from qortex_core.embed import make_embedder
from qortex_core.errors import QueryError
from qortex_core.memory.records import (
    JSON_COLUMN,
    MEMORIES,
    MemoryTable,
    Revision,
    revision_rows,
    utc_now,
)
from qortex_core.query.filters import parse_filters
from qortex_core.query.retriever import Retriever
from qortex_core.storage.store import LanceStore

SPEC = "hash:64"
QUERY = "the orion pump was serviced by the delta crew near the river"
# near-copies of the query: they outrank the one record whose metadata the filters pick
CROWD = [f"the orion pump was serviced by the delta crew {n} near the river" for n in range(40)]
ODD = "a ledger entry about the valve budget for the spring quarter"


def _open(home: Path, tenant: str | None = None):
    return qortex_core.open(home, tenant=tenant, embedder=make_embedder(SPEC))


def _crowded(mem, odd_meta: dict) -> str:
    """40 records close to :data:`QUERY` (user ann) and one far from it with ``odd_meta``."""
    metas = [
        {"user": "ann", "n": n, "seen": f"2026-01-{n % 28 + 1:02d}T09:00:00Z"} for n in range(40)
    ]
    mem.remember_many(CROWD, metadata=metas)
    return mem.remember(ODD, metadata=odd_meta).id


# -- syntax ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("filters", "fragment"),
    [
        ({"n": {"like": 3}}, "unknown filter operator 'like'"),
        ({"user id": "ann"}, "bad filter key 'user id'"),
        ({"1st": "ann"}, "bad filter key"),
        ({"user": {"a": 1}}, "unknown filter operator 'a'"),
        ({"user": None}, "must be a string, a number or a boolean, got NoneType"),
        ({"user": {1, 2}}, "got set"),
        ({"n": float("nan")}, "NaN or infinite"),
        ({"n": {"gte": "soon"}}, "is not an ISO 8601 date"),
        ({"n": {"gte": [1]}}, "takes a number or an ISO time"),
        ({"user": []}, "non-empty list"),
        ({"user": {}}, "empty dict"),
        ("user=ann", "filters must be a dict"),
        ({"n": 2**60}, "beyond +-2**53"),
    ],
)
def test_a_bad_filter_is_one_query_error(filters, fragment):
    with pytest.raises(QueryError) as caught:
        parse_filters(filters)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_the_predicate_quotes_every_literal():
    where = parse_filters({"user": "o'neil"}).sql(JSON_COLUMN)
    assert "'o''neil'" in where and "'$.user'" in where


# -- LanceDB's predicate and the Python test agree ---------------------------------------------
VALUES = [
    {"user": "ann", "n": 3, "seen": "2026-01-02T00:00:00Z", "ok": True},
    {"user": "bob", "n": 7.5, "seen": "2026-01-02T05:00:00+09:00", "ok": False},
    {},
    {"user": 'o\'neil "q" \\ é', "n": "7", "tags": ["a"]},
    {"user": 5, "n": None, "seen": "yesterday", "deep": {"user": "ann"}},
    {"user": "5", "n": -2, "seen": "2026-02-01"},
]
FILTERS = [
    {"user": "ann"},
    {"user": ["ann", "bob", 5]},
    {"user": {"in": ["5"]}},
    {"user": 'o\'neil "q" \\ é'},
    {"n": {"gte": 3}},
    {"n": {"gt": -5, "lt": 7.5}},
    {"n": 7},
    {"n": 3.0},
    {"ok": True},
    {"ok": {"eq": False}},
    {"seen": {"gte": "2026-01-01T20:00:00Z"}},
    {"seen": {"lt": "2026-01-01T20:00:01Z"}},
    {"seen": {"lte": "2026-01-02"}},
    {"seen": {"gt": "2026-01-02"}},
    {"user": "ann", "n": {"lt": 0}},
]


def test_lancedb_and_python_keep_the_same_records(tmp_path):
    mem = _open(tmp_path / "home")
    ids = [
        r.id for r in mem.remember_many([f"note {i}" for i in range(len(VALUES))], metadata=VALUES)
    ]
    table = MemoryTable(LanceStore.open(mem.home))
    for spec in FILTERS:
        flt = parse_filters(spec)
        pushed = table.matching_ids(flt.sql(JSON_COLUMN))
        python = {i for i, meta in zip(ids, VALUES) if flt.matches(meta)}
        assert pushed == python, spec
    assert table.matching_ids(parse_filters({"user": "ann"}).sql(JSON_COLUMN)) == {ids[0]}


# -- fresh tier ------------------------------------------------------------------------------
def test_fresh_filter_applies_before_top_k(tmp_path):
    mem = _open(tmp_path / "home")
    odd = _crowded(mem, {"user": "bob", "n": 99})
    plain = mem.search(QUERY, top_k=3, min_relevance=0)
    assert odd not in [p.id for p in plain.passages]  # ranked far beyond the top 3
    for filters in ({"user": "bob"}, {"user": ["bob", "cyd"]}, {"n": {"gte": 50}}):
        kept = mem.search(QUERY, top_k=3, min_relevance=0, filters=filters)
        assert [(p.id, p.tier) for p in kept.passages] == [(odd, "fresh")], filters
    some = mem.search(QUERY, top_k=40, min_relevance=0, filters={"n": {"gte": 10, "lt": 13}})
    assert sorted(p.text for p in some.passages) == sorted(CROWD[10:13])
    dated = mem.search(QUERY, top_k=40, min_relevance=0, filters={"seen": {"lte": "2026-01-02"}})
    assert sorted(p.text for p in dated.passages) == sorted(
        [CROWD[0], CROWD[1], CROWD[28], CROWD[29]]
    )
    assert mem.search(QUERY, top_k=3, filters={"user": "nobody"}).passages == []


def test_the_full_text_channel_searches_only_the_rows_that_pass(tmp_path):
    """60 rows match the words, the channel reads 50 candidates: the filtered row is among them
    only because the predicate went into LanceDB's full-text search."""
    mem = _open(tmp_path / "home")
    words = "zorblat gearbox"
    mem.remember_many([f"{words} {words} log {n}" for n in range(60)], metadata={"user": "ann"})
    odd = mem.remember(f"{words} in the spare shed", metadata={"user": "bob"})
    table = MemoryTable(LanceStore.open(mem.home))
    table.optimize()  # the rows in the full-text index
    where = parse_filters({"user": "bob"}).sql(JSON_COLUMN)
    unfiltered = table.text_search(words, 50)
    filtered = table.text_search(words, 50, where)
    owner = mem.state.key_owner
    assert odd.id not in {owner(k) for k in unfiltered}
    assert {owner(k) for k in filtered} == {odd.id}


def test_a_table_from_before_the_json_column_is_filtered_then_upgraded(tmp_path):
    home = tmp_path / "home"
    store = LanceStore.open(home)
    embedder = make_embedder(SPEC)
    now = utc_now()
    old = [
        Revision(f"m_old{i}", 1, "remember", t, None, now, None, "default", "old")
        for i, t in enumerate(CROWD[:5] + [ODD])
    ]
    rows = revision_rows(
        old,
        [{"user": "ann"}] * 5 + [{"user": "bob"}],
        embedder.embed([r.text for r in old]),
        embedder.name,
    )
    store.append(MEMORIES, rows)  # as qortex wrote it before: no JSON column
    assert JSON_COLUMN not in store.open_latest(MEMORIES).schema.names
    mem = _open(home)
    assert MemoryTable(store).matching_ids("true") is None
    kept = mem.search(QUERY, top_k=2, min_relevance=0, filters={"user": "bob"})
    assert [p.id for p in kept.passages] == ["m_old5"]  # the same test, in Python
    new = mem.remember("another spare ledger entry", metadata={"user": "bob"})  # upgrades
    assert JSON_COLUMN in store.open_latest(MEMORIES).schema.names
    where = parse_filters({"user": "bob"}).sql(JSON_COLUMN)
    assert MemoryTable(store).matching_ids(where) == {"m_old5", new.id}
    assert mem.history("m_old5")[0].text == ODD  # the rewrite kept every row


# -- graph tier ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def consolidated(tmp_path_factory):
    """A home with a file corpus and the crowded memories, consolidated by the ingest job."""
    from qortex_cli.runs.local import run_ingest

    root = tmp_path_factory.mktemp("filters")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(root / "dagster"))  # unset again after the module
        patch.setenv("QORTEX_EMBEDDER", SPEC)
        patch.setenv("QORTEX_EXTRACTOR", "offline")
        src = root / "src" / "notes"
        src.mkdir(parents=True)
        corpus = [{"title": f"Pump {n}", "text": f"{CROWD[n]} in the file"} for n in range(20)]
        (src / "pumps.json").write_text(json.dumps(corpus))
        home = root / "home"
        mem = _open(home)
        odd = _crowded(mem, {"user": "bob", "n": 99})
        run_ingest(src.parent, home, progress=False)
        yield home, odd


def test_graph_filter_applies_before_top_k_in_every_mode(consolidated):
    home, odd = consolidated
    retriever = Retriever.open(home, embedder=make_embedder(SPEC))
    rows = retriever.fresh.record_rows()

    def passages_of(records) -> set[str]:
        return {retriever.view.passages.take([i])[0]["id"] for r in records for i in rows[r]}

    assert odd in rows  # the record is a passage of the snapshot now
    odd_passages = passages_of([odd])
    anns = [r.id for r in _open(home).list() if r.metadata.get("user") == "ann"]
    assert len(anns) > 3  # (consolidation merged some near-copies)
    for mode in ("dense", "hipporag", "hybrid"):
        plain = retriever.query(QUERY, top_k=3, mode=mode, min_relevance=0)
        assert not odd_passages & {p.id for p in plain.passages}
        kept = retriever.query(QUERY, top_k=3, mode=mode, min_relevance=0, filters={"user": "bob"})
        assert {p.id for p in kept.passages} == odd_passages and all(
            p.tier == "graph" for p in kept.passages
        ), mode
        many = retriever.query(QUERY, top_k=50, mode=mode, min_relevance=0, filters={"user": "ann"})
        assert {p.id for p in many.passages} == passages_of(anns), mode  # no file passage


def test_graph_and_fresh_tiers_answer_one_filtered_search(consolidated):
    home, odd = consolidated
    mem = _open(home)
    late = mem.remember("bob's late note about the orion pump", metadata={"user": "bob"})
    found = mem.search(QUERY, top_k=5, min_relevance=0, filters={"user": "bob"})
    tiers = {p.tier for p in found.passages}
    assert tiers == {"graph", "fresh"} and late.id in {p.id for p in found.passages}
    mem.forget(late.id)


def test_filters_never_cross_tenants(tmp_path):
    alice, bob = _open(tmp_path, "alice"), _open(tmp_path, "bob")
    mine = alice.remember(ODD, metadata={"user": "shared"})
    bob.remember(ODD, metadata={"user": "shared"})
    bob.remember_many(CROWD[:5], metadata={"user": "shared"})
    found = alice.search(QUERY, top_k=10, min_relevance=0, filters={"user": "shared"})
    assert [p.id for p in found.passages] == [mine.id]
    assert np.all([p.tier == "fresh" for p in found.passages])
