"""Integer id keys (qortex_core.storage.id_keys) give Arrow's string kernels' results."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from qortex_core.storage import id_keys
from qortex_core.storage.ids import concept_id, fact_id


def _arrow_index_in(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    at = pc.index_in(values, value_set=value_set).fill_null(-1)
    return np.asarray(at.to_numpy(zero_copy_only=False), np.int64)


def _ids(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [concept_id(f"name {int(v)}") for v in rng.integers(0, 10 * n, n)]


@pytest.fixture(params=["numpy", "compiled"])
def packing(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """Ids packed by the numpy pass (small columns) or the compiled one (from ``HASHED`` ids,
    which also looks them up in a compiled hash)."""
    if request.param == "compiled":
        monkeypatch.setattr(id_keys, "HASHED", 1)
    return request.param


def test_both_packings_give_the_same_keys() -> None:
    ids = pa.chunked_array([pa.array(_ids(700, 7)), pa.array(_ids(300, 8))]).slice(5, 990)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(id_keys, "HASHED", 1)
        compiled = id_keys.packed(ids)
    numpy = id_keys.packed(ids)
    assert compiled is not None and numpy is not None and compiled[0] == numpy[0] == b"c_"
    assert compiled[1].dtype == np.uint64 and np.array_equal(compiled[1], numpy[1])


def test_real_ids_pack_in_string_order(packing: str) -> None:
    ids = pa.array(_ids(2000, 0))
    packed = id_keys.packed(ids)
    assert packed is not None and packed[0] == b"c_"
    got = id_keys.sort_indices(ids)
    assert np.array_equal(got, pc.sort_indices(ids).to_numpy())
    ranked = packed[1][got]
    assert (ranked[1:] >= ranked[:-1]).all()


@pytest.mark.parametrize("hashed", [False, True])
def test_index_in_matches_arrow_with_repeats_and_misses(
    hashed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(id_keys, "HASHED", 1 if hashed else 1 << 60)
    held = _ids(3000, 1)
    held = held + held[:50]  # repeated values: the first occurrence is the answer
    asked = _ids(2000, 2) + held[100:400]
    values, value_set = pa.array(asked), pa.chunked_array([held[:1000], held[1000:]])
    got = id_keys.index_in(values, value_set)
    assert np.array_equal(got, _arrow_index_in(values, value_set.combine_chunks()))
    assert (got >= 0).sum() >= 300
    assert np.array_equal(id_keys.is_in(values, value_set), got >= 0)
    # the other side larger (the table over the values): a few asked of many held
    few = pa.array(held[2990:3010] + asked[:3])
    assert np.array_equal(
        id_keys.index_in(few, value_set), _arrow_index_in(few, value_set.combine_chunks())
    )
    assert np.array_equal(id_keys.index_in(values, few), _arrow_index_in(values, few))


@pytest.mark.parametrize(
    "odd",
    [
        ["C_00000000000000ff"],  # another prefix case
        ["c_00000000000000FF"],  # upper-case hex
        ["c_ff"],  # another length
        [None],
        [fact_id("a", "b", "c")],  # another kind in the same column
    ],
)
def test_other_formats_take_the_string_kernels(odd: list, packing: str) -> None:
    base = _ids(500, 3)
    values = pa.array(base[:200] + odd, pa.string())
    value_set = pa.array(base[100:] + odd, pa.string())
    assert id_keys.packed(values) is None
    got = id_keys.index_in(values, value_set)
    assert np.array_equal(got, _arrow_index_in(values, value_set))
    if odd[0] is not None:
        assert np.array_equal(id_keys.sort_indices(values), pc.sort_indices(values).to_numpy())


def test_kinds_never_match_and_empty_sets() -> None:
    concepts = pa.array(_ids(100, 4))
    facts = pa.array([fact_id(str(i), "p", "o") for i in range(100)])
    assert (id_keys.index_in(concepts, facts) == -1).all()
    assert not id_keys.is_in(concepts, pa.array([], pa.string())).any()
    assert len(id_keys.index_in(pa.array([], pa.string()), concepts)) == 0


def test_sliced_and_large_string_columns(packing: str) -> None:
    ids = pa.array(_ids(1000, 5))
    part = ids.slice(300, 400)
    assert np.array_equal(id_keys.sort_indices(part), pc.sort_indices(part).to_numpy())
    wide = pc.cast(part, pa.large_string())
    assert np.array_equal(id_keys.index_in(wide, ids), _arrow_index_in(part, ids))


def _rows(n: int) -> pa.Table:
    """A table of ids, names and a list column, in three chunks."""
    ids = _ids(n, 6)
    lists = [[f"p{i}", f"q{i}"][: i % 3] for i in range(n)]
    table = pa.table({"id": ids, "name": [f"n{i}" for i in range(n)], "passage_ids": lists})
    return pa.concat_tables(
        [table.slice(0, n // 3), table.slice(n // 3, n // 3), table.slice(2 * (n // 3))]
    )


@pytest.mark.parametrize("kind", ["kept", "inserted", "shuffled", "empty"])
def test_take_rows_is_arrows_take_in_one_chunk(kind: str) -> None:
    from qortex_core.storage.arrow_access import take_rows, view_rows

    table, rng = _rows(3000), np.random.default_rng(7)
    if kind == "kept":  # a base with a few rows removed: runs
        order = np.flatnonzero(rng.random(3000) > 0.005)
    elif kind == "inserted":  # a few rows moved elsewhere: runs with jumps
        order = np.arange(3000)
        moved = rng.choice(3000, 20, replace=False)
        order = np.concatenate([np.delete(order, moved), moved])
    elif kind == "shuffled":
        order = rng.permutation(3000)
    else:
        order = np.zeros(0, np.int64)
    got = take_rows(table, order)
    assert got.equals(table.take(pa.array(order, pa.int64())))
    assert all(column.num_chunks <= 1 for column in got.columns)
    assert view_rows(table, order).equals(got)  # the same rows, as views where runs


def test_take_rows_of_one_run_keeps_no_bytes_of_the_rows_left_out(tmp_path) -> None:
    from qortex_core.storage.arrow_access import take_rows

    secret = "Zorblax" + "9f" * 6
    table = pa.table({"id": ["a", "b", "c", "d"], "text": ["one", "two", "three", secret]})
    kept = take_rows(table, np.arange(3))  # one run: the last row left out
    path = tmp_path / "kept.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, kept.schema) as writer:
        writer.write_table(kept)
    assert secret.encode() not in path.read_bytes()
    assert kept.equals(table.slice(0, 3))
