"""The fact index: facts stored cell by cell at snapshot build, and fact linking that scores
only the query's nearest cells plus the facts of its best dense passages."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest.cells import FactCellsConfig, nearest_cells
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.stages import build_index, build_snapshot
from qortex_core.query.fact_index import outside
from qortex_core.query.retriever import Retriever
from qortex_core.query.scoring import cosine, min_max
from qortex_core.query.seeding import link_facts
from qortex_core.storage import snapshot as snap
from qortex_core.storage.snapshot_shapes import shape_problems
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(16))
INDEXED = GraphConfig(fact_cells=FactCellsConfig(min_facts=0, cell_size=8))


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """The same corpus published without and with a fact index."""
    out = []
    for name, config in (("plain", GraphConfig()), ("indexed", INDEXED)):
        home = tmp_path_factory.mktemp(name)
        store = LanceStore.open(home)
        passages = SynthCorpus(SynthConfig(passages=150, seed=5)).passages()
        build_index(store, home, passages, OfflineExtractor(), EMBED)
        if name == "indexed":
            build_snapshot(store, home, EMBED.name, config, force=True)
        out.append(home)
    return out


def test_an_indexed_snapshot_stores_its_facts_cell_by_cell(homes):
    plain, indexed = (snap.load(h) for h in homes)
    assert plain.arrays["fact_cell_centroids"].shape[0] == 0  # below min_facts: no index
    a = indexed.arrays
    centroids, bounds = np.asarray(a["fact_cell_centroids"]), np.asarray(a["fact_cell_bounds"])
    n_facts = indexed.manifest["counts"]["facts"]
    assert centroids.shape[0] > 4 and bounds[-1] == n_facts == plain.manifest["counts"]["facts"]
    home = nearest_cells(np.asarray(a["fact_vectors"]), centroids, 1)[:, 0]
    assert np.all(np.diff(home) >= 0)  # facts sorted by cell
    assert sorted(indexed.tables["facts"]["id"].to_pylist()) == sorted(
        plain.tables["facts"]["id"].to_pylist()
    )
    bad = dict(a, fact_cell_bounds=np.asarray(bounds) - 1)
    assert shape_problems(bad, indexed.tables, indexed.manifest["counts"])


def test_a_snapshot_without_the_index_arrays_still_loads(tmp_path, homes):
    loaded = snap.load(homes[0])
    arrays = {k: v for k, v in loaded.arrays.items() if not k.startswith("fact_cell")}
    snap.publish(tmp_path, snap.Snapshot(arrays, loaded.tables, dict(loaded.manifest)))
    retriever = Retriever.open(tmp_path, embedder=EMBED)
    assert retriever.view.fact_index is None and retriever.view.fact_vectors.shape[0] > 0


def _linked(retriever: Retriever, text: str, probes: int) -> np.ndarray:
    vector = EMBED.embed([text])[0]
    dense = cosine(retriever.view.passage_vectors, vector)
    config = replace(retriever.config, fact_probes=probes)
    return link_facts(retriever.view, config, vector, dense).linked


def test_probing_every_cell_links_what_the_exact_scan_links(homes):
    retriever = Retriever.open(homes[1], embedder=EMBED)
    cells = retriever.view.fact_index.centroids.shape[0]
    for text in SynthCorpus(SynthConfig(passages=150, seed=5)).queries(12):
        exact = _linked(retriever, text, 0)
        assert exact.size > 0
        assert _linked(retriever, text, cells).tolist() == exact.tolist()


def test_one_probe_links_only_facts_of_its_cell_or_of_the_best_passages(homes):
    retriever = Retriever.open(homes[1], embedder=EMBED)
    index, view = retriever.view.fact_index, retriever.view
    differs = 0
    for text in SynthCorpus(SynthConfig(passages=150, seed=5)).queries(12):
        vector = EMBED.embed([text])[0]
        dense = cosine(view.passage_vectors, vector)
        ((start, stop),) = index.cells_near(vector, 1)
        allowed = set(range(start, stop)) | set(index.facts_of(np.argsort(-dense)[:16]).tolist())
        linked = _linked(retriever, text, 1)
        assert set(linked.tolist()) <= allowed
        differs += linked.tolist() != _linked(retriever, text, 0).tolist()
    assert differs < 12  # the best passages' facts keep most links exact


def test_retrieval_on_an_indexed_snapshot_matches_the_plain_one_when_every_cell_is_probed(homes):
    plain = Retriever.open(homes[0], embedder=EMBED)
    indexed = Retriever.open(homes[1], embedder=EMBED)
    indexed.config = replace(indexed.config, fact_probes=10**6)
    for text in SynthCorpus(SynthConfig(passages=150, seed=5)).queries(8):
        a = [h.id for h in plain.query(text, top_k=5, mode="hipporag").passages]
        b = [h.id for h in indexed.query(text, top_k=5, mode="hipporag").passages]
        assert a == b


def test_linked_fact_weights_are_the_min_max_over_every_fact(homes):
    retriever = Retriever.open(homes[1], embedder=EMBED)
    view = retriever.view
    for probes in (1, 3, 0):  # candidates only, more of them, every fact
        config = replace(retriever.config, fact_probes=probes)
        for text in SynthCorpus(SynthConfig(passages=150, seed=5)).queries(6):
            vector = EMBED.embed([text])[0]
            links = link_facts(view, config, vector, cosine(view.passage_vectors, vector))
            cos, linking = links.full()  # (n_facts,) each: what the filter sees
            assert cos.shape == linking.shape == (view.fact_vectors.shape[0],)
            assert np.allclose(links.weights(), min_max(linking)[links.linked], atol=1e-6)
            assert (cos[links.linked] >= config.fact_threshold).all()
            if probes == 0:
                assert np.allclose(cos, cosine(view.fact_vectors, vector), atol=1e-6)


def test_the_seeded_phrases_kept_are_every_phrase_with_a_weight(homes):
    retriever = Retriever.open(homes[1], embedder=EMBED)
    walked = 0
    for text in SynthCorpus(SynthConfig(passages=150, seed=5)).queries(12):
        seeding = retriever.context(text, EMBED.embed([text])[0]).seeding()
        assert seeding.seeded is None or np.all(np.diff(seeding.seeded) > 0)
        want = np.flatnonzero(seeding.phrase_weights)
        assert np.array_equal(seeding.seeded_phrases(), want)
        walked += seeding.teleport is not None and want.size > 0
    assert walked > 6


def test_outside_is_setdiff_with_the_ranges_concatenated():
    rng = np.random.default_rng(3)
    for _ in range(50):
        values = np.unique(rng.integers(0, 500, rng.integers(0, 60))).astype(np.int32)
        starts = np.sort(rng.choice(480, rng.integers(0, 6), replace=False))
        ranges = [(int(s), int(s + rng.integers(0, 20))) for s in starts]
        covered = np.concatenate([np.arange(a, b) for a, b in ranges] or [np.zeros(0, int)])
        got = outside(values, ranges)
        assert np.array_equal(got, np.setdiff1d(values, covered))
        assert got.dtype == values.dtype
