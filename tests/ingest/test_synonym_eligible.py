"""The synonym stage's eligible concepts: moving their vectors to the front of the array the
stage read (no second copy) gives what a copy gives, block by block."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from synonym_runs import index_stages

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.ingest import synonym_update
from qortex_core.ingest.synonym_stage import sync_synonyms
from qortex_core.ingest.synonym_update import eligible
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore


def _concepts(n: int, seed: int) -> tuple[pa.ChunkedArray, pa.ChunkedArray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = [("x" if rng.random() < 0.3 else "concept") + str(i) for i in range(n)]  # "x7": short
    ids = pa.chunked_array([pa.array([f"c{i:04d}" for i in range(n)])])
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    return ids, pa.chunked_array([pa.array(names)]), vectors, np.arange(n, dtype=np.int64)


@pytest.mark.parametrize("block_floats", [8, 24, 1 << 24], ids=["a row", "3 rows", "one block"])
def test_eligible_in_place_equals_the_copy(monkeypatch, block_floats) -> None:
    monkeypatch.setattr(synonym_update, "_BLOCK_FLOATS", block_floats)
    ids, names, vectors, keys = _concepts(200, 3)
    copied = eligible(ids, names, vectors.copy(), keys, 4)
    handed = vectors.copy()
    moved = eligible(ids, names, handed, keys, 4, in_place=True)
    assert 0 < len(copied.rows) < 200  # some names are too short
    np.testing.assert_array_equal(moved.rows, copied.rows)
    np.testing.assert_array_equal(moved.vectors, vectors[copied.rows])
    np.testing.assert_array_equal(moved.keys, copied.keys)
    assert moved.ids.equals(copied.ids)
    assert np.shares_memory(moved.vectors, handed)  # no second copy of the vectors


def test_a_read_only_array_is_copied_not_moved() -> None:
    ids, names, vectors, keys = _concepts(50, 4)
    vectors.flags.writeable = False
    el = eligible(ids, names, vectors, keys, 4, in_place=True)
    np.testing.assert_array_equal(el.vectors, vectors[el.rows])
    assert not np.shares_memory(el.vectors, vectors)


CORPUS = SynthCorpus(SynthConfig(passages=400, seed=3)).passages()


def _edges(store: LanceStore) -> dict[frozenset, float]:
    rows = store.read(SYNONYMS)
    pairs = zip(rows["a"].to_pylist(), rows["b"].to_pylist(), rows["weight"].to_pylist())
    return {frozenset((a, b)): w for a, b, w in pairs}


@pytest.mark.parametrize("max_drift", [1.0, 0.01], ids=["incremental", "drift: full again"])
def test_a_stage_with_ineligible_concepts_gives_a_full_builds_edges(tmp_path, max_drift) -> None:
    names = index_stages(LanceStore.open(tmp_path / "names"), CORPUS)
    lengths = np.sort([len(re.sub(r"[^A-Za-z0-9]", "", n)) for n in
                       names.read_columns(CONCEPTS, ["name"])["name"].to_pylist()])  # fmt: skip
    config = SynonymConfig(min_chars=int(lengths[len(lengths) // 4]) + 1)  # a quarter or more out
    store = index_stages(LanceStore.open(tmp_path / "home"), CORPUS[:360])
    sync_synonyms(store, config)
    index_stages(store, CORPUS[20:])
    report = sync_synonyms(store, config, max_drift=max_drift)
    assert report.mode == ("incremental" if max_drift == 1.0 else "full"), report
    full = index_stages(LanceStore.open(tmp_path / "full"), CORPUS[20:])
    assert sync_synonyms(full, config).mode == "full"
    got, want = _edges(store), _edges(full)
    assert got.keys() == want.keys() and len(want) > 20
    keys = sorted(want, key=sorted)
    np.testing.assert_allclose([got[k] for k in keys], [want[k] for k in keys], atol=1e-5)
