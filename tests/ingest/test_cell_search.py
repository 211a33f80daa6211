"""The nearest-centroid search, and synonym cells that are a function of the concept set (the
same pairs whatever the row order)."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_core.ingest.cells import nearest_cells
from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs


def _clustered(n: int, centres: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim))
    v = c[rng.integers(0, centres, n)] + rng.normal(scale=0.3, size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


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
