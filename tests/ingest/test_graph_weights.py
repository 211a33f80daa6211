"""Edge weights by relation type: the library function and the snapshot build (run config: test_pipeline_assets)."""

from __future__ import annotations

import numpy as np

from qortex_core.ingest.graph import (
    GraphConfig,
    GraphInput,
    build_adjacency,
    distinct_keys,
    phrase_passage_counts,
)
from qortex_core.ingest.stages import build_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))


def test_relation_multipliers_scale_fact_edges_only():
    pairs = np.array(
        [[0, 0], [0, 1], [1, 2], [1, 2]]
    )  # a self-loop (dropped), then three occurrences
    relations = ["is_a", "related", "is_a", "part_of"]
    config = GraphConfig(relation_weights=(("is_a", 0.5), ("part_of", 2.0)))
    graph = GraphInput(
        3, 1, pairs, np.array([[0, 2]]), EMPTY, config.relation_multipliers(relations)
    )
    adj = build_adjacency(graph, config).toarray()
    assert adj[0, 1] == adj[1, 0] == 1.0  # related: x 1
    assert adj[1, 2] == adj[2, 1] == 0.5 + 2.0  # one is_a (x 0.5) + one part_of (x 2) occurrence
    assert adj[3, 2] == 1.0 and adj[0, 0] == 0  # containment untouched, self-loop dropped
    plain = build_adjacency(GraphInput(3, 1, pairs, np.array([[0, 2]]), EMPTY)).toarray()
    assert plain[1, 2] == 2.0 and plain[0, 1] == 1.0


def test_snapshot_weights_related_facts(toy_home, tmp_path):
    store = LanceStore.open(toy_home)
    base = snap.load(toy_home)
    published = build_snapshot(
        store, tmp_path / "out", "m", GraphConfig(relation_weights=(("related", 3.0),))
    )
    heavy = snap.load(tmp_path / "out", published.name)
    n = base.n_phrases
    a, b = base.adjacency.tocoo(), heavy.adjacency
    phrase_pairs = [(i, j, w) for i, j, w in zip(a.row, a.col, a.data) if i < n and j < n]
    assert phrase_pairs
    syn = {tuple(p) for p in base.arrays["synonym_pairs"].tolist()}
    for i, j, w in phrase_pairs:  # the toy's recorded OpenIE types every fact "related"
        if (i, j) not in syn and (j, i) not in syn:
            assert np.isclose(b[i, j], 3.0 * w)
    assert np.isclose(b[n:, :n].sum(), base.adjacency[n:, :n].sum())  # passage edges unchanged
    assert heavy.manifest["params"]["graph"]["relation_weights"] == [["related", 3.0]]


def test_bad_relation_weights_are_refused():
    import pytest

    from qortex_core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown relation type 'isa'"):
        GraphConfig(relation_weights=(("isa", 0.5),))
    with pytest.raises(ConfigError, match="must be >= 0"):
        GraphConfig(relation_weights=(("part_of", -2.0),))
    with pytest.raises(ConfigError, match="must be >= 0"):
        GraphConfig(fact_weight=-1.0)
    assert GraphConfig(relation_weights=(("is_a", 0.0),)).relation_multipliers(
        ["is_a", "related"]
    ).tolist() == [0, 1]


def test_distinct_keys_equal_np_unique_on_runs_and_on_random_keys():
    rng = np.random.default_rng(3)
    rows = np.repeat(np.arange(500, dtype=np.int64), rng.integers(0, 4, 500))
    runs = rows * 1000 + rng.integers(0, 7, rows.size)  # sorted rows, repeats inside a row
    scattered = rng.integers(-50, 50, 2000)
    for keys in (runs, scattered, np.zeros(0, np.int64), np.array([5])):
        got = distinct_keys(keys)
        assert np.array_equal(got, np.unique(keys))


def test_phrase_passage_counts_count_each_passage_once():
    contains = np.array([[0, 1], [2, 1], [0, 1], [1, 0], [2, 1], [0, 3]])  # (passage, phrase)
    assert phrase_passage_counts(contains, 5).tolist() == [1.0, 2.0, 0.0, 1.0, 0.0]
    assert phrase_passage_counts(np.zeros((0, 2), np.int64), 3).tolist() == [0.0, 0.0, 0.0]
