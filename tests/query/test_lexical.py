"""The lexical channel over a real snapshot: the ``lexical`` mode, BM25 in hybrid and seeding."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from qortex_core.query import modes
from qortex_core.query.config import FullTextConfig, RetrievalConfig
from qortex_core.query.modes.lexical import NO_INDEX
from qortex_core.query.retriever import Retriever
from qortex_core.storage import fulltext
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

PAINTER = "Which painter is known for harbour landscapes?"


def _with(**fulltext_config) -> RetrievalConfig:
    return dataclasses.replace(RetrievalConfig(), fulltext=FullTextConfig(**fulltext_config))


def test_lexical_mode_ranks_matches_first_then_by_dense(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    result = retriever.query(PAINTER, top_k=8, mode="lexical")
    assert result.mode == "lexical" and result.fallback is None
    assert result.passages[0].title == "Ivo Lark"
    lexical = [h.breakdown["lexical"] for h in result.passages]
    matched = [x for x in lexical if x > 0]
    assert matched == sorted(matched, reverse=True) and lexical[: len(matched)] == matched
    rest = [h.breakdown["dense"] for h in result.passages[len(matched) :]]
    assert rest == sorted(rest, reverse=True) and len(result.passages) == 8


def test_a_snapshot_without_the_index_answers_densely(toy_home, embedder):
    loaded = snap.load(toy_home)
    manifest = dict(loaded.manifest, table_versions={})  # as published before the channel
    old = dataclasses.replace(loaded, manifest=manifest)
    retriever = Retriever(old, embedder, store=LanceStore.open(toy_home), home=toy_home)
    result = retriever.query(PAINTER, top_k=3, mode="lexical")
    assert result.mode == "dense" and result.fallback == NO_INDEX
    off = Retriever.open(toy_home, embedder=embedder, config=_with(enabled=False))
    assert off.query(PAINTER, top_k=3, mode="lexical").fallback == NO_INDEX


def test_queries_search_their_own_snapshots_passages(toy_home, embedder):
    pinned = Retriever.open(toy_home, embedder=embedder)
    store = LanceStore.open(toy_home)
    passages = store.read("passages")
    keep = pa.compute.not_equal(passages["title"], "Ivo Lark")
    fulltext.sync(store.db, passages.filter(keep))  # a later ingest dropped the painter
    assert pinned.query(PAINTER, top_k=1, mode="lexical").passages[0].title == "Ivo Lark"
    assert pinned.lexical.exact


def test_bm25_share_in_hybrid(toy_home, embedder):
    text = "Where was Orlan Vesk born?"
    plain = Retriever.open(toy_home, embedder=embedder).query(text, top_k=8, mode="hybrid")
    assert "lexical" not in plain.passages[0].breakdown
    mixed = Retriever.open(toy_home, embedder=embedder, config=_with(hybrid_weight=0.5))
    fused = mixed.query(text, top_k=8, mode="hybrid")
    assert fused.mode == "hybrid" and "lexical" in fused.passages[0].breakdown
    assert [h.score for h in fused.passages] != [h.score for h in plain.passages]


def test_bm25_seeds_teleport_mass_on_named_passages(toy_home, embedder):
    text = "Where was Orlan Vesk born?"
    weights = {}
    for w in (0.0, 0.3):
        retriever = Retriever.open(toy_home, embedder=embedder, config=_with(seed_weight=w))
        ctx = retriever.context(text, embedder.embed([text])[0])
        row = next(i for i, p in enumerate(retriever.passages) if p["title"] == "Orlan Vesk")
        weights[w] = float(ctx.seeding().teleport[retriever.n_phrases + row])
        assert ctx.lexical()[row] > 0
    assert weights[0.3] > weights[0.0] + 0.29  # min-max BM25 of the best match is 1


def test_lexical_is_registered_and_not_evaluated_by_default():
    assert "lexical" in modes.names() and "lexical" not in modes.eval_defaults()


def test_bm25_term_in_the_graph_modes_final_score(toy_home, embedder):
    text = "Where was Orlan Vesk born?"
    plain = Retriever.open(toy_home, embedder=embedder).query(text, top_k=8, mode="hipporag")
    assert "lexical" not in plain.passages[0].breakdown
    mixed = Retriever.open(toy_home, embedder=embedder, config=_with(final_weight=0.5))
    fused = mixed.query(text, top_k=8, mode="hipporag")
    assert "lexical" in fused.passages[0].breakdown
    assert [h.score for h in fused.passages] != [h.score for h in plain.passages]


def test_text_mode_fuses_dense_and_bm25(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    result = retriever.query(PAINTER, top_k=8, mode="text")
    assert result.mode == "text" and result.passages[0].title == "Ivo Lark"
    for hit in result.passages:
        dense = [h.breakdown["dense"] for h in result.passages]
        lexical = [h.breakdown["lexical"] for h in result.passages]
        lo, hi = min(dense), max(dense)  # top_k covers every toy passage: min-max over all
        expected = 0.5 * (hit.breakdown["dense"] - lo) / (hi - lo) + 0.5 * hit.breakdown[
            "lexical"
        ] / max(lexical)
        assert abs(hit.score - expected) < 1e-5


def test_graph_modes_lift_the_best_text_passage(toy_home, embedder):
    text = "Where was Orlan Vesk born?"
    on = Retriever.open(toy_home, embedder=embedder)
    top = on.query(text, top_k=1, mode="text").passages[0].id
    best_dense = on.query(text, top_k=1, mode="dense").passages[0].id
    walked = [h.id for h in on.query(text, top_k=5, mode="hipporag").passages]
    assert walked[0] == top and best_dense in walked[:2]  # the best dense passage stays in 2
    off = Retriever.open(toy_home, embedder=embedder, config=_with(text_first=False))
    dense_top = off.query(text, top_k=1, mode="dense").passages[0].id
    assert off.query(text, top_k=5, mode="hipporag").passages[0].id == dense_top


def test_auto_routes_weak_links_to_text(toy_home, embedder):
    text = "zxqv blorf painter"  # links no fact above the threshold; BM25 matches "painter"
    # min_relevance 0: routing, not abstention, is under test (the query is mostly gibberish)
    result = Retriever.open(toy_home, embedder=embedder).query(text, top_k=3, min_relevance=0)
    assert result.mode == "text" and result.route.endswith("dense + BM25 fused")
    assert result.passages[0].title == "Ivo Lark"
    plain = Retriever.open(toy_home, embedder=embedder, config=_with(route_text=False))
    old = plain.query(text, top_k=3, min_relevance=0)
    assert old.mode in ("dense", "hybrid") and "BM25" not in old.route
