"""Query-path steps that link facts in context and weigh verbatim seeds by text frequency."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import BRIDGE_QUESTION
from threadpoolctl import threadpool_limits

from qortex_core.errors import SnapshotError
from qortex_core.ingest.graph import fact_passage_csr
from qortex_core.ingest.text_frequency import phrase_text_frequency
from qortex_core.query.retriever import RetrievalConfig, Retriever
from qortex_core.query.scoring import (
    FactSources,
    dense_first,
    link_scores,
    passage_context,
    top_indices,
)
from qortex_core.storage import ids
from qortex_core.storage import snapshot as snap


def test_passage_context_by_hand():
    dense = np.array([0.1, 0.9, 0.4], np.float32)
    indptr = np.array(
        [0, 2, 2, 3, 5]
    )  # fact 0 -> {0, 2}, fact 1 -> none, fact 2 -> {1}, fact 3 -> {0, 1}
    indices = np.array([0, 2, 1, 0, 1], np.int32)
    assert (
        passage_context(dense, indptr, indices).tolist()
        == np.array([0.4, 0.0, 0.9, 0.9], np.float32).tolist()
    )


def test_passage_context_without_sources():
    dense = np.array([0.3, 0.2], np.float32)
    assert passage_context(dense, np.zeros(4, np.int64), np.zeros(0, np.int32)).tolist() == [
        0,
        0,
        0,
    ]
    assert passage_context(dense, np.zeros(1, np.int64), np.zeros(0, np.int32)).shape == (0,)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fact_sources_context_is_the_max_over_each_facts_passages(seed):
    rng = np.random.default_rng(seed)
    counts = rng.choice([0, 1, 1, 1, 2, 3], size=200)  # some facts without, some with several
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = rng.integers(0, 50, size=int(indptr[-1])).astype(np.int32)
    dense = (rng.random(50) * 2 - 1).astype(np.float32)  # cosines, negative ones too
    want = [
        max(dense[indices[s:e]], default=0.0) for s, e in zip(indptr[:-1], indptr[1:])
    ]  # by hand, fact by fact
    got = FactSources.of(indptr, indices).context(dense)
    assert got.dtype == np.float32 and got.tolist() == np.array(want, np.float32).tolist()
    # any subset of facts (a fact index's candidates: cell ranges, then scattered facts)
    for subset in (np.arange(40, 90), rng.choice(200, 60, replace=False), np.zeros(0, np.int64)):
        part = FactSources.of(indptr, indices).context_at(dense, subset)
        assert part.tolist() == got[subset].tolist()


def test_fact_sources_share_one_source_per_fact_indices():
    indices = np.array([2, 0, 1, 2], np.int32)  # a memory-mapped snapshot's column, one per fact
    sources = FactSources.of(np.arange(5, dtype=np.int64), indices)
    assert np.shares_memory(sources.first, indices)
    dense = np.array([0.1, -0.2, 0.7], np.float32)
    assert sources.context(dense).tolist() == dense[indices].tolist()
    empty = FactSources.of(np.zeros(3, np.int64), np.zeros(0, np.int32))  # two facts, no sources
    assert empty.context(dense).tolist() == [0.0, 0.0]


def test_link_scores_prefer_the_fact_whose_passage_matches():
    cos = np.array([0.50, 0.50, 0.45], np.float32)
    context = np.array([0.1, 0.6, 0.9], np.float32)
    assert top_indices(link_scores(cos, context, 0.5), 3).tolist() == [2, 1, 0]
    assert link_scores(cos, context, 0.0) is cos  # off: the plain cosine
    assert link_scores(cos, np.zeros(0, np.float32), 0.5) is cos  # a snapshot without fact sources


def test_phrase_text_frequency_by_hand():
    texts = ["War and Peace", "the war began", "Peace talks failed", "talks, talks"]
    got = phrase_text_frequency(texts, ["war", "Peace talks", "unknown word", "", "WAR!"])
    assert got.tolist() == [
        2,
        2,
        0,
        0,
        2,
    ]  # "peace talks": min(df(peace), df(talks)) = 2, an upper bound
    assert phrase_text_frequency([], ["war"]).tolist() == [0]


def test_fact_passage_csr_drops_unknown_and_repeats():
    indptr, indices = fact_passage_csr([["p1", "p0", "p1"], ["px"], [], ["p0"]], {"p0": 0, "p1": 1})
    assert indptr.tolist() == [0, 2, 2, 2, 3] and indices.tolist() == [0, 1, 0]


def test_snapshot_fact_sources_hold_both_ends(toy_home):
    """Every fact's source passages name its subject and its object (recorded OpenIE of the toy corpus)."""
    s = snap.load(toy_home)
    indptr, indices = s.arrays["fact_passage_indptr"], s.arrays["fact_passage_indices"]
    facts = s.tables["facts"].to_pylist()
    passages = s.tables["passages"].to_pylist()
    assert len(indptr) == len(facts) + 1 and indptr[-1] == len(indices) > 0
    for f, fact in enumerate(facts):
        sources = indices[indptr[f] : indptr[f + 1]]
        assert sources.size >= 1
        for p in sources:
            text = ids.normalize_phrase(passages[p]["title"] + " " + passages[p]["text"])
            assert (
                ids.normalize_phrase(fact["subject"]) in text
                and ids.normalize_phrase(fact["object"]) in text
            )
    freq = s.arrays["phrase_text_frequency"]
    names = s.tables["nodes"]["name"].to_pylist()[: s.n_phrases]
    assert freq[names.index("composer")] == 2  # "composer" is in the text of two toy passages


def test_snapshot_without_fact_sources_is_refused_by_name(toy_home, embedder):
    """An older snapshot (no fact sources, no text frequency) is refused, not served with
    stand-ins: the typed schema (storage/snapshot_schema.py) names what it lacks."""
    s = snap.load(toy_home)
    old = dataclasses.replace(
        s,
        arrays={
            k: v
            for k, v in s.arrays.items()
            if k != "phrase_text_frequency" and not k.startswith("fact_passage")
        },
    )
    with pytest.raises(SnapshotError) as caught:
        Retriever(old, embedder)
    assert str(caught.value) == (
        f"snapshot {s.manifest['name']} is incomplete: no array phrase_text_frequency, "
        "fact_passage_indptr, fact_passage_indices"
    )


def test_dense_first_lifts_the_best_dense_passage_only():
    final = np.array([0.9, 0.2, 0.5, 0.1], np.float32)
    dense = np.array([0.1, 0.3, 0.8, 0.7], np.float32)
    lifted = dense_first(final, dense)
    assert top_indices(lifted, 4).tolist() == [
        2,
        0,
        1,
        3,
    ]  # passage 2 first, the rest in the walk's order
    assert lifted[2] > 0.9 and np.array_equal(np.delete(lifted, 2), np.delete(final, 2))
    allowed = np.array([True, True, False, True])  # e.g. a domain filter or a passage judged down
    assert top_indices(dense_first(final, dense, allowed), 4).tolist() == [3, 0, 2, 1]
    assert np.array_equal(dense_first(final, dense, np.zeros(4, bool)), final)
    vetoed = np.array([False, False, True, False])  # feedback judged the best dense passage down
    assert np.array_equal(
        dense_first(final, dense, None, vetoed), final
    )  # nothing lifted in its place
    assert dense_first(np.zeros(0, np.float32), np.zeros(0, np.float32)).shape == (0,)


def test_graph_modes_keep_dense_top_hit(toy_home, embedder):
    """The walk alone ranks Tessa Brin first (born in Lune); the default keeps dense's best (Dravia) first."""
    question = "Who was born in the capital of Dravia?"
    vector = embedder.embed([question])[0]
    s = snap.load(toy_home)
    dense_top = Retriever(s, embedder).search(question, vector, 1, "dense").passages[0].id
    walk = Retriever(s, embedder, RetrievalConfig(dense_first=False)).search(
        question, vector, 3, "hipporag"
    )
    assert walk.passages[0].id != dense_top and dense_top in [h.id for h in walk.passages]
    for mode in ("hipporag", "hybrid", "auto"):
        hits = [h.id for h in Retriever(s, embedder).search(question, vector, 3, mode).passages]
        assert hits[0] == dense_top and walk.passages[0].id in hits


def _with_arrays(s: snap.Snapshot, **arrays) -> snap.Snapshot:
    return dataclasses.replace(s, arrays={**s.arrays, **arrays})


def test_retriever_links_facts_through_their_passages(toy_home, embedder):
    """A fact whose source passage is the query's best dense passage climbs into the linked facts."""
    s = snap.load(toy_home)
    vector = embedder.embed([BRIDGE_QUESTION])[0]
    plain = Retriever(s, embedder, RetrievalConfig(fact_context=0.0))
    cos, dense = plain.fact_vectors @ vector, plain.passage_vectors @ vector
    fifth = int(np.argsort(-cos)[4])
    assert (
        cos[fifth] >= plain.config.fact_threshold
        and fifth not in plain.seed(BRIDGE_QUESTION, vector, dense).linked
    )
    sources = np.full(
        len(cos), int(np.argmin(dense)), np.int32
    )  # every fact "from" the worst passage ...
    sources[fifth] = int(np.argmax(dense))  # ... but this one, from the best
    moved = _with_arrays(
        s, fact_passage_indptr=np.arange(len(cos) + 1, dtype=np.int64), fact_passage_indices=sources
    )
    linked = (
        Retriever(moved, embedder, RetrievalConfig(fact_context=2.0))
        .seed(BRIDGE_QUESTION, vector, dense)
        .linked
    )
    assert linked[0] == fifth
    unmoved = (
        Retriever(moved, embedder, RetrievalConfig(fact_context=0.0))
        .seed(BRIDGE_QUESTION, vector, dense)
        .linked
    )
    assert unmoved.tolist() == plain.seed(BRIDGE_QUESTION, vector, dense).linked.tolist()


def test_verbatim_seeds_use_passage_text_frequency(toy_home, embedder):
    """The verbatim seed of a concept named in the query weighs 0.5 / its passage-text frequency."""
    s = snap.load(toy_home)
    question = "Which composer was born in the city of Lune?"
    vector = embedder.embed([question])[0]
    names = s.tables["nodes"]["name"].to_pylist()[: s.n_phrases]
    lune = names.index("Lune")
    freq = np.array(s.arrays["phrase_text_frequency"], dtype=np.float32, copy=True)
    freq[lune] = 8.0  # as if "Lune" were in the text of 8 passages
    common = _with_arrays(s, phrase_text_frequency=freq)
    dense = s.arrays["passage_vectors"] @ vector
    w = {
        lex: Retriever(common, embedder, RetrievalConfig(lexical_weight=lex))
        .seed(question, vector, dense)
        .phrase_weights
        for lex in (0.0, 0.5)
    }
    assert np.isclose(w[0.5][lune] - w[0.0][lune], 0.5 / 8.0)
    assert Retriever(s, embedder).view.text_count[lune] == max(
        s.arrays["phrase_text_frequency"][lune], s.arrays["phrase_passage_count"][lune]
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_large_cosine_split_over_threads_equals_one_product(threads, monkeypatch):
    from qortex_core.query import scoring as seeding

    rng = np.random.default_rng(threads)
    matrix = rng.standard_normal((140_001, 64)).astype(np.float32)  # >= 2^23 floats: split
    query = rng.standard_normal(64).astype(np.float32)
    monkeypatch.setattr(seeding, "query_threads", lambda: threads)
    seen = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda a, b, **kw: seen.append(len(a)) or real(a, b, **kw))
    with threadpool_limits(1, "blas"):  # as a query runs (Retriever.search)
        got = seeding.cosine(matrix, query)
        assert got.dtype == np.float32 and np.array_equal(got, real(matrix, query))
    assert sum(seen) == (140_001 if threads > 1 else 0) and len(seen) == (
        threads if threads > 1 else 0
    )


@pytest.mark.parametrize("passage_seeds", [0, 3])
@pytest.mark.parametrize("lexical", [0.0, 0.5])
def test_a_seedings_support_holds_every_teleport_non_zero(
    toy_home, embedder, passage_seeds, lexical
):
    s = snap.load(toy_home)
    vector = embedder.embed([BRIDGE_QUESTION])[0]
    fulltext = dataclasses.replace(RetrievalConfig().fulltext, seed_weight=lexical)
    config = RetrievalConfig(passage_seeds=passage_seeds, fulltext=fulltext)
    retriever = Retriever.open(toy_home, embedder=embedder, config=config)  # with its BM25 index
    context = retriever.context(BRIDGE_QUESTION, vector, dense=retriever.passage_vectors @ vector)
    seeding = context.seeding()
    if lexical:  # BM25's passages got restart mass beyond the 3 kept dense ones
        bm25 = context.lexical()
        assert bm25 is not None and np.count_nonzero(bm25) > 0
        if passage_seeds:
            assert np.count_nonzero(seeding.teleport[s.n_phrases :]) > passage_seeds
    support = seeding.support
    assert seeding.teleport is not None and support is not None
    assert np.all(np.diff(support) > 0)  # ascending, no repeats
    assert set(np.flatnonzero(seeding.teleport).tolist()) <= set(support.tolist())
    assert set(seeding.seeded_phrases().tolist()) <= set(support.tolist())


def test_passage_seeds_keep_the_most_similar_passages_at_their_full_min_max():
    from qortex_core.query.scoring import min_max, teleport_vector

    rng = np.random.default_rng(3)
    phrases = rng.random(5).astype(np.float32)
    dense = rng.uniform(-0.2, 0.9, 40).astype(np.float32)
    every = teleport_vector(phrases, dense, 0.05)
    some = teleport_vector(phrases, dense, 0.05, passage_seeds=6)
    assert np.array_equal(every[:5], phrases) and np.array_equal(some[:5], phrases)
    assert np.allclose(every[5:], min_max(dense) * 0.05)
    kept = np.flatnonzero(some[5:])
    assert sorted(kept.tolist()) == sorted(np.argsort(-dense)[:6].tolist())
    assert np.array_equal(some[5:][kept], every[5:][kept])  # the min-max over every passage
    assert np.array_equal(teleport_vector(phrases, dense, 0.05, passage_seeds=40), every)


@pytest.mark.parametrize("passage_seeds", [0, 6])
def test_teleport_from_the_seeded_phrases_only_equals_the_full_copy(passage_seeds):
    from qortex_core.query.scoring import teleport_vector

    rng = np.random.default_rng(4)
    phrases = np.zeros(50, np.float32)
    seeded = np.array([2, 9, 31])
    phrases[seeded] = rng.random(3).astype(np.float32)
    dense = rng.uniform(-0.2, 0.9, 40).astype(np.float32)
    full = teleport_vector(phrases, dense, 0.05, passage_seeds)
    assert np.array_equal(teleport_vector(phrases, dense, 0.05, passage_seeds, seeded), full)
    flat = np.full(40, 0.3, np.float32)  # a constant dense vector: every kept passage gets 1
    assert np.array_equal(
        teleport_vector(phrases, flat, 0.05, passage_seeds, seeded),
        teleport_vector(phrases, flat, 0.05, passage_seeds),
    )
    outside = phrases.copy()
    outside[40] = 1.0  # not in ``seeded``: the caller broke its promise, and it is not copied
    assert teleport_vector(outside, dense, 0.05, passage_seeds, seeded)[40] == 0.0


@pytest.mark.parametrize("size", [1 << 17, 1 << 20])
def test_top_indices_of_mid_sized_vectors_take_the_sampled_path_and_agree(size, monkeypatch):
    rng = np.random.default_rng(size)
    scores = rng.standard_normal(size).astype(np.float32)
    expected = np.argsort(-scores, kind="stable")[:10]
    calls = []
    real = np.flatnonzero
    monkeypatch.setattr(np, "flatnonzero", lambda a: calls.append(a.size) or real(a))
    got = top_indices(scores, 10)
    assert calls == [size]  # the candidates above the sample's floor were taken
    assert np.array_equal(scores[got], scores[expected])


@pytest.mark.parametrize("k", [1, 10, 1000])
def test_top_indices_of_a_long_vector_match_a_full_sort(k):
    rng = np.random.default_rng(k)
    scores = rng.standard_normal(1 << 21).astype(np.float32)
    scores[rng.integers(0, scores.size, 5000)] = -np.inf  # masked entries never rank
    expected = np.argsort(-scores, kind="stable")[:k]
    got = top_indices(scores, k)
    assert np.array_equal(scores[got], scores[expected])  # the same values, best first
    assert len(set(got.tolist())) == k  # (equal float32 scores may swap places)
    clustered = np.zeros(1 << 21, np.float32)  # the best few far from any sampled entry
    clustered[[7, 65, 1_000_001]] = [3.0, 2.0, 1.0]
    assert top_indices(clustered, 3).tolist() == [7, 65, 1_000_001]
    masked = np.full(1 << 21, -np.inf, np.float32)
    masked[[5, 9]] = [1.0, 2.0]
    assert top_indices(masked, k)[:2].tolist() == [9, 5][:k]
