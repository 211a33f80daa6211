"""Above ``exact_max`` (the cell search), incremental synonym runs give exactly the edges of a full
build of the final concepts, after additions, removals and changed vectors, in one and two-level
layouts; the cells do not depend on the concepts table's row order; a run killed between its
writes is finished by the next one. Small configs put a few thousand concepts on the cell path."""

from __future__ import annotations

import json
import multiprocessing as mp
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from synonym_runs import index_stages, killed_sync

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.ingest import synonym_update
from qortex_core.ingest.synonym_stage import BASIS, sync_synonyms
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage import ids
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore

CORPUS = SynthCorpus(SynthConfig(passages=420, seed=7)).passages()
FLAT = SynonymConfig(exact_max=200, cell_size=24, probes=4)  # a centroid in 6 concepts
GROUPS = replace(FLAT, flat_max=50, group_rate=40)  # a group in 240 concepts
# each run: the corpus of passages, and how many concepts get a new vector
STEPS = [(CORPUS[:360], 0), (CORPUS[:380], 0), (CORPUS[10:380], 0), (CORPUS[10:380], 25)]
FINAL = CORPUS[10:380]


def _change_vectors(store: LanceStore, count: int, seed: int) -> None:
    """Give ``count`` concepts another unit vector (a name spelt another way first), near one
    of 3 concepts (crowds of ~8 synonyms: a top-k of 2 binds), as the embeddings stage would:
    a new table version and a new stage digest."""
    rows = store.read(CONCEPTS)
    dim = rows.schema.field("vector").type.list_size
    v = np.array(rows["vector"].combine_chunks().flatten(), np.float32).reshape(-1, dim)
    rng = np.random.default_rng(seed)
    at = rng.choice(len(v), count, replace=False)
    other = rng.choice(len(v), 3, replace=False)[rng.integers(0, 3, count)]  # 3 crowds
    mixed = v[other] + 0.3 * rng.standard_normal((count, dim)).astype(np.float32) / np.sqrt(dim)
    v[at] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), dim)
    at_vector = rows.schema.get_field_index("vector")
    store.replace(CONCEPTS, rows.set_column(at_vector, "vector", vectors))
    store.set_stage_digest("embeddings", f"changed {seed}")


def _edges(store: LanceStore) -> dict[frozenset, float]:
    rows = store.read(SYNONYMS)
    pairs = zip(rows["a"].to_pylist(), rows["b"].to_pylist(), rows["weight"].to_pylist())
    return {frozenset((a, b)): w for a, b, w in pairs}


def _same_edges(got: dict[frozenset, float], want: dict[frozenset, float]) -> None:
    assert got.keys() == want.keys(), (len(got.keys() - want.keys()), len(want.keys() - got.keys()))
    keys = sorted(want, key=sorted)
    np.testing.assert_allclose([got[k] for k in keys], [want[k] for k in keys], atol=1e-5)


def _full_of(home: Path, store: LanceStore, config: SynonymConfig) -> dict[frozenset, float]:
    """The edges of a full build over a copy of ``store``'s concepts table in ``home``."""
    fresh = LanceStore.open(home)
    fresh.replace(CONCEPTS, store.read(CONCEPTS))
    report = sync_synonyms(fresh, config)
    assert report.mode == "full"
    return _edges(fresh)


@pytest.mark.parametrize(
    "config", [FLAT, GROUPS, replace(FLAT, top_k=1)], ids=["flat", "groups", "top-k binds"]
)
def test_every_incremental_run_equals_a_full_build(tmp_path, config):
    _runs_equal_full_builds(tmp_path, config)


def test_rows_taken_by_small_blocks_give_the_same_edges(tmp_path, monkeypatch):
    """The kept concepts' worst cells, the new centroids and the candidates scored a few rows
    at a time (at 1M passages a block is 2^24 floats): the edges are a full build's."""
    monkeypatch.setattr(synonym_update, "_BLOCK_FLOATS", 700)
    _runs_equal_full_builds(tmp_path, FLAT)


def _runs_equal_full_builds(tmp_path: Path, config: SynonymConfig) -> None:
    store = LanceStore.open(tmp_path / "home")
    modes = []
    for step, (passages, changed) in enumerate(STEPS):
        index_stages(store, passages)
        if changed:
            _change_vectors(store, changed, step)
        report = sync_synonyms(store, config, max_drift=1.0)
        modes.append(report.mode)
        want = _full_of(tmp_path / f"full{step}", store, config)
        _same_edges(_edges(store), want)
        assert report.edges == len(want) == store.count(SYNONYMS)
        assert store.count(BASIS) == store.count(CONCEPTS)
    layout = json.loads(store.stage_digest("synonyms"))["layout"]
    assert layout.startswith("groups" if config.flat_max < 4096 else "flat"), layout
    assert modes[0] == "full" and modes[1:] == ["incremental"] * 3, modes
    assert len(want) > 100  # the concepts have synonyms to get right


def test_the_full_build_is_on_the_cell_path_and_moves_cells(tmp_path):
    store = index_stages(LanceStore.open(tmp_path), STEPS[0][0])
    assert sync_synonyms(store, FLAT).mode == "full"
    assert store.count(CONCEPTS) > 10 * FLAT.exact_max
    index_stages(store, STEPS[1][0])
    report = sync_synonyms(store, FLAT, max_drift=1.0)
    moved = int(report.reason.split(", ")[-1].split()[0])
    assert report.mode == "incremental" and moved > 0, report  # new centroids took members


def test_the_edges_do_not_depend_on_the_row_order(tmp_path):
    store = index_stages(LanceStore.open(tmp_path / "home"), FINAL)
    rows = store.read(CONCEPTS)
    shuffled = LanceStore.open(tmp_path / "shuffled")
    order = np.random.default_rng(1).permutation(rows.num_rows)
    shuffled.replace(CONCEPTS, rows.take(pa.array(order)))
    for config in (FLAT, GROUPS, replace(FLAT, exact_max=10**6, top_k=2)):
        sync_synonyms(store, config)
        sync_synonyms(shuffled, config)
        _same_edges(_edges(shuffled), _edges(store))


def test_a_killed_cell_run_is_finished_by_the_next_one(tmp_path):
    store = index_stages(LanceStore.open(tmp_path), STEPS[0][0])
    sync_synonyms(store, FLAT)
    index_stages(store, STEPS[2][0])

    proc = mp.get_context("spawn").Process(target=killed_sync, args=(str(tmp_path), FLAT))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL

    report = sync_synonyms(LanceStore.open(tmp_path), FLAT, max_drift=1.0)
    assert report.mode == "full" and "interrupted" in report.reason
    _same_edges(_edges(LanceStore.open(tmp_path)), _full_of(tmp_path / "full", store, FLAT))


def _crowded_concepts(n: int, seed: int) -> pa.Table:
    """A concepts table of ``n`` synthetic concepts in crowds of ~12 (cosines around 0.85)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n // 12, 16))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.1, size=(n, 16))
    v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    names = [f"crowded concept {seed} {i}" for i in range(n)]
    return pa.table(
        {
            "id": [ids.concept_id(name) for name in names],
            "name": names,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), 16),
        }
    )


@pytest.mark.parametrize(
    "config",
    [replace(FLAT, top_k=2), replace(FLAT, exact_max=10**6, top_k=2)],
    ids=["cells", "exact"],
)
def test_crowds_where_top_k_binds_everywhere_stay_exact(tmp_path, config):
    # most rows have more candidates than they keep: an edge often stands because only one of
    # its ends keeps the other, and removing, adding or moving a concept shifts many cuts
    first, more = _crowded_concepts(1500, 1), _crowded_concepts(150, 2)
    store = LanceStore.open(tmp_path / "home")
    store.replace(CONCEPTS, first)
    sync_synonyms(store, config)
    runs = [
        pa.concat_tables([first, more]),  # added
        pa.concat_tables([first.slice(60), more]),  # removed
        pa.concat_tables([first.slice(60), more.slice(0, 100), _crowded_concepts(40, 3)]),
    ]
    for step, concepts in enumerate(runs):
        store.replace(CONCEPTS, concepts)
        store.set_stage_digest("embeddings", f"run {step}")
        report = sync_synonyms(store, config, max_drift=1.0)
        assert report.mode == "incremental", report
        _same_edges(_edges(store), _full_of(tmp_path / f"full{step}", store, config))
    assert store.count(SYNONYMS) > 1000


def test_a_vector_has_the_same_fingerprint_in_any_table():
    # a float product's last bit can depend on the rows around it: a concept would look changed
    from qortex_core.ingest.synonym_concepts import fingerprints

    rng = np.random.default_rng(0)
    v = rng.standard_normal((53_287, 64)).astype(np.float32)
    some = np.sort(rng.choice(len(v), 53_000, replace=False))
    assert np.array_equal(fingerprints(v)[some], fingerprints(v[some]))
    assert len(np.unique(fingerprints(v))) == len(v)
    other = v[:1].copy()
    other[0, 5] = np.nextafter(other[0, 5], np.float32(2))  # one bit
    assert fingerprints(other)[0] != fingerprints(v[:1])[0]
