"""Hub-first node order (snapshot locality) and the residual-corrected CG certificate."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from test_ppr_fast import exact_ppr, random_symmetric

from qortex_bench.bench_graphs import synthetic_graph, synthetic_teleports
from qortex_core.ingest.graph import hub_first_order, hub_first_tables, permute_symmetric
from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank, symmetric_walk


@pytest.mark.parametrize("damping", [0.3, 0.5, 0.85])
@pytest.mark.parametrize("seed", [0, 1])
def test_corrected_certificate_holds_at_any_damping(damping, seed):
    a = random_symmetric(60, 0.08, seed, isolated=4)
    rng = np.random.default_rng(seed)
    t = (rng.random((60, 3)) * (rng.random((60, 3)) < 0.2)).astype(np.float32)
    t[1, 0] = 0.5  # mass on an isolated node
    walk = symmetric_walk(sp.csr_matrix(a))
    want = exact_ppr(a, t, damping)
    for tol in (1e-2, 1e-3, 1e-4):
        got = personalized_pagerank(walk, t, PPRConfig(damping=damping, tol=tol, max_iter=500))
        assert np.abs(got - want).sum(axis=0).max() <= tol


def test_hub_first_order_sorts_within_blocks_and_is_stable():
    weights = np.array([1, 5, 5, 0, 2, 9, 2, 1], np.float64)
    order = hub_first_order(weights, 4)
    assert order.tolist() == [1, 2, 0, 3, 5, 4, 6, 7]
    assert sorted(order.tolist()) == list(range(8))


def test_permuted_graph_gives_permuted_pagerank():
    graph = synthetic_graph(700, 4000, seed=2)
    t = synthetic_teleports(graph, 2, seed=2)
    order = hub_first_order(np.diff(graph.adjacency.indptr), graph.n_phrases)
    moved = permute_symmetric(graph.adjacency, order)
    degree = np.diff(moved.indptr)
    assert (np.diff(degree[: graph.n_phrases]) <= 0).all()
    assert (np.diff(degree[graph.n_phrases :]) <= 0).all()
    config = PPRConfig(tol=1e-6)
    before = personalized_pagerank(symmetric_walk(graph.adjacency), t, config)
    after = personalized_pagerank(symmetric_walk(moved), np.ascontiguousarray(t[order]), config)
    assert np.abs(after - before[order]).sum(axis=0).max() < 2e-6


def test_hub_first_tables_put_busy_concepts_and_passages_first():
    concepts = pa.table(
        {
            "id": ["c_rare", "c_hub", "c_mid"],
            "passage_ids": [["p3"], ["p1", "p2", "p3"], ["p2", "p3"]],
        }
    )
    passages = pa.table({"id": ["p1", "p2", "p3", "p4"], "text": ["a", "b", "c", "d"]})
    facts = pa.table(
        {
            "subject_id": ["c_rare", "c_rare", "c_unknown"],
            "object_id": ["c_mid", "c_mid", "c_mid"],
            "passage_ids": [["p1"], ["p1", "p2", "p3", "p4"], ["p1"]],
        }
    )
    c, p = hub_first_tables(concepts, passages, facts)
    # weights: c_rare 1 + 1 + 4 = 6, c_hub 3, c_mid 2 + 1 + 4 + 1 = 8
    assert c["id"].to_pylist() == ["c_mid", "c_rare", "c_hub"]
    assert p["id"].to_pylist() == ["p3", "p2", "p1", "p4"]  # in 3, 2, 1 and 0 concepts
    assert sorted(p["text"].to_pylist()) == ["a", "b", "c", "d"]  # rows move whole


def test_snapshot_order_does_not_change_answers(tmp_path, embedder, monkeypatch):
    from memory_corpus import corpus, ingest

    from qortex_core.ingest import snapshot_read
    from qortex_core.query.retriever import Retriever

    hub = tmp_path / "hub"
    ingest(hub, corpus(), embedder)
    monkeypatch.setattr(
        snapshot_read,
        "hub_first_order",
        lambda weights, n_first: np.arange(len(weights)),
    )
    plain = tmp_path / "plain"
    ingest(plain, corpus(), embedder)
    a, b = Retriever.open(hub, embedder=embedder), Retriever.open(plain, embedder=embedder)
    assert (
        a.snapshot.tables["nodes"]["id"].to_pylist() != b.snapshot.tables["nodes"]["id"].to_pylist()
    )
    for text in ("Who services the Orion Pump?", "Where is Amber Bread baked?"):
        for mode in ("hipporag", "dense", "hybrid"):
            x, y = a.query(text, top_k=6, mode=mode), b.query(text, top_k=6, mode=mode)
            assert [h.id for h in x.passages] == [h.id for h in y.passages]
            assert [h.score for h in x.passages] == pytest.approx(
                [h.score for h in y.passages], abs=1e-4
            )


@pytest.mark.parametrize("order", ["hub_first", "as_generated"])
def test_bench_ppr_reports_memory_traffic(tmp_path, order):
    import json

    from qortex_cli.main import main

    out = tmp_path / "ppr.json"
    argv = ["bench", "ppr", "--nodes", "400", "--edges", "2500", "--queries", "3"]
    argv += ["--engines", "qortex,scipy_power", "--order", order, "--json", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    traffic = report["memory_traffic"]
    assert report["order"] == order and report["engines"]["qortex"]["l1_error"] <= 1e-3
    assert traffic["bytes_per_product"] > 2500 * 2 * 8  # both halves of every edge, 8 B each
    assert 1 <= traffic["products_per_solve_mean"] <= traffic["products_per_solve_max"]
    assert traffic["bytes_per_solve"] == pytest.approx(
        traffic["products_per_solve_mean"] * traffic["bytes_per_product"], rel=0.01
    )
    assert traffic["plain_spmv_gb_s"] > 0
