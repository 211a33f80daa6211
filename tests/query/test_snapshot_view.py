"""The snapshot view keeps no Python object per node or passage, and answers as the lists did."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from conftest import BRIDGE_QUESTION

from qortex_core.feedback.learned import LearnedFeedback, factor_vector
from qortex_core.query.phrases import lexical_matches, phrase_lookup
from qortex_core.query.retriever import Retriever
from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage import ids
from qortex_core.storage import snapshot as snap
from qortex_core.storage.arrow_access import (
    ArrowRows,
    ArrowStrings,
    Codes,
    HashLookup,
    key_hash,
    string_hashes,
)
from qortex_core.storage.phrase_keys import phrase_key, phrase_keys

QUESTIONS = (BRIDGE_QUESTION, "Who painted the harbour at Ostrania?", "Orlan Vesk")


def _python_containers(value: object, n: int) -> list[str]:
    """Names of Python lists, dicts, sets or tuples of ``n`` or more items inside ``value``."""
    found = []
    if isinstance(value, (list, dict, set, tuple)) and len(value) >= n:
        found.append(type(value).__name__)
    for inner in vars(value).values() if hasattr(value, "__dict__") else ():
        if isinstance(inner, (list, dict, set, tuple)) and len(inner) >= n:
            found.append(type(inner).__name__)
    return found


def test_view_holds_arrow_and_numpy_only(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    view = retriever.view
    n = min(view.n_phrases, view.n_passages)
    assert n >= 5  # the toy graph is big enough for the check to mean something
    allowed = (np.ndarray, sp.spmatrix, pa.Table, ArrowStrings, ArrowRows, HashLookup, Codes)
    for f in fields(view):
        value = getattr(view, f.name)
        if f.name == "rule_index" or isinstance(value, (str, int, float)):
            continue
        if f.name == "fact_index":  # big snapshots only: centroids, bounds, a sparse matrix
            parts = () if value is None else vars(value).values()
            assert all(isinstance(a, (np.ndarray, sp.spmatrix)) for a in parts)
            continue
        if f.name in ("fact_passages", "fact_sources"):
            arrays = value if f.name == "fact_passages" else vars(value).values()
            assert all(isinstance(a, np.ndarray) for a in arrays)
            continue
        assert isinstance(value, allowed), f.name
        assert not _python_containers(value, n), f.name
    assert isinstance(view.node_ids.column, (pa.Array, pa.ChunkedArray))
    assert isinstance(view.passages.table, pa.Table)
    assert view.phrase_index.hashes.dtype == np.int64 and view.domains.codes.dtype == np.int32
    assert isinstance(retriever.memory.phrase_ids, (pa.Array, pa.ChunkedArray))
    assert retriever.lexical is None or isinstance(retriever.lexical.row_of, HashLookup)
    # the passage-to-concept block shares the adjacency's arrays instead of copying them
    block = view.passage_phrases()
    assert np.shares_memory(block.data, view.adjacency.data)
    expected = view.adjacency[view.n_phrases :, : view.n_phrases].toarray()
    assert np.array_equal(block.toarray(), expected)


def test_hits_read_the_rows_they_name(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    table = retriever.snapshot.tables["passages"].to_pylist()
    rows = {p["id"]: p for p in table}
    nodes = retriever.snapshot.tables["nodes"].to_pylist()
    name_of = {r["id"]: r["name"] for r in nodes}
    seeded = 0
    for text in QUESTIONS:
        for mode in ("dense", "hipporag"):
            result = retriever.query(text, top_k=4, mode=mode)
            assert result.passages
            for hit in result.passages:
                row = rows[hit.id]
                assert (hit.title, hit.text, hit.domain) == (
                    row["title"],
                    row["text"],
                    row["domain"],
                )
                assert all(cid in name_of for cid in hit.concept_ids)
            seeded += len(result.seeds)
            for seed in result.seeds:
                assert name_of[seed.node_id] == seed.name
            for concept in result.concepts:
                assert name_of[concept.id] == concept.name
    assert seeded > 0  # the walk ran and its seeds were named
    # the view's on-demand rows are the table's rows
    view = retriever.view
    assert list(view.passages) == table and view.passages[-1] == table[-1]
    assert view.passages.take([2, 0]) == [table[2], table[0]]
    assert view.node_names.take([1, 0]) == [nodes[1]["name"], nodes[0]["name"]]
    with pytest.raises(IndexError):
        view.passages[len(table)]


def test_hashed_phrase_index_matches_the_dict_it_replaced(toy_home, embedder):
    view = Retriever.open(toy_home, embedder=embedder).view
    names = list(view.node_names[: view.n_phrases])
    reference = phrase_lookup(names)
    assert len(view.phrase_index) == sum(phrase_key(n) is not None for n in names)
    for key, row in reference.items():
        assert view.phrase_index.get(key) == row
    assert view.phrase_index.get("no such concept anywhere") is None
    for text in QUESTIONS + tuple(names[:20]):
        assert lexical_matches(text, view.phrase_index) == lexical_matches(text, reference)


def test_lookup_keeps_the_first_row_and_reads_chunked_columns():
    column = pa.chunked_array([pa.array(["Ann Lee", "bob", None]), pa.array(["ann  lee!", "Cy"])])
    lookup = HashLookup.build(ArrowStrings(column), ids.normalize_phrase)
    assert lookup.get("ann lee") == 0 and lookup.get("cy") == 4 and lookup.get("dan") is None
    assert lookup.rows_of(["bob", "dan", "ann lee"]).tolist() == [1, -1, 0]
    strings = ArrowStrings(column)
    assert strings.take([3, 0, 2]) == ["ann  lee!", "Ann Lee", None]
    assert strings[1:4].take([0, 2]) == ["bob", "ann  lee!"] and len(strings[1:4]) == 3
    assert list(strings) == column.to_pylist()
    table = pa.Table.from_batches(
        [pa.record_batch({"a": [1, 2]}), pa.record_batch({"a": [3]})]
    )  # two chunks
    assert ArrowRows(table).take([2, 0]) == [{"a": 3}, {"a": 1}] and ArrowRows(table)[-1] == {
        "a": 3
    }


def test_domain_codes_mask_as_an_object_array_would():
    values = ["a", None, "b", "a", "c"]
    codes = Codes.of(pa.chunked_array([pa.array(values[:2]), pa.array(values[2:])]))
    assert set(codes.names) == {"a", "b", "c"} and codes.codes[1] == -1
    for wanted in (["a"], ["b", "c"], ["zzz"], ["a", "b", "c"]):
        expected = np.isin(np.array(values, dtype=object), wanted)
        assert codes.mask(wanted).tolist() == expected.tolist()
    assert Codes.of(pa.array([], pa.string())).mask(["a"]).shape == (0,)


def test_factors_map_onto_arrow_phrase_ids_as_onto_a_list():
    ids_list = ["c1", "c2", "c3", "c4"]
    block = sp.csr_matrix(np.ones((2, 4), np.float32))
    arrow = LearnedFeedback(
        None, ArrowStrings(pa.chunked_array([ids_list[:1], ids_list[1:]])), block
    )
    assert (
        arrow.phrase_ids.to_pylist()
        == LearnedFeedback(None, ids_list, block).phrase_ids.to_pylist()
    )
    factors = {"c3": 2.5, "gone": 9.0, "c1": 0.25}
    at = {cid: i for i, cid in enumerate(ids_list)}  # the dict the Arrow lookup replaced
    expected = np.ones(4, np.float32)
    for cid, f in factors.items():
        if cid in at:
            expected[at[cid]] = f
    assert factor_vector(arrow.phrase_ids, factors).tolist() == expected.tolist()
    assert factor_vector(arrow.phrase_ids, {}).tolist() == [1.0] * 4


NAMES = [
    "Ann Lee",
    "ann  lee!",
    "The Who",
    "of the",
    "AB",
    "a b c",
    "R2-D2",
    "  x--y  z ",
    "",
    None,
    "one two three four five six",
    "one two three four five six seven",
    "Café Müller",
    "KELVIN \u212a",
    "\u0130stanbul",
    "tab\tsep",
    "new\nline",
    "São Paulo",
    "x",
    "New York",
    "the 1st",
    "123",
    "a1 b2",
    "...",
    "Zoë",
    "it is",
    "Dr. No",
    "ÅNGSTRÖM unit",
]


def test_column_phrase_keys_equal_phrase_key_of_each_name():
    rng = np.random.default_rng(0)
    words = ["the", "Of", "ann", "LEE", "x", "café", "2", "-", "New", "york", "\u212a", "ab"]
    made = [" ".join(rng.choice(words, rng.integers(0, 9))) for _ in range(2000)]
    for names in (NAMES, made):
        column = pa.chunked_array(
            [pa.array(names[:7], pa.string()), pa.array(names[7:], pa.string())]
        )
        got = phrase_keys(column).to_pylist()
        assert got == [None if v is None else phrase_key(v) for v in names]
        assert phrase_keys(column, max_words=2).to_pylist() == [
            None if v is None else phrase_key(v, 2) for v in names
        ]
    assert phrase_keys(pa.chunked_array([], pa.string())).to_pylist() == []


def test_lookup_hashes_are_stable_across_processes():
    column = pa.array(["Ann Lee", "", "Café", None])
    code = (
        "import pyarrow as pa; from qortex_core.storage.arrow_access import string_hashes;"
        "print(string_hashes(pa.array(['Ann Lee', '', 'Café', None])).tolist())"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }  # fmt: skip
    assert seen == {str(string_hashes(column).tolist())}
    assert string_hashes(column)[0] == key_hash("Ann Lee") != key_hash("ann lee")
    assert string_hashes(column)[1] == string_hashes(column)[3] == key_hash("")
    sliced = pa.array(["zz", "Ann Lee", "Café"]).slice(1)  # a non-zero array offset
    assert string_hashes(sliced).tolist() == [key_hash("Ann Lee"), key_hash("Café")]


def test_lookup_with_precomputed_keys_refuses_a_length_mismatch():
    values = ArrowStrings(pa.array(["Ann Lee", "bob"]))
    lookup = HashLookup.build(values, phrase_key, phrase_keys(values.column))
    assert lookup.get("ann lee") == 0 and lookup.get("bob") == 1 and lookup.get("lee") is None
    with pytest.raises(ValueError, match="1 keys for 2 values"):
        HashLookup.build(values, phrase_key, pa.array(["x"]))


@pytest.mark.parametrize(
    "kind",
    [pa.string(), pa.large_string(), pa.string_view(), pa.dictionary(pa.int32(), pa.string())],
)
def test_phrase_keys_and_hashes_take_any_string_column(kind):
    names = ["Foo Bar", "Héllo wörld", None, "the", "Foo Bar"]
    column = pa.array(names, pa.string()).cast(kind)
    assert phrase_keys(column).to_pylist() == [None if v is None else phrase_key(v) for v in names]
    assert string_hashes(column).tolist()[:2] == [key_hash("Foo Bar"), key_hash("Héllo wörld")]
    lookup = HashLookup.build(ArrowStrings(column), phrase_key, phrase_keys(column))
    assert lookup.get("foo bar") == 0 and lookup.get(None) is None  # type: ignore[arg-type]


def test_stored_phrase_lookup_is_mapped_and_answers_as_one_built_at_open(toy_home, embedder):
    from dataclasses import replace as with_arrays

    loaded = snap.load(toy_home)
    hashes = loaded.arrays["phrase_key_hashes"]
    assert isinstance(hashes, np.memmap) and len(hashes)  # stored by the build: nothing hashed
    view = SnapshotView.of(loaded)
    assert np.shares_memory(view.phrase_index.hashes, hashes)
    older = {k: v for k, v in loaded.arrays.items() if not k.startswith("phrase_key_")}
    built = SnapshotView.of(with_arrays(loaded, arrays=older)).phrase_index  # built at open
    assert np.array_equal(built.hashes, hashes)
    assert np.array_equal(built.rows, loaded.arrays["phrase_key_rows"])
    names = view.node_names[: view.n_phrases]
    for row, name in enumerate(names):
        key = phrase_key(name)
        if key is not None:
            assert view.phrase_index.get(key) == built.get(key)
            assert names[view.phrase_index.get(key)] is not None


def test_a_phrase_lookup_that_disagrees_is_a_shape_problem():
    from qortex_core.storage.snapshot_shapes import shape_problems

    good = {
        "phrase_key_hashes": np.arange(3, dtype=np.int64),
        "phrase_key_rows": np.arange(3, dtype=np.int32),
    }
    assert shape_problems(good, {}, {"phrases": 3}) == []
    short = dict(good, phrase_key_rows=np.arange(2, dtype=np.int32))
    assert shape_problems(short, {}, {"phrases": 3}) == [
        "the phrase lookup's hashes and rows disagree"
    ]
    assert "3 keys for 2 phrases" in shape_problems(good, {}, {"phrases": 2})[0]
