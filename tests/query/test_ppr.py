"""Personalized PageRank: hand-computed values, networkx agreement and edge cases.

Fixed point: x = (1 - d) t + d W x, with W column-stochastic and the mass of
dangling nodes returned to the teleport vector (networkx's default too).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from qortex_core.query.ppr.solve import (
    PPRConfig,
    personalized_pagerank,
    symmetric_walk,
    walk_matrix,
)

HALF = PPRConfig(damping=0.5, tol=1e-9, max_iter=500)


def undirected(n: int, edges: list[tuple[int, int, float]]) -> sp.csr_matrix:
    rows = [a for a, b, _ in edges] + [b for a, b, _ in edges]
    cols = [b for a, b, _ in edges] + [a for a, b, _ in edges]
    data = [w for *_, w in edges] * 2
    return sp.csr_matrix((np.array(data, np.float32), (rows, cols)), shape=(n, n))


def seed(n: int, *nodes: int) -> np.ndarray:
    t = np.zeros(n, np.float32)
    t[list(nodes)] = 1.0
    return t


WALKS = {"power": walk_matrix, "symmetric": symmetric_walk}  # both paths must give the same answers


@pytest.fixture(params=sorted(WALKS))
def kind(request) -> str:
    return request.param


def ppr(
    adj: sp.csr_matrix, t: np.ndarray, config: PPRConfig = HALF, kind: str = "power"
) -> np.ndarray:
    return personalized_pagerank(WALKS[kind](adj), t, config)


# -- hand-computed ------------------------------------------------------------------------
def test_two_nodes_by_hand(kind):
    # x0 = 1/2 + x1/2, x1 = x0/2  ->  x0 = 2/3, x1 = 1/3
    x = ppr(undirected(2, [(0, 1, 1.0)]), seed(2, 0), kind=kind)
    np.testing.assert_allclose(x, [2 / 3, 1 / 3], atol=1e-6)


def test_three_node_path_by_hand(kind):
    # path 0-1-2, seed 0: x0 = 1/2 + x1/4, x1 = (x0 + x2)/2, x2 = x1/4  ->  (7/12, 4/12, 1/12)
    x = ppr(undirected(3, [(0, 1, 1.0), (1, 2, 1.0)]), seed(3, 0), kind=kind)
    np.testing.assert_allclose(x, [7 / 12, 4 / 12, 1 / 12], atol=1e-6)


def test_star_seeded_at_a_leaf_by_hand(kind):
    # centre 0, leaves 1..3, seed leaf 1: x0 = 1/3, x1 = 1/2 + x0/6 = 5/9, x2 = x3 = x0/6 = 1/18
    x = ppr(undirected(4, [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0)]), seed(4, 1), kind=kind)
    np.testing.assert_allclose(x, [1 / 3, 5 / 9, 1 / 18, 1 / 18], atol=1e-6)


def test_weighted_triangle_matches_linear_solve(kind):
    # edge weights change the split: solve (I - d W) x = (1 - d) t exactly in float64
    adj = undirected(3, [(0, 1, 3.0), (0, 2, 1.0), (1, 2, 2.0)])
    w = np.array(
        [[0, 3 / 5, 1 / 3], [3 / 4, 0, 2 / 3], [1 / 4, 2 / 5, 0]]
    )  # column j = j's edges / j's degree
    t = np.array([0.0, 0.25, 0.75])
    expected = np.linalg.solve(np.eye(3) - 0.5 * w, 0.5 * t)
    np.testing.assert_allclose(walk_matrix(adj).toarray(), w, atol=1e-6)
    np.testing.assert_allclose(ppr(adj, t.astype(np.float32), kind=kind), expected, atol=1e-6)


def test_damping_is_honoured(kind):
    # 2 nodes, damping d, seed 0: x0 = (1 - d) + d x1, x1 = d x0  ->  x0 = 1 / (1 + d)
    adj = undirected(2, [(0, 1, 1.0)])
    for d in (0.15, 0.5, 0.85):
        x = ppr(adj, seed(2, 0), PPRConfig(damping=d, tol=1e-10, max_iter=1000), kind=kind)
        np.testing.assert_allclose(x, [1 / (1 + d), d / (1 + d)], atol=1e-5)


# -- against networkx ---------------------------------------------------------------------
WEIGHTED_EDGES = [
    (0, 1, 2.0),
    (1, 2, 1.0),
    (2, 3, 0.5),
    (3, 0, 1.5),
    (1, 3, 1.0),
    (3, 4, 3.0),
    (4, 5, 1.0),
    (5, 6, 0.25),
]


def networkx_ppr(
    n: int, edges, teleport: np.ndarray, damping: float, directed: bool = False
) -> np.ndarray:
    g = nx.DiGraph() if directed else nx.Graph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from(edges)
    pers = {i: float(v) for i, v in enumerate(teleport)}
    scores = nx.pagerank(
        g, alpha=damping, personalization=pers, weight="weight", tol=1e-12, max_iter=10_000
    )
    return np.array([scores[i] for i in range(n)])


@pytest.mark.parametrize("damping", [0.5, 0.85])
@pytest.mark.parametrize(
    "teleport", [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0.2, 0, 0, 0, 0, 0.8, 0], [1, 1, 1, 1, 1, 1, 1, 1]]
)
def test_matches_networkx_on_weighted_undirected_graph(damping, teleport, kind):
    # node 7 is isolated (dangling): networkx and qortex both send its mass back to the teleport
    t = np.array(teleport, np.float32)
    ours = ppr(
        undirected(8, WEIGHTED_EDGES),
        t,
        PPRConfig(damping=damping, tol=1e-10, max_iter=1000),
        kind=kind,
    )
    np.testing.assert_allclose(ours, networkx_ppr(8, WEIGHTED_EDGES, t, damping), atol=1e-5)


def test_matches_networkx_on_directed_graph_with_a_sink():
    # walk_matrix reads A[i, j] as the edge i -> j; node 3 has no out-edge (a sink)
    edges = [(0, 1, 1.0), (1, 2, 2.0), (1, 0, 1.0), (2, 0, 1.0), (2, 3, 1.0)]
    adj = sp.csr_matrix(
        (
            np.array([w for *_, w in edges], np.float32),
            ([a for a, *_ in edges], [b for _, b, _ in edges]),
        ),
        shape=(4, 4),
    )
    t = np.array([0.5, 0.0, 0.5, 0.0], np.float32)
    np.testing.assert_allclose(
        ppr(adj, t), networkx_ppr(4, edges, t, 0.5, directed=True), atol=1e-5
    )


# -- invariants ---------------------------------------------------------------------------
def test_scores_sum_to_one_and_peak_at_the_seed(kind):
    adj = undirected(8, WEIGHTED_EDGES)
    for node in range(7):
        x = ppr(adj, seed(8, node), kind=kind)
        assert x.dtype == np.float32
        assert x.sum() == pytest.approx(1.0, abs=1e-5)
        assert (x >= 0).all()
        assert int(np.argmax(x)) == node


def test_teleport_scale_does_not_matter(kind):
    adj = undirected(8, WEIGHTED_EDGES)
    t = np.array([0, 3, 0, 1, 0, 0, 0, 0], np.float32)
    np.testing.assert_allclose(ppr(adj, t, kind=kind), ppr(adj, t * 250.0, kind=kind), atol=1e-6)


def test_isolated_seed_keeps_all_its_mass(kind):
    adj = undirected(4, [(0, 1, 1.0), (1, 2, 1.0)])  # node 3 has no edge
    np.testing.assert_allclose(ppr(adj, seed(4, 3), kind=kind), [0, 0, 0, 1], atol=1e-7)


def test_isolated_seed_beside_a_connected_seed(kind):
    # the isolated node's walk mass returns to the teleport (half of it to itself):
    # x3 = (1 - d)/2 + (d x3)/2  ->  x3 = 1/3 with d = 1/2
    adj = undirected(4, [(0, 1, 1.0), (1, 2, 1.0)])
    x = ppr(adj, seed(4, 0, 3), kind=kind)
    assert x.sum() == pytest.approx(1.0, abs=1e-5)
    assert x[3] == pytest.approx(1 / 3, abs=1e-6)
    np.testing.assert_allclose(
        x, networkx_ppr(4, [(0, 1, 1.0), (1, 2, 1.0)], seed(4, 0, 3), 0.5), atol=1e-5
    )


def test_graph_with_no_edges_returns_the_teleport(kind):
    adj = sp.csr_matrix((5, 5), dtype=np.float32)
    t = np.array([0, 1, 3, 0, 0], np.float32)
    np.testing.assert_allclose(ppr(adj, t, kind=kind), t / 4, atol=1e-7)


def test_empty_graph(kind):
    walk = WALKS[kind](sp.csr_matrix((0, 0), dtype=np.float32))
    assert walk.shape == (0, 0)
    x = personalized_pagerank(walk, np.zeros(0, np.float32), HALF)
    assert x.shape == (0,)
    assert personalized_pagerank(walk, np.zeros((0, 3), np.float32), HALF).shape == (0, 3)


def test_all_zero_teleport_returns_zeros(kind):
    adj = undirected(8, WEIGHTED_EDGES)
    x = ppr(adj, np.zeros(8, np.float32), kind=kind)
    assert x.shape == (8,)
    assert not x.any()


def test_teleport_with_wrong_length_is_rejected(kind):
    with pytest.raises(ValueError):
        ppr(undirected(3, [(0, 1, 1.0)]), np.ones(4, np.float32), kind=kind)


def test_negative_teleport_is_rejected(kind):
    with pytest.raises(ValueError):
        ppr(undirected(3, [(0, 1, 1.0)]), np.array([1.0, -0.5, 0.0], np.float32), kind=kind)


def test_walk_matrix_is_column_stochastic_except_dangling_columns():
    walk = walk_matrix(undirected(8, WEIGHTED_EDGES))
    sums = np.asarray(walk.sum(axis=0)).ravel()
    np.testing.assert_allclose(sums[:7], 1.0, atol=1e-6)
    assert sums[7] == 0.0
    assert walk.dtype == np.float32


def test_batched_teleport_equals_per_column_calls(kind):
    adj = undirected(8, WEIGHTED_EDGES)
    walk = WALKS[kind](adj)
    rng = np.random.default_rng(7)
    batch = rng.random((8, 5)).astype(np.float32)
    batch[:, 1] = 0.0  # an all-zero column stays zero
    batch[:, 2] = seed(8, 7)  # an isolated seed
    out = personalized_pagerank(walk, batch, HALF)
    assert out.shape == (8, 5)
    for j in range(5):
        np.testing.assert_allclose(
            out[:, j], personalized_pagerank(walk, batch[:, j], HALF), atol=1e-6
        )
    assert not out[:, 1].any()
    np.testing.assert_allclose(out[:, [0, 2, 3, 4]].sum(axis=0), 1.0, atol=1e-5)


def test_teleport_is_not_modified(kind):
    adj = undirected(3, [(0, 1, 1.0), (1, 2, 1.0)])
    t = np.array([2.0, 0.0, 0.0], np.float32)
    ppr(adj, t, kind=kind)
    np.testing.assert_array_equal(t, [2.0, 0.0, 0.0])
