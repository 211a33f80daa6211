"""The two-level cell search (ingest/cells.py CellSearch): exact up to EXACT_CELLS centroids;
above, far fewer comparisons per vector and almost always the same cell as the exact search."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_core.ingest import cells as cells_mod
from qortex_core.ingest.cells import CellSearch, FactCellsConfig, fact_cells, nearest_cells
from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs


def _clustered(n: int, centres: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim))
    v = c[rng.integers(0, centres, n)] + rng.normal(scale=0.3, size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_up_to_the_limit_the_search_is_exact():
    v = _clustered(2000, 50, 16, 0)
    centroids = cells_mod.spherical_kmeans(v, 64, 0)
    search = CellSearch.of(centroids)
    assert search.coarse is None
    assert np.array_equal(search.nearest(v, 3), nearest_cells(v, centroids, 3))


def test_above_the_limit_few_comparisons_and_nearly_the_exact_cells(monkeypatch):
    monkeypatch.setattr(cells_mod, "EXACT_CELLS", 16)
    v = _clustered(20_000, 400, 24, 1)
    centroids = cells_mod.spherical_kmeans(v, 400, 1)
    search = CellSearch.of(centroids, 1)
    assert search.coarse is not None and len(search.coarse) == 20  # ceil(sqrt(400)) groups
    compared = np.mean([c.size for c in search.candidates]) + len(search.coarse)
    assert compared <= 100  # a vector meets a quarter of the centroids (4 sqrt(cells))
    got = search.nearest(v, 1)[:, 0]
    want = nearest_cells(v, centroids, 1)[:, 0]
    assert (got == want).mean() >= 0.95
    sims = np.einsum("nd,nd->n", v, centroids[got]), np.einsum("nd,nd->n", v, centroids[want])
    assert np.all(sims[0] <= sims[1] + 1e-6)  # never better than the exact best: same scores
    two = search.nearest(v, 2)
    assert np.all(two[:, 0] != two[:, 1])  # two distinct cells


def test_fact_cells_with_the_two_level_search_list_every_fact_once(monkeypatch):
    monkeypatch.setattr(cells_mod, "EXACT_CELLS", 16)
    v = _clustered(8000, 100, 16, 2)
    index = fact_cells(v, FactCellsConfig(min_facts=0, cell_size=40))
    assert index is not None and len(index.centroids) == 200
    assert np.array_equal(np.sort(index.order), np.arange(8000))
    assert index.bounds[0] == 0 and index.bounds[-1] == 8000 and np.all(np.diff(index.bounds) >= 0)
    home = np.empty(8000, np.int64)
    for c in range(len(index.centroids)):
        home[index.order[index.bounds[c] : index.bounds[c + 1]]] = c
    exact = nearest_cells(v, index.centroids, 1)[:, 0]
    assert (home == exact).mean() >= 0.95


@pytest.mark.parametrize(
    "config",
    [
        SynonymConfig(threshold=0.9, top_k=3, exact_max=0, cell_size=40, probes=4),
        SynonymConfig(threshold=0.9, top_k=3, exact_max=0, cell_size=40, flat_max=20),
    ],
    ids=["flat", "groups"],
)
def test_synonym_cells_do_not_depend_on_the_row_order(config):
    v = _clustered(6000, 300, 24, 3)
    names = [f"concept number {i}" for i in range(len(v))]
    order = np.random.default_rng(4).permutation(len(v))
    before = synonym_pairs(v, names, config)
    after = synonym_pairs(v[order], [names[i] for i in order], config)
    assert len(before[0]) > 1000
    want = {frozenset((names[a], names[b])): w for a, b, w in zip(*before)}
    got = {frozenset((names[order[a]], names[order[b]])): w for a, b, w in zip(*after)}
    assert got.keys() == want.keys()  # top-k binds on most rows: ties go to the smaller key
    assert all(abs(got[k] - want[k]) < 1e-6 for k in want)


@pytest.mark.parametrize("probes", [1, 2, 3, 8, 9, 40])
def test_nearest_cells_are_the_most_similar_best_first(probes):
    rng = np.random.default_rng(probes)
    v = rng.standard_normal((500, 16)).astype(np.float32)
    centroids = rng.standard_normal((40, 16)).astype(np.float32)
    want = np.argsort(-(v @ centroids.T), axis=1, kind="stable")[:, :probes]
    assert np.array_equal(nearest_cells(v, centroids, probes), want)


def test_the_compiled_scan_finds_what_nonzero_finds():
    from qortex_core.ingest.pair_kernels import above

    rng = np.random.default_rng(9)
    sims = rng.uniform(-1, 1, (300, 700)).astype(np.float32)
    sims[5, 6] = 0.8  # exactly at the threshold: kept
    r, c, w = above(sims, 0.8)
    want_r, want_c = np.nonzero(sims >= np.float32(0.8))
    assert np.array_equal(r, want_r) and np.array_equal(c, want_c)
    assert np.array_equal(w, sims[want_r, want_c]) and (5, 6) in set(zip(r.tolist(), c.tolist()))
    none = above(np.zeros((4, 4), np.float32), 0.5)
    assert all(x.size == 0 for x in none)
    # upper: a band of rows of a symmetric product, only the entries right of the diagonal
    ur, uc, uw = above(sims, 0.8, upper=True)
    keep = want_c > want_r
    assert np.array_equal(ur, want_r[keep]) and np.array_equal(uc, want_c[keep])
    assert np.array_equal(uw, sims[want_r[keep], want_c[keep]]) and keep.sum() < len(want_r)
