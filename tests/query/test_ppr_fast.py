"""The fast PPR paths against exact PPR (a dense linear solve in float64) on small graphs."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from qortex_bench.bench_graphs import synthetic_graph, synthetic_teleports
from qortex_core.query.ppr.cg import conjugate_gradient
from qortex_core.query.ppr.solve import (
    PPRConfig,
    SymmetricWalk,
    personalized_pagerank,
    symmetric_walk,
    walk_matrix,
)


def exact_ppr(adjacency: np.ndarray, teleport: np.ndarray, damping: float = 0.5) -> np.ndarray:
    """Dense float64 solve of ``(I - a W) y = t``, normalised; dangling columns of W are zero.

    Equivalent to ``x = a W x + (1 - a 1^T W x) t`` (dangling and restart mass return to t).
    """
    a = np.asarray(adjacency, np.float64)
    out = a.sum(axis=1)
    w = (a / np.where(out > 0, out, 1.0)[:, None]).T  # column j: j's out-edges / out-weight
    t = np.asarray(teleport, np.float64).reshape(a.shape[0], -1)
    y = np.linalg.solve(np.eye(a.shape[0]) - damping * w, t)
    total = y.sum(axis=0)
    return np.divide(y, total, out=np.zeros_like(y), where=total > 0).reshape(np.shape(teleport))


def random_symmetric(n: int, density: float, seed: int, isolated: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) * (rng.random((n, n)) < density), k=1)
    a = upper + upper.T
    a[:isolated, :] = 0
    a[:, :isolated] = 0
    return a.astype(np.float32)


@pytest.fixture(scope="module")
def hippo():
    """A small HippoRAG-shaped graph, its walks and realistic teleports."""
    graph = synthetic_graph(600, 3000, seed=3)
    dense = graph.adjacency.toarray()
    teleports = synthetic_teleports(graph, 4, seed=3)
    background = np.zeros(graph.n_nodes, np.float32)
    background[graph.n_phrases :] = 1.0
    return graph, dense, teleports, background


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_symmetric_solver_matches_dense_solve_with_isolated_nodes(seed):
    a = random_symmetric(40, 0.15, seed, isolated=3)
    rng = np.random.default_rng(seed)
    t = rng.random(40).astype(np.float32) * (rng.random(40) < 0.3)
    t[0] = 0.7  # mass on an isolated node stays there
    got = personalized_pagerank(symmetric_walk(sp.csr_matrix(a)), t, PPRConfig(tol=1e-6))
    want = exact_ppr(a, t)
    assert got.dtype == np.float32 and got.shape == (40,)
    assert np.abs(got - want).sum() < 1e-5
    assert got.sum() == pytest.approx(1.0, abs=1e-5)


def test_tolerance_is_a_certified_l1_bound(hippo):
    graph, dense, teleports, _ = hippo
    walk = symmetric_walk(graph.adjacency)
    for tol in (1e-2, 1e-3, 1e-4):
        got = personalized_pagerank(walk, teleports, PPRConfig(tol=tol))
        errors = np.abs(got - exact_ppr(dense, teleports)).sum(axis=0)
        assert errors.max() <= tol


def test_looser_tolerance_takes_fewer_products(hippo):
    graph, _, teleports, _ = hippo
    walk = symmetric_walk(graph.adjacency)
    t = teleports[:, :1] / teleports[:, 0].sum()
    _, loose = conjugate_gradient(walk, t, 0.5, 1e-2, 100)
    _, tight = conjugate_gradient(walk, t, 0.5, 1e-6, 100)
    assert 1 <= loose < tight


def test_background_start_keeps_the_answer(hippo):
    graph, dense, teleports, background = hippo
    walk = symmetric_walk(graph.adjacency, background=background)
    got = personalized_pagerank(walk, teleports, PPRConfig(tol=1e-4))
    assert np.abs(got - exact_ppr(dense, teleports)).sum(axis=0).max() <= 1e-4
    assert 0.5 in walk._prior  # the background was solved once and kept


def test_batched_teleports_match_one_by_one_and_zero_column_is_zero(hippo):
    graph, dense, teleports, background = hippo
    walk = symmetric_walk(graph.adjacency, background=background)
    batch = np.column_stack([teleports, np.zeros(graph.n_nodes, np.float32)])
    got = personalized_pagerank(walk, batch, PPRConfig(tol=1e-5))
    assert got.shape == batch.shape and got.dtype == np.float32
    assert not got[:, -1].any()
    for j in range(teleports.shape[1]):
        single = personalized_pagerank(walk, teleports[:, j], PPRConfig(tol=1e-5))
        assert np.abs(got[:, j] - single).sum() < 3e-5
    assert np.abs(got[:, :-1] - exact_ppr(dense, teleports)).sum(axis=0).max() <= 1e-5


def test_power_iteration_path_matches_dense_solve_on_directed_graph_with_dangling_nodes():
    rng = np.random.default_rng(7)
    a = (rng.random((30, 30)) < 0.12).astype(np.float32) * rng.random((30, 30)).astype(np.float32)
    np.fill_diagonal(a, 0)
    a[[4, 9], :] = 0  # dangling: no out-edges
    t = np.zeros((30, 3), np.float32)
    t[[1, 4], 0] = [1.0, 2.0]
    t[:, 1] = rng.random(30)
    got = personalized_pagerank(walk_matrix(sp.csr_matrix(a)), t, PPRConfig(tol=1e-9, max_iter=200))
    want = exact_ppr(a, t)
    assert np.abs(got - want).sum(axis=0).max() < 1e-5
    assert not got[:, 2].any()


def test_both_paths_agree_on_an_undirected_graph(hippo):
    graph, _, teleports, _ = hippo
    fast = personalized_pagerank(symmetric_walk(graph.adjacency), teleports, PPRConfig(tol=1e-6))
    power = personalized_pagerank(walk_matrix(graph.adjacency), teleports, PPRConfig(tol=1e-8))
    assert np.abs(fast - power).sum(axis=0).max() < 1e-5


def test_symmetric_walk_step_equals_walk_matrix(hippo):
    graph, _, teleports, _ = hippo
    walk = symmetric_walk(graph.adjacency)
    reference = walk_matrix(graph.adjacency)
    x = teleports[:, 0]
    assert np.allclose(walk @ x, reference @ x, atol=1e-7)
    assert np.allclose(walk.matrix().toarray(), reference.toarray(), atol=1e-7)


def test_symmetric_walk_shares_float32_int32_arrays():
    a = sp.csr_matrix(random_symmetric(20, 0.3, 5))
    a.indices, a.indptr = a.indices.astype(np.int32), a.indptr.astype(np.int32)
    walk = symmetric_walk(a)
    assert isinstance(walk, SymmetricWalk)
    assert np.shares_memory(walk.adjacency.data, a.data) and np.shares_memory(
        walk.adjacency.indices, a.indices
    )


def test_symmetric_walk_rejects_directed_or_negative_graphs():
    a = np.zeros((4, 4), np.float32)
    a[0, 1] = 1.0
    with pytest.raises(ValueError, match="not symmetric"):
        symmetric_walk(sp.csr_matrix(a))
    b = np.array([[0, -1], [-1, 0]], np.float32)
    with pytest.raises(ValueError, match="negative"):
        symmetric_walk(sp.csr_matrix(b))


def test_bad_teleports_raise():
    walk = symmetric_walk(sp.csr_matrix(random_symmetric(6, 0.5, 1)))
    with pytest.raises(ValueError, match="shape"):
        personalized_pagerank(walk, np.ones(5, np.float32))
    with pytest.raises(ValueError, match="negative"):
        personalized_pagerank(walk, -np.ones(6, np.float32))


def test_threaded_products_equal_single_threaded():
    graph = synthetic_graph(3000, 120_000, seed=8)  # above the size where products are split
    walk = symmetric_walk(graph.adjacency)
    teleports = synthetic_teleports(graph, 3, seed=8)
    x = teleports[:, 0]
    assert np.allclose(walk.product(x, threads=2), graph.adjacency @ x, rtol=1e-6, atol=1e-9)
    assert np.allclose(
        walk.product(teleports, threads=3), graph.adjacency @ teleports, rtol=1e-6, atol=1e-9
    )
    one = personalized_pagerank(walk, teleports, PPRConfig(tol=1e-5))
    two = personalized_pagerank(walk, teleports, PPRConfig(tol=1e-5, threads=2))
    assert np.abs(one - two).sum(axis=0).max() < 1e-5


def test_fast_walk_picks_the_symmetric_solver_only_for_undirected_graphs():
    from qortex_core.query.ppr.solve import fast_walk

    a = random_symmetric(15, 0.3, 9)
    assert isinstance(fast_walk(sp.csr_matrix(a)), SymmetricWalk)
    directed = np.triu(a)
    walk = fast_walk(sp.csr_matrix(directed))
    assert sp.issparse(walk)
    t = np.ones(15, np.float32)
    assert (
        np.abs(
            personalized_pagerank(walk, t, PPRConfig(tol=1e-10, max_iter=500))
            - exact_ppr(directed, t)
        ).sum()
        < 1e-5
    )


def test_published_snapshot_graph_is_used_without_copy(tmp_path):
    from qortex_bench.ppr_snapshot_probe import publish_synthetic
    from qortex_core.storage import snapshot as snap

    graph = synthetic_graph(500, 2500, seed=11)
    publish_synthetic(tmp_path, graph)
    loaded = snap.load(tmp_path)
    stored = loaded.arrays["adj_degree"]  # the probe opens as the retriever: degrees stored
    assert np.allclose(stored, np.asarray(graph.adjacency.sum(axis=1)).ravel(), rtol=1e-6)
    background = np.zeros(graph.n_nodes, np.float32)
    background[loaded.n_phrases :] = 1.0
    opened = symmetric_walk(loaded.adjacency, background=background, degree=stored)
    summed = symmetric_walk(loaded.adjacency, background=background)
    t = synthetic_teleports(graph, 2, seed=12)
    assert np.array_equal(
        personalized_pagerank(opened, t, PPRConfig(tol=1e-4)),
        personalized_pagerank(summed, t, PPRConfig(tol=1e-4)),
    )
    background = np.zeros(graph.n_nodes, np.float32)
    background[loaded.n_phrases :] = 1.0
    walk = symmetric_walk(loaded.adjacency, background=background)
    assert isinstance(loaded.arrays["adj_indices"], np.memmap)
    assert np.shares_memory(walk.adjacency.indices, loaded.arrays["adj_indices"])
    assert np.shares_memory(walk.adjacency.data, loaded.arrays["adj_data"])
    teleports = synthetic_teleports(graph, 2, seed=11)
    got = personalized_pagerank(walk, teleports, PPRConfig(tol=1e-4))
    assert np.abs(got - exact_ppr(graph.adjacency.toarray(), teleports)).sum(axis=0).max() <= 1e-4


@pytest.mark.parametrize("make", [symmetric_walk, walk_matrix])
def test_empty_graph_gives_empty_scores(make):
    walk = make(sp.csr_matrix((0, 0), dtype=np.float32))
    assert personalized_pagerank(walk, np.zeros(0, np.float32)).shape == (0,)
    assert personalized_pagerank(walk, np.zeros((0, 2), np.float32)).shape == (0, 2)


def test_sparse_first_product_reads_only_background_and_seed_rows(hippo):
    graph, dense, teleports, background = hippo
    walk = symmetric_walk(graph.adjacency, background=background)
    x = teleports[:, 0] * walk.inv_degree  # a first CG direction: passages plus a few seeds
    assert np.allclose(walk.sparse_product(x), graph.adjacency @ x, rtol=1e-5, atol=1e-9)
    batch = teleports * walk.inv_degree[:, None]
    assert np.allclose(walk.sparse_product(batch), graph.adjacency @ batch, rtol=1e-5, atol=1e-9)
    everywhere = np.ones(graph.n_nodes, np.float32)  # falls back to the full product
    assert np.allclose(walk.sparse_product(everywhere), graph.adjacency @ everywhere, rtol=1e-5)
    scattered = np.zeros(graph.n_nodes, np.float32)
    scattered[::3] = 1.0  # a background that is not one block of rows: no shortcut, same answer
    other = symmetric_walk(graph.adjacency, background=scattered)
    assert np.allclose(other.sparse_product(x), graph.adjacency @ x, rtol=1e-5, atol=1e-9)


def test_row_views_share_the_adjacency_arrays():
    from qortex_core.query.ppr.csr_views import row_blocks

    graph = synthetic_graph(3000, 120_000, seed=12)
    background = np.zeros(graph.n_nodes, np.float32)
    background[graph.n_phrases :] = 1.0
    walk = symmetric_walk(graph.adjacency, background=background)
    _, _, rows = walk._background_rows()
    assert np.shares_memory(rows.indices, graph.adjacency.indices) and np.shares_memory(
        rows.data, graph.adjacency.data
    )
    for _, _, block in row_blocks(graph.adjacency, 3):
        assert np.shares_memory(block.indices, graph.adjacency.indices)


def test_split_products_are_bit_identical_so_the_retriever_may_use_every_core(monkeypatch):
    from qortex_core.query.config import RetrievalConfig
    from qortex_core.query.ppr import solve as ppr

    graph = synthetic_graph(3000, 120_000, seed=9)
    walk = symmetric_walk(graph.adjacency)
    teleports = synthetic_teleports(graph, 2, seed=9)
    for threads in (2, 3):  # each row block is summed as the whole product sums it
        assert np.array_equal(walk.product(teleports[:, 0], threads), walk.product(teleports[:, 0]))
        one = personalized_pagerank(walk, teleports[:, 1], PPRConfig(tol=1e-4))
        split = personalized_pagerank(walk, teleports[:, 1], PPRConfig(tol=1e-4, threads=threads))
        assert np.array_equal(one, split)
    assert RetrievalConfig().ppr.threads == ppr.query_threads() >= 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert ppr.query_threads() == 4  # capped
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert ppr.query_threads() == 1
