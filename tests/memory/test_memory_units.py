"""Pure pieces of the memory loop: rule ranking, hybrid fusion and routing, scoring profiles."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from qortex_core.errors import ConfigError
from qortex_core.feedback import learned
from qortex_core.query import fusion, profiles
from qortex_core.query.modes import auto
from qortex_core.query.rules import RuleIndex, rank_rules, rule_scores

NODE_IDS = ["c_a", "c_b", "c_c", "c_d"]
NAMES = ["alpha", "beta", "gamma", "delta"]


def rules_table() -> pa.Table:
    return pa.table(
        {
            "id": ["r_1", "r_2", "r_3", "r_4"],
            "text": ["one", "two", "three", "four"],
            "category": ["g"] * 4,
            "confidence": pa.array([0.5, 0.9, 0.7, 1.0], pa.float32()),
            "concept_nodes": pa.array([[0, 1], [1], [2], []], pa.list_(pa.int32())),
            "domains": pa.array([["eng"], ["eng"], ["kitchen"], ["eng"]], pa.list_(pa.string())),
        }
    )


def test_rules_rank_by_best_concept_then_confidence():
    index = RuleIndex.from_table(rules_table())
    scores = np.array([0.1, 0.4, 0.3, 0.0], np.float32)
    hits = rank_rules(index, scores, NODE_IDS, NAMES, top_k=10)
    assert [h.id for h in hits] == [
        "r_2",
        "r_1",
        "r_3",
    ]  # r_2 and r_1 tie at 0.4: higher confidence first
    assert [h.score for h in hits] == pytest.approx([0.4, 0.4, 0.3])
    assert hits[1].concepts == ("beta", "alpha") and hits[1].concept_ids == ("c_b", "c_a")
    assert [
        h.id for h in rank_rules(index, scores, NODE_IDS, NAMES, top_k=10, domains=["kitchen"])
    ] == ["r_3"]
    assert (
        rank_rules(index, np.zeros(4, np.float32), NODE_IDS, NAMES, top_k=10) == []
    )  # nothing activated
    assert rank_rules(RuleIndex.from_table(None), scores, NODE_IDS, NAMES, top_k=3) == []
    faint = np.array([0.0, 1.0, 0.001, 0.0], np.float32)  # r_3 barely reached: dropped
    assert [h.id for h in rank_rules(index, faint, NODE_IDS, NAMES, top_k=10)] == ["r_2", "r_1"]


def test_rule_scores_are_each_rules_max_over_its_concepts():
    rng = np.random.default_rng(0)
    links = [rng.integers(0, 500, rng.integers(0, 6)).tolist() for _ in range(300)]
    table = pa.table(
        {
            "id": [f"r_{i}" for i in range(300)],
            "concept_nodes": pa.array(links, pa.list_(pa.int32())),
            "confidence": pa.array(np.ones(300), pa.float32()),
        }
    )
    index = RuleIndex.from_table(table)
    scores = rng.random(500).astype(np.float32)
    expected = [max(scores[nodes]) if nodes else -np.inf for nodes in links]
    assert rule_scores(index, scores).tolist() == np.array(expected, np.float32).tolist()
    assert any(not nodes for nodes in links) and -np.inf in expected  # empty rules were drawn
    first = next(i for i, nodes in enumerate(links) if len(nodes) > 1)
    scores[links[first][-1]] = np.nan  # a NaN wins, as np.maximum's would, even last
    assert np.isnan(rule_scores(index, scores)[first])
    assert rule_scores(index, scores.astype(np.float64)).dtype == np.float32


def test_fusion_confidence_is_top_k_agreement():
    a = np.arange(20, dtype=np.float32)
    fused, same = fusion.fuse(a, a * 3, fusion.FusionConfig(agreement_k=5))
    assert same == 1.0 and int(np.argmax(fused)) == 19
    _, opposite = fusion.fuse(a, -a, fusion.FusionConfig(agreement_k=5))
    assert opposite == 0.0
    assert auto.route(None)[0] == "dense"
    assert auto.route(0.9)[0] == "hipporag" and auto.route(0.3)[0] == "hybrid"


def test_profiles_from_configuration(tmp_path):
    (tmp_path / "profiles.json").write_text('{"mine": {"relevance": 0.5, "preference": 0.5}}')
    loaded = profiles.load_profiles(tmp_path)
    assert {"default", "balanced", "mine"} <= set(loaded) and loaded["mine"].preference == 0.5
    with pytest.raises(ConfigError, match="unknown scoring profile"):
        profiles.get_profile("nope", tmp_path)
    (tmp_path / "profiles.json").write_text('{"bad": {"relevance": -1}}')
    with pytest.raises(ConfigError):
        profiles.load_profiles(tmp_path)
    (tmp_path / "profiles.json").write_text('{"bad": {"loudness": 1}}')
    with pytest.raises(ConfigError):
        profiles.load_profiles(tmp_path)


def test_rules_beyond_top_k_are_ranked_as_a_full_sort_would():
    rng = np.random.default_rng(5)
    n = 400
    links = [[int(i % 50)] for i in range(n)]
    table = pa.table(
        {
            "id": [f"r_{i}" for i in range(n)],
            "text": ["t"] * n,
            "category": ["g"] * n,
            "confidence": pa.array(rng.random(n), pa.float32()),
            "concept_nodes": pa.array(links, pa.list_(pa.int32())),
        }
    )
    index = RuleIndex.from_table(table)
    scores = np.round(rng.random(50), 1).astype(np.float32)  # many rules tie on a score
    names = [f"c{i}" for i in range(50)]
    got = [h.id for h in rank_rules(index, scores, names, names, top_k=7)]
    per_rule = scores[[nodes[0] for nodes in links]]
    conf = table["confidence"].to_numpy()
    full = [f"r_{i}" for i in np.lexsort((-conf, -per_rule))[:7]]
    assert got == full and len(got) == 7


@pytest.mark.parametrize("d", [64, 384])
def test_cosine_at_gathers_in_blocks_and_gives_the_products_bits(tmp_path, d):
    from threadpoolctl import threadpool_limits

    from qortex_core.query.scoring import cosine, cosine_at

    rng = np.random.default_rng(d)
    v = rng.standard_normal((30_000, d)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    np.save(tmp_path / "v.npy", v)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    q = v[3]
    with threadpool_limits(1, "blas"):  # as a query runs (Retriever.search)
        for n in (0, 100, 4096, 9_001, 30_000):  # one block or less, and several with a tail
            rows = np.sort(rng.choice(30_000, n, replace=False))
            got = cosine_at(mapped, rows, q)
            assert got.shape == (n,) and np.array_equal(got, cosine(v[rows], q))
    wide = q.astype(np.float64)  # a float64 query: the plain product, as before
    assert np.array_equal(cosine_at(v, rows, wide), cosine(v[rows], wide))
    with pytest.raises(ValueError):
        cosine_at(mapped, rows, np.ones(5, np.float32))  # another width: refused, not misread


def test_rule_scores_refuse_a_concept_outside_the_scores():
    index = RuleIndex.from_table(rules_table())
    with pytest.raises(IndexError, match="rules link concept 2 of 2"):
        rule_scores(index, np.ones(2, np.float32))


def test_combine_weights_components():
    rel = np.array([0.2, 0.1, 0.0], np.float32)
    comps = {"preference": np.array([0.0, 1.0, 0.5], np.float32)}
    final, parts = profiles.combine(profiles.BUILTIN["default"], rel, comps)
    assert np.allclose(final, rel) and np.allclose(parts["preference"], comps["preference"])
    final, parts = profiles.combine(
        profiles.ScoringProfile("half", relevance=0.5, preference=0.5), rel, comps
    )
    assert np.allclose(parts["relevance"], [1.0, 0.5, 0.0])
    assert np.allclose(final, 0.5 * parts["relevance"] + 0.5 * comps["preference"])
    assert int(np.argmax(final)) == 1  # preference lifted the second passage over the first


def test_preference_maps_factors_to_unit_interval():
    passage_phrases = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], np.float32))
    pref = learned.preference(passage_phrases, np.array([10.0, 10.0, 0.1]), upper=10.0)
    assert pref.tolist() == pytest.approx([1.0, 0.0, 0.5])


def test_rule_cosine_scores_the_linked_concepts_only():
    from qortex_core.query.rules import rule_cosine

    index = RuleIndex.from_table(rules_table())
    vectors = np.eye(4, dtype=np.float32)
    query = np.array([0.6, 0.0, 0.8, 0.0], np.float32)
    assert index.linked.tolist() == [0, 1, 2]
    assert rule_cosine(index, vectors, 4, query).tolist() == pytest.approx([0.6, 0.0, 0.8, 0.0])
    shifted = np.array([0.0, 0.0, 0.0, 1.0], np.float32)  # only an unlinked concept matches
    assert not rule_cosine(index, vectors, 4, shifted).any()
    assert not rule_cosine(index, np.zeros((0, 4), np.float32), 4, query).any()  # no vectors
    hits = rank_rules(index, rule_cosine(index, vectors, 4, query), NODE_IDS, NAMES, top_k=10)
    assert [h.id for h in hits] == ["r_3", "r_1"]


def test_recency_is_computed_once_a_minute_per_half_life():
    import datetime as dt
    import time

    stamps = np.array([time.time() - 86400.0, np.nan, time.time() - 10 * 86400.0])
    recency = profiles.Recency(stamps, 3)
    first = recency(1.0)
    assert recency(1.0) is first  # cached within the minute
    minute = dt.datetime.fromtimestamp(int(time.time() // 60) * 60, dt.timezone.utc)
    if recency(1.0) is first:  # not across a minute boundary
        assert np.array_equal(first, profiles.recency(stamps, 3, 1.0, now=minute))
    assert first[1] == 0.0 and first[0] > first[2] > 0
    assert recency(10.0)[2] > first[2]  # another half-life: computed anew
    assert not profiles.Recency(None, 3)(1.0).any()
