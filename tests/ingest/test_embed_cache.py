"""The embedding stage's one model call path: vectors equal plain ``encode``, each distinct text
reaches the model once and longest first, the cache is read once and appended once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from qortex_core.embed import HashEmbedder, HashEmbedderConfig, make_embedder
from qortex_core.ingest import embed_cache
from qortex_core.ingest import stages as index
from qortex_core.ingest.embed_cache import CachedEmbedder, LanceVectorCache
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage import ids
from qortex_core.storage.model import Passage, fact_text
from qortex_core.storage.store import CONCEPTS, EMBEDDINGS, FACTS, PASSAGES, LanceStore

DOCS = [
    Passage("Marie Curie was born in Warsaw. She studied at the Sorbonne in Paris.", "Marie Curie"),
    Passage(
        "Pierre Curie married Marie Curie in Sceaux. He taught at the Sorbonne.", "Pierre Curie"
    ),
    Passage("Warsaw is the capital of Poland, on the Vistula River.", "Warsaw"),
]


class Recording(HashEmbedder):
    """The hashing embedder, remembering every batch of texts it was sent."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__(HashEmbedderConfig(dim=dim))
        self.batches: list[list[str]] = []

    def embed(self, texts):
        self.batches.append(list(texts))
        return super().embed(texts)


def _plain(embedder, texts: list[str]) -> np.ndarray:
    """One plain sentence-transformers ``encode`` of ``texts``."""
    return embedder._load().encode(
        texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
    )


def test_stage_vectors_equal_plain_encode(tmp_path, embedder):
    store = LanceStore.open(tmp_path)
    index.build_index(store, tmp_path, DOCS, OfflineExtractor(), embedder)
    passages, concepts, facts = (store.read(t) for t in (PASSAGES, CONCEPTS, FACTS))
    chunks = {p.id: p.full_text for p in index.read_chunks(store)}
    groups = [
        (passages, [chunks[i] for i in passages["id"].to_pylist()]),
        (concepts, concepts["name"].to_pylist()),
        (
            facts,
            [
                fact_text(*t)
                for t in zip(*(facts[c].to_pylist() for c in ("subject", "predicate", "object")))
            ],
        ),
    ]
    assert all(table.num_rows for table, _ in groups)
    stored = np.concatenate([np.array(t["vector"].to_pylist(), np.float32) for t, _ in groups])
    plain = _plain(embedder, [text for _, texts in groups for text in texts])  # (n, 384)
    assert stored.shape == plain.shape
    np.testing.assert_allclose(stored, plain, atol=1e-5)


def test_distinct_texts_reach_the_model_once_longest_first(tmp_path):
    store, model = LanceStore.open(tmp_path), Recording()
    cached = CachedEmbedder(model, LanceVectorCache(store), slice_texts=2)
    groups = [["a b c", "a"], ["a b", "a b c d"], ["a"]]
    out = cached.embed_groups(groups)
    sent = [t for batch in model.batches for t in batch]
    assert sent == ["a b c d", "a b c", "a b", "a"]  # each once, longest first, over all groups
    assert [len(b) for b in model.batches] == [2, 2] and cached.calls == 2
    assert (cached.texts_embedded, cached.cache_hits) == (4, 0)  # hits count cache reads only
    for group, vectors in zip(groups, out):
        np.testing.assert_array_equal(vectors, HashEmbedder(HashEmbedderConfig(32)).embed(group))
    assert store.count(EMBEDDINGS) == 4
    keys = set(store.read(EMBEDDINGS)["key"].to_pylist())
    assert keys == {ids.embedding_key(model.name, t) for t in sent}


def test_second_call_reads_hits_and_appends_only_new_texts(tmp_path):
    store, model = LanceStore.open(tmp_path), Recording()
    CachedEmbedder(model, LanceVectorCache(store)).embed_groups([["x y", "z"]])
    version = store.versions()[EMBEDDINGS]
    model.batches.clear()
    again = CachedEmbedder(model, LanceVectorCache(store))
    out = again.embed_groups([["z", "new text"], ["x y"]])
    assert model.batches == [["new text"]]  # hits never reach the model
    assert (again.texts_embedded, again.cache_hits) == (1, 2)
    assert store.versions()[EMBEDDINGS] == version + 1  # one append
    assert store.count(EMBEDDINGS) == 3
    fresh = HashEmbedder(HashEmbedderConfig(32))
    np.testing.assert_array_equal(out[0], fresh.embed(["z", "new text"]))
    np.testing.assert_array_equal(out[1], fresh.embed(["x y"]))
    model.batches.clear()
    nothing = CachedEmbedder(model, LanceVectorCache(store)).embed_groups([["z"], []])
    assert model.batches == [] and nothing[0].shape == (1, 32) and len(nothing[1]) == 0


class FailsOnSecondCall(Recording):
    def embed(self, texts):
        if self.batches:
            raise RuntimeError("killed")
        return super().embed(texts)


def test_a_killed_run_keeps_the_saved_slices_and_the_next_run_resumes(tmp_path):
    store, texts = LanceStore.open(tmp_path), ["aaaa", "bbb", "cc", "d"]
    broken = CachedEmbedder(FailsOnSecondCall(), LanceVectorCache(store), 2, save_texts=2)
    with pytest.raises(RuntimeError):
        broken.embed_groups([texts])
    assert store.count(EMBEDDINGS) == 2  # the first slice was appended before the failure
    model = Recording()
    out = CachedEmbedder(model, LanceVectorCache(store), 2, save_texts=2).embed_groups([texts])
    assert model.batches == [["cc", "d"]]  # only what was lost is embedded again
    np.testing.assert_array_equal(out[0], HashEmbedder(HashEmbedderConfig(32)).embed(texts))
    assert store.count(EMBEDDINGS) == 4


def test_batch_keys_equal_single_keys():
    texts = ["", "Warsaw", "naïve café", "x" * 5000, "\udcff surrogate"]
    assert ids.embedding_keys("m", texts) == [ids.embedding_key("m", t) for t in texts]
    assert ids.embedding_keys("m", ["a"]) != ids.embedding_keys("n", ["a"])


def test_a_model_of_another_width_starts_the_cache_over(tmp_path):
    store = LanceStore.open(tmp_path)
    CachedEmbedder(Recording(32), LanceVectorCache(store)).embed_groups([["one", "two"]])
    wider = Recording(48)
    out = CachedEmbedder(wider, LanceVectorCache(store)).embed_groups([["one"]])
    assert out[0].shape == (1, 48) and wider.batches == [["one"]]
    cache = store.read(EMBEDDINGS)
    assert cache.num_rows == 1 and cache.schema.field("vector").type.list_size == 48


def test_int8_backend_is_a_separate_model_close_to_the_exact_one(embedder):
    texts = [p.full_text for p in DOCS] + ["Warsaw", "Sorbonne"]
    int8 = make_embedder("minilm-int8")
    assert int8.name != embedder.name  # its own cache keys and manifest name
    exact, approx = embedder.embed(texts), int8.embed(texts)  # (n, 384) each
    cosine = (exact * approx).sum(axis=1)
    assert approx.shape == exact.shape and np.all(cosine > 0.9) and np.all(cosine < 1 - 1e-5)


def test_embedding_cache_round_trip(tmp_path):
    cache = LanceVectorCache(LanceStore.open(tmp_path))
    vectors = {"k1": np.array([1, 0, 0], np.float32), "k2": np.array([0, 0.6, 0.8], np.float32)}
    cache.add(list(vectors), np.stack(list(vectors.values())))
    hit, found = LanceVectorCache(LanceStore.open(tmp_path)).find(["k2", "k3"])
    assert hit.tolist() == [True, False]
    np.testing.assert_array_equal(found[0], vectors["k2"])


def test_cache_lookup_scans_in_batches_and_returns_only_the_wanted_rows(tmp_path):
    store = LanceStore.open(tmp_path)
    rng = np.random.default_rng(3)
    stored = {f"k{i}": rng.random(4).astype(np.float32) for i in range(50)}
    names = list(stored)
    for part in (names[:20], names[20:33], names[33:]):  # three appends: three fragments
        LanceVectorCache(store).add(part, np.stack([stored[k] for k in part]))
    want = ["k49", "nope", "k0", "k21", "k21", "also-not", "k32"]
    hit, found = LanceVectorCache(store, batch_rows=7).find(want)  # 8 batches of at most 7
    assert hit.tolist() == [True, False, True, True, True, False, True]
    assert found.shape == (7, 4)
    for key, h, row in zip(want, hit, found):
        np.testing.assert_array_equal(row, stored[key] if h else np.zeros(4, np.float32))
    assert LanceVectorCache(store).contains(want).tolist() == hit.tolist()
    empty = LanceVectorCache(LanceStore.open(tmp_path / "none"))
    hit, found = empty.find(["k1"])
    assert hit.tolist() == [False] and found.shape[0] == 1
    assert empty.contains([]).tolist() == []


def test_store_scan_and_read_columns_keep_row_order(tmp_path):
    store = LanceStore.open(tmp_path)
    rows = pa.table({"id": [f"r{i}" for i in range(30)], "n": list(range(30))})
    store.replace("t", rows.slice(0, 10))
    store.append("t", rows.slice(10))
    batches = list(store.scan("t", ["n"], batch_rows=4))
    assert all(b.schema.names == ["n"] and b.num_rows <= 4 for b in batches)
    assert [v for b in batches for v in b["n"].to_pylist()] == list(range(30))
    assert store.read_columns("t", ["id"]).column_names == ["id"]
    assert store.read_columns("t", ["id"])["id"].to_pylist() == rows["id"].to_pylist()
    assert list(store.scan("missing", ["n"])) == []
    assert store.read_columns("missing", ["n"]).num_rows == 0


def test_cache_lookup_stays_right_when_another_writer_reorders_the_table(tmp_path):
    store = LanceStore.open(tmp_path)
    rng = np.random.default_rng(4)
    stored = {f"k{i}": rng.random(3).astype(np.float32) for i in range(20)}
    cache = LanceVectorCache(store, batch_rows=6)
    cache.add(list(stored), np.stack(list(stored.values())))
    assert cache.find(["k3"])[0].tolist() == [True]  # its key index now holds the old rows
    reordered = store.read(EMBEDDINGS).take(pa.array(range(19, -1, -1)))
    LanceStore.open(tmp_path).replace(EMBEDDINGS, reordered)  # same size, other rows
    want = ["k3", "k17", "x", "k0", "k3"]
    hit, found = cache.find(want)
    assert hit.tolist() == [True, True, False, True, True]
    for key, h, row in zip(want, hit, found):
        np.testing.assert_array_equal(row, stored[key] if h else np.zeros(3, np.float32))


def test_lookups_read_the_key_column_once_and_follow_their_own_appends(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_cache, "FEW_KEYS", 0)  # the key index, not a filtered query
    store = LanceStore.open(tmp_path)
    cache = LanceVectorCache(store)
    cache.add(["k1", "k2"], np.eye(2, 3, dtype=np.float32))
    scans: list[list[str]] = []
    scan = store.scan

    def counted(name, columns, *args, **kwargs):
        scans.append(list(columns))
        return scan(name, columns, *args, **kwargs)

    monkeypatch.setattr(store, "scan", counted)
    assert cache.find(["k2", "k9"])[0].tolist() == [True, False]
    cache.add(["k9"], 3 * np.ones((1, 3), np.float32))
    hit, found = cache.find(["k9", "k1", "k2"])
    assert hit.tolist() == [True, True, True]
    assert found.tolist() == [[3, 3, 3], [1, 0, 0], [0, 1, 0]]
    assert scans == [["key"]]  # one read of the keys, none after its own append
    LanceVectorCache(store).add(["k5"], np.ones((1, 3), np.float32))  # another cache object
    assert cache.find(["k5"])[0].tolist() == [True]  # another writer's row: keys read again
    assert scans[-1] == ["key"] and scans.count(["key"]) == 2


def test_a_lookup_reads_only_the_rows_it_hits(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_cache, "FEW_KEYS", 0)  # the key index, not a filtered query
    store = LanceStore.open(tmp_path)
    LanceVectorCache(store).add(["k1", "k2"], np.eye(2, 3, dtype=np.float32))
    LanceVectorCache(store).add(["k3", "k4"], 2 * np.eye(2, 3, dtype=np.float32))

    scan = store.scan

    def no_vector_scan(name, columns, *args, **kwargs):
        if "vector" in columns:
            raise AssertionError("the vectors were scanned")
        return scan(name, columns, *args, **kwargs)

    taken: list[list[int]] = []
    take = store.take
    monkeypatch.setattr(store, "scan", no_vector_scan)
    monkeypatch.setattr(store, "take", lambda n, o, c: taken.append(list(o)) or take(n, o, c))
    hit, found = LanceVectorCache(store).find(["new1", "new2", "new1"])
    assert hit.tolist() == [False, False, False] and not found.any() and taken == []
    hit, found = LanceVectorCache(store).find(["k4", "new", "k2", "k4"])
    assert hit.tolist() == [True, False, True, True] and taken == [[1, 3]]
    assert found.tolist() == [[0, 2, 0], [0, 0, 0], [0, 1, 0], [0, 2, 0]]


def test_extraction_json_reads_payloads_a_batch_at_a_time(tmp_path, monkeypatch):
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
    from qortex_core.ingest.chunk_stage import ExtractionJson, read_extraction_json
    from qortex_core.ingest.extract import OfflineExtractor
    from qortex_core.ingest.stages import extract_chunks, sync_chunks

    store = LanceStore.open(tmp_path)
    sync_chunks(store, SynthCorpus(SynthConfig(passages=30, seed=4)).passages())
    key = OfflineExtractor().cache_key
    extract_chunks(store, OfflineExtractor(), 8)
    chunk_ids = sorted(store.read("chunks")["id"].to_pylist()) + ["p_never_extracted"]
    whole = read_extraction_json(store, key, chunk_ids)
    taken: list[int] = []
    take = store.take
    monkeypatch.setattr(store, "take", lambda n, o, c: taken.append(len(o)) or take(n, o, c))
    lazy = ExtractionJson(store, key, chunk_ids, batch=7)
    assert len(lazy) == len(whole) == 30 and "p_never_extracted" not in lazy
    assert taken == []  # membership and length read no payload
    assert {p: lazy[p] for p in chunk_ids if p in lazy} == whole
    assert max(taken) <= 7 and sum(taken) == 30  # each batch fetched once, in order
    assert lazy.get("p_never_extracted") is None


def test_many_appends_between_lookups_keep_every_key_at_its_row(tmp_path):
    store = LanceStore.open(tmp_path)
    cache = LanceVectorCache(store, batch_rows=16)
    rng = np.random.default_rng(5)
    stored: dict[str, np.ndarray] = {}
    for part in range(5):
        keys = [f"p{part}-k{i}" for i in range(30)]
        vectors = rng.random((30, 4)).astype(np.float32)
        cache.add(keys, vectors)  # appended after the index was read: merged in place
        stored.update(zip(keys, vectors))
        want = list(stored)[::7] + ["missing"]
        hit, found = cache.find(want)
        assert hit.tolist() == [k in stored for k in want]
        for key, row in zip(want[:-1], found[:-1]):
            np.testing.assert_array_equal(row, stored[key])
    fresh_hit, fresh = LanceVectorCache(store).find(list(stored))  # an index read from scratch
    assert fresh_hit.all()
    np.testing.assert_array_equal(fresh, cache.find(list(stored))[1])


def test_key_index_appends_merge_log_structured_and_find_each_keys_first_row():
    from qortex_core.ingest.embed_cache import _hashes, _KeyIndex

    rng = np.random.default_rng(5)
    stored = [f"k{i}" for i in rng.integers(0, 300, 200)]  # repeats: the first row must win
    index = _KeyIndex(_hashes(stored), np.arange(len(stored)), len(stored))
    first: dict[str, int] = {}
    for row, key in enumerate(stored):
        first.setdefault(key, row)
    for _ in range(400):  # small appends, each made a run and merged while runs do not halve
        keys = [f"k{i}" for i in rng.integers(0, 3000, int(rng.integers(1, 40)))]
        for row, key in enumerate(keys, index.count):
            first.setdefault(key, row)
        index.appended(keys)
        sizes = [h.size for h, _ in index.runs]
        assert all(a > 2 * b for a, b in zip(sizes, sizes[1:]))  # each run twice the newer
    n = index.count
    assert len(index.runs) <= np.log2(n) + 2
    assert index.merged <= 2 * n * np.log2(n)  # one sorted array copied ~n^2 / 40 keys here
    want = [f"k{i}" for i in range(0, 3100, 7)]
    assert index.rows_of(want).tolist() == [first.get(k, -1) for k in want]


def test_a_few_keys_are_asked_for_by_a_filter_without_reading_every_key(tmp_path, monkeypatch):
    store = LanceStore.open(tmp_path)
    LanceVectorCache(store).add([f"k{i}" for i in range(50)], np.ones((50, 3), np.float32))
    LanceVectorCache(store).add(["k'q"], 2 * np.ones((1, 3), np.float32))

    def no_scan(*args, **kwargs):
        raise AssertionError("the key column was read in full")

    monkeypatch.setattr(store, "scan", no_scan)
    hit, found = LanceVectorCache(store).find(["k'q", "nope", "k7", "k'q"])
    assert hit.tolist() == [True, False, True, True]
    assert found.tolist() == [[2, 2, 2], [0, 0, 0], [1, 1, 1], [2, 2, 2]]
    assert LanceVectorCache(store).contains(["k49", "k50"]).tolist() == [True, False]
