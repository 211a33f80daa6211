"""The snapshot's link arrays, built with Arrow lookups, match the stored tables row by row;
a synonym edge naming an unknown concept is a SnapshotError, not a crash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import SnapshotError
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stages import build_index, build_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import FACTS, SYNONYMS, LanceStore


@pytest.fixture
def synth_home(tmp_path):
    store = LanceStore.open(tmp_path)
    passages = SynthCorpus(SynthConfig(passages=120, seed=9)).passages()
    build_index(store, tmp_path, passages, OfflineExtractor(), HashEmbedder(HashEmbedderConfig(16)))
    return tmp_path, store


def test_link_arrays_match_the_stored_lists(synth_home):
    home, _ = synth_home
    loaded = snap.load(home)
    a, t = loaded.arrays, loaded.tables
    n_phr = int(loaded.manifest["counts"]["phrases"])
    p_at = {pid: i for i, pid in enumerate(t["passages"]["id"].to_pylist())}
    node_ids = t["nodes"]["id"].to_pylist()
    assert node_ids[n_phr:] == t["passages"]["id"].to_pylist()
    # fact -> passages CSR: the sorted distinct passages of each fact, as the tables list them
    facts = LanceStore.open(home).read(FACTS)
    by_id = dict(zip(facts["id"].to_pylist(), facts["passage_ids"].to_pylist()))
    indptr, indices = np.asarray(a["fact_passage_indptr"]), np.asarray(a["fact_passage_indices"])
    for f, fid in enumerate(t["facts"]["id"].to_pylist()):
        want = sorted({p_at[p] for p in by_id[fid] if p in p_at})
        assert indices[indptr[f] : indptr[f + 1]].tolist() == want
    # synonym pairs point at the phrases the stored edges name
    store = LanceStore.open(home)
    syn = store.read(SYNONYMS)
    pairs = np.asarray(a["synonym_pairs"])
    assert len(pairs) == syn.num_rows > 0
    got = {(node_ids[i], node_ids[j]) for i, j in pairs}
    assert got == set(zip(syn["a"].to_pylist(), syn["b"].to_pylist()))


def test_a_synonym_naming_an_unknown_concept_is_a_snapshot_error(synth_home):
    home, store = synth_home
    syn = store.read(SYNONYMS)
    bad = pa.table({"a": ["c_not_there"], "b": [syn["b"][0].as_py()], "weight": [0.9]})
    store.replace(SYNONYMS, pa.concat_tables([syn, bad.cast(syn.schema)]))
    with pytest.raises(SnapshotError, match="synonyms"):
        build_snapshot(store, home, "hash2-16", force=True)
