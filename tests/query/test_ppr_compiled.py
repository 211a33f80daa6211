"""The compiled single-teleport solve (ppr_fused, ppr_kernels) against numpy and exact PPR."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from qortex_bench.bench_graphs import synthetic_graph, synthetic_teleports
from qortex_core.query.ppr.cg import conjugate_gradient
from qortex_core.query.ppr.fused import fused_pagerank
from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank, symmetric_walk
from tests.query.test_ppr_fast import exact_ppr, random_symmetric

NUMPY = PPRConfig(compiled=False)


@pytest.fixture(scope="module")
def graph():
    """A HippoRAG-shaped graph big enough to be split into several chunks and row blocks."""
    g = synthetic_graph(40_000, 250_000, seed=5)
    background = np.zeros(g.n_nodes, np.float32)
    background[g.n_phrases :] = 1.0
    return g, synthetic_teleports(g, 4, seed=5), background


@pytest.mark.parametrize("tol", [1e-3, 1e-5])
def test_compiled_solve_keeps_the_certified_bound_and_the_product_count(graph, tol):
    g, teleports, background = graph
    walk = symmetric_walk(g.adjacency, background=background)
    exact = symmetric_walk(g.adjacency)  # no background start: a different iterate path
    want = personalized_pagerank(exact, teleports, PPRConfig(tol=1e-9, max_iter=500))
    for j in range(teleports.shape[1]):
        t = teleports[:, j] / teleports[:, j].sum()
        got, products = fused_pagerank(walk, t, 0.5, tol, 100, 1)
        numpy_scores = personalized_pagerank(walk, t, PPRConfig(tol=tol, compiled=False))
        _, numpy_products = conjugate_gradient(walk, t[:, None], 0.5, tol, 100)
        assert got.dtype == np.float32 and got.sum() == pytest.approx(1.0, abs=1e-5)
        assert np.abs(got - want[:, j]).sum() <= tol
        assert abs(products - numpy_products) <= 1  # the same iteration, summed in another order
        assert np.abs(got - numpy_scores).sum() <= 2 * tol


def test_compiled_solve_matches_a_dense_solve_with_isolated_nodes_and_no_background():
    a = random_symmetric(60, 0.1, 4, isolated=5)
    rng = np.random.default_rng(4)
    t = rng.random(60).astype(np.float32) * (rng.random(60) < 0.3)
    t[1] = 0.5  # an isolated node keeps its own teleport; a connected one gets 1 / (1 - a) of it
    got = personalized_pagerank(symmetric_walk(sp.csr_matrix(a)), t, PPRConfig(tol=1e-6))
    assert np.abs(got - exact_ppr(a, t)).sum() < 1e-5
    assert got[1] == pytest.approx(0.5 / (t[:5].sum() + 2 * t[5:].sum()), rel=1e-4)


def test_thread_count_does_not_change_a_bit(graph):
    g, teleports, background = graph
    walk = symmetric_walk(g.adjacency, background=background)
    t = teleports[:, 2] / teleports[:, 2].sum()
    one, k1 = fused_pagerank(walk, t, 0.5, 1e-6, 100, 1)
    for threads in (2, 3):
        split, k = fused_pagerank(walk, t, 0.5, 1e-6, 100, threads)
        assert len(walk._blocks[("compiled", threads)].product_rows) > 1  # really split
        assert k == k1 and np.array_equal(split, one)


def test_int64_index_arrays_give_the_same_scores(graph):
    g, teleports, background = graph
    wide = g.adjacency.copy()
    wide.indptr, wide.indices = wide.indptr.astype(np.int64), wide.indices.astype(np.int64)
    t = teleports[:, 0] / teleports[:, 0].sum()
    narrow_scores, _ = fused_pagerank(symmetric_walk(g.adjacency, background), t, 0.5, 1e-6, 100, 1)
    wide_scores, _ = fused_pagerank(symmetric_walk(wide, background), t, 0.5, 1e-6, 100, 1)
    # the same rows; only the vector width of the gathers (so the order of a row's sum) differs
    assert np.abs(narrow_scores - wide_scores).sum() < 1e-6


def test_iteration_cap_is_honoured(graph):
    g, teleports, _ = graph
    t = teleports[:, 1] / teleports[:, 1].sum()
    _, products = fused_pagerank(symmetric_walk(g.adjacency), t, 0.5, 1e-12, 2, 1)
    assert products == 2


def test_the_teleport_is_left_alone_and_zero_teleport_gives_zeros(graph):
    g, teleports, background = graph
    walk = symmetric_walk(g.adjacency, background=background)
    t = teleports[:, 3].copy()
    personalized_pagerank(walk, t)
    assert np.array_equal(t, teleports[:, 3])
    assert not personalized_pagerank(walk, np.zeros(g.n_nodes, np.float32)).any()


def test_importing_the_library_does_not_load_numba():
    code = (
        "import json, sys, qortex_core, qortex_core.query.ppr.solve, qortex_core.query.ppr.fused\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'numba')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
