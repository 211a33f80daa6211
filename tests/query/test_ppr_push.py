"""Local push PageRank: the error bound against an exact solve, its work bound, and its
selection by ``personalized_pagerank`` on large graphs with sparse teleports."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from qortex_core.query.ppr import push as ppr_push
from qortex_core.query.ppr.push import push_pagerank
from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank, symmetric_walk

DAMPING = 0.5


def random_graph(n: int, edges: int, seed: int, isolated: int = 0) -> sp.csr_matrix:
    """A symmetric weighted graph whose last ``isolated`` nodes have no edge."""
    rng = np.random.default_rng(seed)
    m = n - isolated
    a, b = rng.integers(0, m, edges), rng.integers(0, m, edges)
    keep = a != b
    w = rng.uniform(0.5, 2.0, keep.sum()).astype(np.float32)
    adj = sp.coo_matrix((w, (a[keep], b[keep])), shape=(n, n)).tocsr()
    adj = (adj + adj.T).tocsr()
    adj.sum_duplicates()
    return adj


def exact_y(adj: sp.csr_matrix, t: np.ndarray) -> np.ndarray:
    """``y`` solving ``(I - a A D^-1) y = t`` (an isolated node keeps its teleport)."""
    deg = np.asarray(adj.sum(axis=1)).ravel().astype(np.float64)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    system = sp.identity(adj.shape[0]) - DAMPING * (adj.astype(np.float64) @ sp.diags(inv))
    return spla.spsolve(system.tocsc(), t.astype(np.float64))


def raw_push(adj: sp.csr_matrix, t: np.ndarray, eps: float):
    """The kernel's estimate ``y``, residual ``r`` and edge reads, before normalisation."""
    walk = symmetric_walk(adj)
    n = adj.shape[0]
    seeds = np.flatnonzero(t).astype(np.int32)
    node = np.zeros((n, 4), np.float32)  # rows (r, d, y, state)
    node[:, ppr_push.DEGREE] = walk.degree
    node[seeds, ppr_push.R] = t[seeds]
    n_touched, reads = ppr_push.push_pass(
        adj.indptr, adj.indices, adj.data, np.float32(DAMPING), np.float32(eps),
        seeds, node, np.empty(n, np.int32), np.empty(n, np.int32),
    )  # fmt: skip
    r, y = node[:, ppr_push.R], node[:, ppr_push.Y]
    held = np.flatnonzero((r != 0) | (y != 0))
    assert (node[held, ppr_push.STATE] == ppr_push.TOUCHED).all()  # nothing left queued
    assert n_touched >= held.size
    return y.astype(np.float64), r.astype(np.float64), reads, walk.degree.astype(np.float64)


@pytest.mark.parametrize("eps", [1e-3, 1e-4, 1e-6])
def test_error_is_within_the_per_degree_bound_and_never_over(eps):
    adj = random_graph(400, 1600, seed=1, isolated=5)
    t = np.zeros(400, np.float32)
    t[[3, 50, 398]] = [0.5, 0.3, 0.2]  # 398 is isolated
    y, r, _, degree = raw_push(adj, t, eps)
    truth = exact_y(adj, t)
    gap = truth - y
    assert (gap >= -1e-6).all()  # y only ever collects mass that the exact solution holds
    assert (truth - (y + r) >= -1e-6).all()  # the residual is a first term, not an overshoot
    assert (gap <= eps * degree / (1 - DAMPING) + 1e-6).all()
    assert (r < eps * degree + 1e-9).all()  # nothing left above the threshold
    assert y[398] + r[398] == pytest.approx(0.2)  # an isolated node keeps its teleport


def test_work_is_bounded_by_the_threshold_not_the_graph():
    adj = random_graph(20_000, 200_000, seed=2)
    t = np.zeros(20_000, np.float32)
    t[7] = 1.0
    eps = 1e-4
    *_, reads, _ = raw_push(adj, t, eps)
    assert 0 < reads <= 1 / (eps * (1 - DAMPING))
    assert reads < adj.nnz  # it did not read the whole graph


def test_scores_sum_to_one_and_peak_at_the_seed():
    adj = random_graph(300, 900, seed=3)
    t = np.zeros(300, np.float32)
    t[11] = 2.0
    scores, _ = push_pagerank(symmetric_walk(adj), t, DAMPING, 1e-8, 300)
    assert scores.dtype == np.float32
    assert scores.sum() == pytest.approx(1.0, abs=1e-5)
    assert int(np.argmax(scores)) == 11


def test_agrees_with_the_global_solve():
    adj = random_graph(500, 2500, seed=4, isolated=3)
    walk = symmetric_walk(adj)
    t = np.zeros(500, np.float32)
    t[[1, 2, 499]] = [1.0, 0.5, 0.25]
    exact = personalized_pagerank(walk, t, PPRConfig(tol=1e-9, max_iter=500))
    pushed, _ = push_pagerank(walk, t, DAMPING, 1e-9, 500)
    assert np.abs(pushed - exact).sum() < 1e-4
    assert np.argsort(-pushed)[:10].tolist() == np.argsort(-exact)[:10].tolist()


def test_empty_dense_and_negative_teleports():
    walk = symmetric_walk(random_graph(100, 300, seed=5))
    zeros = np.zeros(100, np.float32)
    scores, reads = push_pagerank(walk, zeros, DAMPING, 1e-6, 10)
    assert reads == 0 and not scores.any()
    assert push_pagerank(walk, np.ones(100, np.float32), DAMPING, 1e-6, 10) is None
    bad = zeros.copy()
    bad[[4, 5]] = [1.0, -0.5]
    with pytest.raises(ValueError, match="negative"):
        push_pagerank(walk, bad, DAMPING, 1e-6, 10)


def test_workspaces_are_clean_between_solves_and_threads():
    adj = random_graph(2_000, 10_000, seed=6)
    walk = symmetric_walk(adj)
    teleports = []
    for s in range(8):
        t = np.zeros(2_000, np.float32)
        t[[s, 100 + s]] = [1.0, 0.5]
        teleports.append(t)
    fresh = [push_pagerank(symmetric_walk(adj), t, DAMPING, 1e-7, 2_000)[0] for t in teleports]
    again = [push_pagerank(walk, t, DAMPING, 1e-7, 2_000)[0] for t in teleports]  # one walk
    with ThreadPoolExecutor(4) as pool:
        threaded = list(
            pool.map(lambda t: push_pagerank(walk, t, DAMPING, 1e-7, 2_000)[0], teleports)
        )
    for a, b, c in zip(fresh, again, threaded):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_personalized_pagerank_pushes_only_large_graphs_and_sparse_teleports():
    adj = random_graph(6_400, 40_000, seed=7)
    walk = symmetric_walk(adj)
    exact_config = PPRConfig(tol=1e-9, max_iter=500, push_min_nodes=0)
    push_config = replace(exact_config, push_min_nodes=6_400, push_eps=1e-5)
    sparse = np.zeros(6_400, np.float32)
    sparse[[10, 20]] = 1.0
    exact = personalized_pagerank(walk, sparse, exact_config)
    pushed = personalized_pagerank(walk, sparse, push_config)
    loose, _ = push_pagerank(walk, sparse, DAMPING, 1e-5, 100)
    assert np.array_equal(pushed, loose)  # the push answered
    assert not np.array_equal(pushed, exact)  # an approximation, ranked alike at the top
    assert sorted(np.argsort(-pushed)[:2].tolist()) == sorted(np.argsort(-exact)[:2].tolist())
    dense = np.random.default_rng(0).random(6_400).astype(np.float32)  # held by every node
    assert np.array_equal(
        personalized_pagerank(walk, dense, push_config),
        personalized_pagerank(walk, dense, exact_config),
    )  # too many seeds: the global solve
    small = replace(push_config, push_min_nodes=6_401)  # graph below the size: global
    assert np.array_equal(personalized_pagerank(walk, sparse, small), exact)


def test_a_support_hint_reads_only_its_entries_and_gives_the_same_scores(monkeypatch):
    adj = random_graph(3_000, 12_000, seed=8)
    walk = symmetric_walk(adj)
    t = np.zeros(3_000, np.float32)
    t[[3, 40, 2_900]] = [0.5, 1.0, 0.25]
    support = np.array([3, 7, 40, 1_000, 2_900])  # a superset: 7 and 1,000 hold nothing
    plain, reads = push_pagerank(walk, t, DAMPING, 1e-6, 100)

    def no_scan(*args):
        raise AssertionError("scanned the whole teleport")

    monkeypatch.setattr(ppr_push, "_scan", no_scan)
    hinted, hinted_reads = push_pagerank(walk, t, DAMPING, 1e-6, 100, support)
    assert np.array_equal(hinted, plain) and hinted_reads == reads
    config = PPRConfig(push_min_nodes=3_000, push_eps=1e-6)
    assert np.array_equal(personalized_pagerank(walk, t, config, support), hinted)
    assert push_pagerank(walk, t, DAMPING, 1e-6, 2, support) is None  # 3 seeds > most
    bad = t.copy()
    bad[7] = -1.0
    with pytest.raises(ValueError, match="negative"):
        push_pagerank(walk, bad, DAMPING, 1e-6, 100, support)
