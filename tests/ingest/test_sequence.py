"""Conversational structure: neighbouring items of one dated source, as graph edges."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_core.errors import ConfigError
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphInput, build_adjacency
from qortex_core.ingest.sequence import SequenceConfig, sequence_pairs, sequence_weights
from qortex_core.ingest.stages import build_index
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Passage
from qortex_core.storage.store import LanceStore

DAY1, DAY1_LATE, DAY9 = "2023-05-08T13:56:00Z", "2023-05-08T20:00:00Z", "2023-05-16T09:00:00Z"


def _pairs(docs, when, domains=None, config=SequenceConfig()):
    a, b, d = sequence_pairs(docs, when, domains or ["default"] * len(docs), config)
    return sorted(zip(a.tolist(), b.tolist(), d.tolist()))


def test_turns_are_ordered_by_time_then_item_with_numbers_compared_as_numbers():
    docs = ["c#D1:10", "c#D1:2", "c#D1:9", "c#D1:1"]  # shuffled; 10 after 9, not after 1
    pairs = _pairs(docs, [DAY1] * 4, config=SequenceConfig(window=1))
    assert pairs == [(1, 2, 1), (2, 0, 1), (3, 1, 1)]  # D1:1 -> D1:2 -> D1:9 -> D1:10
    wide = _pairs(docs, [DAY1] * 4, config=SequenceConfig(window=3))
    assert (3, 0, 3) in wide and len(wide) == 3 + 2 + 1  # every pair within 3 places


def test_no_edge_across_sources_domains_long_gaps_or_without_structure():
    docs = ["a#1", "a#2", "b#3", "plain-doc", "a#4", "c#1", "c#2"]
    when = [DAY1, DAY1, DAY1, DAY1, DAY9, DAY1, None]
    assert _pairs(docs, when) == [(0, 1, 1)]  # a#4 is a week later; c#2 has no time
    assert _pairs(["x#1", "x#2"], [DAY1, DAY1], ["work", "home"]) == []
    assert _pairs(["x#1", "x#2"], [DAY1, DAY1_LATE]) == []  # 6 hours apart: another sitting
    assert _pairs(["x#1", "x#2"], [DAY1, DAY1_LATE], config=SequenceConfig(gap_s=86400)) == [
        (0, 1, 1)
    ]
    assert _pairs(["x#1", "x#2"], [DAY1, DAY1], config=SequenceConfig(weight=0)) == []
    assert _pairs(["p1", "p2", "p3"], [None] * 3) == []  # an encyclopedia: nothing


def test_weights_fall_with_distance_and_bad_config_is_refused():
    np.testing.assert_allclose(
        sequence_weights(np.array([1, 2, 4]), SequenceConfig(2.0)), [2, 1, 0.5]
    )
    for bad in ({"window": 0}, {"window": 1.5}, {"weight": -1.0}, {"gap_s": float("nan")}):
        with pytest.raises(ConfigError):
            SequenceConfig(**bad)


def test_sequence_edges_join_passage_nodes_symmetrically():
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    seq = (np.array([0, 0]), np.array([1, 2]), np.array([2.0, 1.0], np.float32))
    contains = np.array([[0, 0], [1, 0]])
    adj = build_adjacency(GraphInput(1, 3, np.zeros((0, 2)), contains, empty, None, seq))
    dense = adj.toarray()  # nodes: phrase 0, passages 1..3
    assert dense[1, 2] == dense[2, 1] == 2.0 and dense[1, 3] == dense[3, 1] == 1.0
    assert dense[1, 0] == dense[2, 0] == 1.0 and dense[2, 3] == 0  # containment unchanged


def _turn(n: int, text: str, when: str | None, doc: str = "chat") -> Passage:
    return Passage(f"Speaker{n % 2}: {text}", "", f"{doc}#D1:{n}", time=when)


def test_snapshot_links_conversation_turns_and_leaves_documents_alone(tmp_path, embedder):
    texts = ["we adopted a puppy called Miso", "what breed is Miso?", "a shiba inu", "lovely!"]
    turns = [_turn(n, t, DAY1) for n, t in enumerate(texts, 1)]
    home = tmp_path / "chat"
    build_index(LanceStore.open(home), home, turns, OfflineExtractor(), embedder)
    loaded = snap.load(home)
    assert loaded.manifest["sequence"] == {"edges": 3 + 2 + 1, "passages": 4}
    n, adj = loaded.n_phrases, loaded.adjacency
    row = {p["doc_id"]: i for i, p in enumerate(loaded.tables["passages"].to_pylist())}
    first, second, fourth = (n + row[f"chat#D1:{k}"] for k in (1, 2, 4))
    assert adj[first, second] == adj[second, first] == 2.0 and np.isclose(adj[first, fourth], 2 / 3)
    docs = [Passage(t, f"Doc {k}", f"doc{k}.md") for k, t in enumerate(texts)]
    plain = tmp_path / "docs"
    build_index(LanceStore.open(plain), plain, docs, OfflineExtractor(), embedder)
    flat = snap.load(plain)
    assert flat.manifest["sequence"] == {"edges": 0, "passages": 0}
    m = flat.n_phrases
    assert flat.adjacency[m:, m:].nnz == 0  # no passage-to-passage edge


def test_written_memories_are_one_stream_per_domain_in_time_order():
    from qortex_core.ingest.sequence import MEMORY_DOCS
    from qortex_core.memory.records import DOC_PREFIX

    assert MEMORY_DOCS == DOC_PREFIX
    docs = ["memory:zz", "memory:aa", "memory:mm", "memory:no-time", "memory:later"]
    when = ["2023-05-08T13:56:02Z", "2023-05-08T13:56:00Z", "2023-05-08T13:56:01Z", None, DAY9]
    assert _pairs(docs, when, config=SequenceConfig(window=1)) == [(1, 2, 1), (2, 0, 1)]


def test_passages_stored_before_times_were_kept_build_a_snapshot_without_sequence(
    tmp_path, embedder
):
    """A home whose passages table predates the ``time`` column still publishes a snapshot."""
    from qortex_core.ingest.snapshot_stage import build_snapshot
    from qortex_core.storage.store import PASSAGES

    turns = [_turn(n, t, DAY1) for n, t in enumerate(["hi Miso", "Miso is a shiba", "ok"], 1)]
    home = tmp_path / "old"
    store = LanceStore.open(home)
    build_index(store, home, turns, OfflineExtractor(), embedder)
    assert snap.load(home).manifest["sequence"]["edges"] == 3
    store.db.open_table(PASSAGES).drop_columns(["time"])  # as written by older code
    assert "time" not in LanceStore.open(home).read(PASSAGES).schema.names
    report = build_snapshot(LanceStore.open(home), home, embedder.name, force=True)
    loaded = snap.load(home)
    assert loaded.manifest["name"] == report.name != ""
    assert loaded.manifest["sequence"] == {"edges": 0, "passages": 0}
    assert loaded.tables["passages"].num_rows == 3
