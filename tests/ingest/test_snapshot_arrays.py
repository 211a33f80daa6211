"""The snapshot's link arrays, built with Arrow lookups, match the stored tables row by row;
a synonym edge naming an unknown concept is a SnapshotError, not a crash."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import SnapshotError
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stages import build_index, build_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, RULES, SYNONYMS, LanceStore


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
        build_snapshot(store, home, "hash3-16", force=True)


def test_snapshot_tables_and_vectors_match_the_stored_rows(synth_home):
    home, store = synth_home
    rules = store.read(RULES)
    assert rules.num_rows > 0
    concepts, passages = store.read(CONCEPTS), store.read(PASSAGES)
    # one more rule naming a concept twice, an unknown concept and passages of two domains
    odd_passages = [passages["id"][0].as_py(), passages["id"][-1].as_py(), "p_gone"]
    odd = {
        "id": ["r_odd"],
        "text": ["odd rule"],
        "concepts": [[concepts["id"][1].as_py(), "c_gone", concepts["id"][0].as_py()] * 2],
        "category": ["x"],
        "confidence": [0.5],
        "passage_ids": [odd_passages],
        "vector": [rules["vector"][0].as_py()],
    }
    store.replace(RULES, pa.concat_tables([rules, pa.table(odd).cast(rules.schema)]))
    domains = ["synth"] * (passages.num_rows - 1) + ["alpha"]  # listed after "synth" above
    passages = passages.set_column(
        passages.schema.get_field_index("domain"), "domain", pa.array(domains)
    )
    store.replace(PASSAGES, passages)
    build_snapshot(store, home, "hash3-16", force=True)
    loaded = snap.load(home)
    t, a = loaded.tables, loaded.arrays
    node_at = {nid: i for i, nid in enumerate(t["nodes"]["id"].to_pylist())}
    domain = dict(zip(passages["id"].to_pylist(), passages["domain"].to_pylist()))
    stored = {r["id"]: r for r in store.read(RULES).to_pylist()}
    got = t["rules"].to_pylist()
    assert sorted(r["id"] for r in got) == sorted(stored)
    for row in got:
        want = stored[row["id"]]
        assert row["concept_nodes"] == [node_at[c] for c in want["concepts"] if c in node_at]
        assert row["domains"] == sorted({domain[p] for p in want["passage_ids"] if p in domain})
    assert {r["id"]: r["domains"] for r in got}["r_odd"] == ["alpha", "synth"]
    # every vector array holds each row's stored vector, in snapshot order
    for name, array, ids in (
        (PASSAGES, "passage_vectors", t["passages"]["id"]),
        (CONCEPTS, "phrase_vectors", t["nodes"]["id"][: concepts.num_rows]),
        (FACTS, "fact_vectors", t["facts"]["id"]),
    ):
        rows = store.read(name)
        by_id = dict(zip(rows["id"].to_pylist(), rows["vector"].to_pylist()))
        want = np.array([by_id[i] for i in ids.to_pylist()], np.float32)
        assert np.array_equal(np.asarray(a[array]), want)


def test_a_table_changed_while_the_snapshot_reads_it_is_a_snapshot_error(synth_home, monkeypatch):
    home, store = synth_home
    latest = snap.latest_name(home)
    read_columns = store.read_columns

    def read_then_write(name, columns):  # another writer appends between the two reads
        rows = read_columns(name, columns)
        if name == CONCEPTS and "passage_ids" in columns:  # the snapshot's read of the rows
            full = store.read(CONCEPTS)
            store.append(CONCEPTS, full.slice(0, 1).set_column(0, "id", pa.array(["c_new"])))
        return rows

    monkeypatch.setattr(store, "read_columns", read_then_write)
    with pytest.raises(SnapshotError, match="concepts changed"):
        build_snapshot(store, home, "hash3-16", force=True)
    assert snap.latest_name(home) == latest  # nothing published


def test_a_build_counts_the_dangling_links_the_table_check_counts(synth_home):
    from qortex_core.ops.table_checks import dangling_edges

    home, store = synth_home
    clean = build_snapshot(store, home, "hash3-16", force=True)
    assert clean.dangling == dangling_edges(store) == {"fact": 0, "synonym": 0, "contains": 0}
    concepts = store.read(CONCEPTS)
    lists = concepts["passage_ids"].to_pylist()
    lists[0], lists[3] = [*lists[0], "p_gone", "p_gone2"], [*lists[3], "p_gone"]
    at = concepts.schema.get_field_index("passage_ids")
    kind = concepts.schema.field("passage_ids").type
    store.replace(CONCEPTS, concepts.set_column(at, "passage_ids", pa.array(lists, kind)))
    found = build_snapshot(store, home, "hash3-16", force=True).dangling
    assert found == dangling_edges(store) == {"fact": 0, "synonym": 0, "contains": 3}


def test_node_order_and_contained_passages_follow_the_stored_lists(synth_home):
    home, store = synth_home
    concepts, facts = store.read(CONCEPTS), store.read(FACTS)
    lists = concepts["passage_ids"].to_pylist()
    lists[0] = [*lists[0], lists[0][0], "p_gone"]  # a passage listed twice, one not stored
    at = concepts.schema.get_field_index("passage_ids")
    kind = concepts.schema.field("passage_ids").type
    concepts = concepts.set_column(at, "passage_ids", pa.array(lists, kind))
    store.replace(CONCEPTS, concepts.take(pa.array(np.arange(concepts.num_rows)[::-1])))
    build_snapshot(store, home, "hash3-16", force=True)
    loaded = snap.load(home)
    n_phr = int(loaded.manifest["counts"]["phrases"])
    nodes = loaded.tables["nodes"]["id"].to_pylist()
    passage_ids = set(store.read(PASSAGES)["id"].to_pylist())
    listed = dict(zip(concepts["id"].to_pylist(), lists))
    # hubs first, ties by id: a concept weighs its listed passages and its facts' occurrences
    weight = {c: float(len(p)) for c, p in listed.items()}
    for row in facts.select(["subject_id", "object_id", "passage_ids"]).to_pylist():
        for end in (row["subject_id"], row["object_id"]):
            weight[end] += len(row["passage_ids"])
    assert nodes[:n_phr] == sorted(listed, key=lambda c: (-weight[c], c))
    named = Counter(p for ps in lists for p in ps if p in passage_ids)
    assert nodes[n_phr:] == sorted(passage_ids, key=lambda p: (-named[p], p))
    counts = np.asarray(loaded.arrays["phrase_passage_count"]).tolist()
    assert counts == [len({p for p in listed[c] if p in passage_ids}) for c in nodes[:n_phr]]
    indptr, indices = (
        np.asarray(loaded.arrays["adj_indptr"]),
        np.asarray(loaded.arrays["adj_indices"]),
    )
    at = {nid: i for i, nid in enumerate(nodes)}
    for i, c in enumerate(nodes[:n_phr]):  # a phrase's passage neighbours: the ones it lists
        got = {int(j) for j in indices[indptr[i] : indptr[i + 1]] if j >= n_phr}
        assert got == {at[p] for p in listed[c] if p in passage_ids}
