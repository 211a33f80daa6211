"""A snapshot stores its nodes' weighted degrees, checked symmetric when built, so a retriever
builds its walk without reading the memory-mapped adjacency at open; snapshots built before
still open, summing the degrees as they did."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from qortex_core.errors import SnapshotError
from qortex_core.query.ppr import cg as ppr_cg
from qortex_core.query.ppr.solve import PPRConfig, fast_walk, personalized_pagerank, symmetric_walk
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.checksums import file_digest
from qortex_core.storage.symmetry import check_symmetric, weighted_degree


def _snapshot_dir(home) -> tuple[snap.Snapshot, object]:
    loaded = snap.load(home)
    return loaded, loaded.path


def test_the_snapshot_stores_the_degrees_an_open_would_sum(toy_home):
    loaded, _ = _snapshot_dir(toy_home)
    stored = np.asarray(loaded.arrays["adj_degree"])
    assert stored.dtype == np.float32 and stored.shape == (loaded.adjacency.shape[0],)
    assert (stored > 0).sum() > 10
    assert np.array_equal(stored, weighted_degree(loaded.adjacency))  # bit for bit


def test_the_retriever_opens_without_checking_or_summing_the_adjacency(
    toy_home, embedder, monkeypatch
):
    loaded, _ = _snapshot_dir(toy_home)
    background = np.zeros(loaded.adjacency.shape[0], np.float32)
    background[loaded.n_phrases :] = 1.0  # as the retriever's
    summed = symmetric_walk(loaded.adjacency, background=background)  # the open before

    def untouched(*args, **kwargs):
        raise AssertionError("the open read the adjacency")

    monkeypatch.setattr(ppr_cg, "check_symmetric", untouched)
    monkeypatch.setattr(ppr_cg, "weighted_degree", untouched)
    walk = Retriever.open(toy_home, embedder=embedder).walk
    assert isinstance(walk, ppr_cg.SymmetricWalk)
    assert np.array_equal(walk.degree, summed.degree)
    assert np.array_equal(walk.isolated, summed.isolated)
    teleport = np.zeros(walk.shape[0], np.float32)
    teleport[[0, walk.shape[0] - 1]] = 1.0
    config = PPRConfig(tol=1e-6)
    assert np.array_equal(
        personalized_pagerank(walk, teleport, config),
        personalized_pagerank(summed, teleport, config),
    )


def _as_built_before(path, empty: bool = False) -> None:
    """Make the snapshot at ``path`` one without stored degrees (or with an empty array, as a
    builder that does not fill them writes)."""
    manifest = json.loads((path / "manifest.json").read_text())
    if empty:
        np.save(path / "adj_degree.npy", np.zeros(0, np.float32))
        manifest["files"]["adj_degree.npy"] = file_digest(path / "adj_degree.npy")
    else:
        del manifest["files"]["adj_degree.npy"]
        (path / "adj_degree.npy").unlink()
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("empty", [False, True], ids=["absent", "empty"])
def test_a_snapshot_built_before_the_degrees_opens_and_sums_them(toy_home, embedder, empty):
    loaded, path = _snapshot_dir(toy_home)
    _as_built_before(path, empty)
    retriever = Retriever.open(toy_home, embedder=embedder)
    assert retriever.view.degree is None
    expected = weighted_degree(loaded.adjacency)
    expected[expected <= 0] = 1.0
    assert np.array_equal(retriever.walk.degree, expected)


def test_degrees_that_disagree_with_the_node_count_are_refused(toy_home):
    loaded, path = _snapshot_dir(toy_home)
    n = loaded.adjacency.shape[0]
    np.save(path / "adj_degree.npy", np.ones(n - 1, np.float32))
    with pytest.raises(SnapshotError, match=f"adj_degree has {n - 1} rows .* nodes {n}"):
        snap.load(toy_home, verify=False)
    with pytest.raises(SnapshotError, match="checksum mismatch in adj_degree.npy"):
        snap.load(toy_home)


def test_given_degrees_must_fit_the_graph_and_a_builder_refuses_a_directed_graph():
    adj = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]], np.float32))
    walk = fast_walk(adj, degree=np.array([1, 3, 2], np.float32))
    assert isinstance(walk, ppr_cg.SymmetricWalk) and walk.degree.tolist() == [1, 3, 2]
    with pytest.raises(ValueError, match="degree has shape"):
        symmetric_walk(adj, degree=np.ones(2, np.float32))
    check_symmetric(adj)
    with pytest.raises(ValueError, match="not symmetric"):
        check_symmetric(sp.csr_matrix(np.array([[0, 1], [0, 0]], np.float32)))
    with pytest.raises(ValueError, match="negative"):
        check_symmetric(sp.csr_matrix(np.array([[0, -1], [-1, 0]], np.float32)))


def test_an_unchanged_home_rebuilds_a_snapshot_from_before_the_degrees_once(toy_home):
    from qortex_core.ingest.graph import GraphConfig
    from qortex_core.ingest.snapshot_stage import build_snapshot
    from qortex_core.storage.store import LanceStore

    loaded, path = _snapshot_dir(toy_home)
    manifest = loaded.manifest
    params = {k: v for k, v in manifest["params"].items() if k != "graph"}
    store = LanceStore.open(toy_home)

    def again():
        return build_snapshot(store, toy_home, manifest["embedding_model"], GraphConfig(), params)

    assert again().name == path.name  # same inputs, degrees stored: the latest is kept
    _as_built_before(path)
    rebuilt = again()
    assert rebuilt.name != path.name and "adj_degree" in snap.load(toy_home).arrays
    assert again().name == rebuilt.name  # once


def test_degrees_of_another_shape_or_type_are_refused(toy_home):
    loaded, path = _snapshot_dir(toy_home)
    n = loaded.adjacency.shape[0]
    np.save(path / "adj_degree.npy", np.ones((n, 2), np.float32))
    with pytest.raises(SnapshotError, match="adj_degree is float32 of shape"):
        snap.load(toy_home, verify=False)
    np.save(path / "adj_degree.npy", np.ones(n, np.float64))
    with pytest.raises(SnapshotError, match="adj_degree is float64"):
        snap.load(toy_home, verify=False)
