"""Rows kept as views of a memory-mapped table until they are written: what is written holds
only those rows, in the same bytes however the rows were chunked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from qortex_core.storage import arrow_access, snapshot_files
from qortex_core.storage.arrow_access import owned, runs_of, take_scattered
from qortex_core.storage.checksums import HashingWriter
from qortex_core.storage.snapshot_files import write_arrow

N = 3_000


def _mapped(tmp_path) -> pa.Table:
    """A table of N rows read back from an Arrow IPC file by memory map (as a base snapshot's)."""
    rows = pa.table(
        {
            "id": [f"SECRET{i:05d}" if i % 500 == 7 else f"f{i:05d}" for i in range(N)],
            "passage_ids": [
                [f"p{i}", f"SECRETP{i}"] if i % 500 == 7 else [f"p{i}"] for i in range(N)
            ],
            "n": pa.array([None if i % 11 == 0 else i for i in range(N)], pa.int64()),
        }
    )
    with HashingWriter(tmp_path / "base.arrow") as sink:
        write_arrow(rows, sink)
    return pa.ipc.open_file(pa.memory_map(str(tmp_path / "base.arrow"))).read_all()


def _written(tmp_path, name: str, table: pa.Table, blocks: bool) -> bytes:
    with HashingWriter(tmp_path / name) as sink:
        write_arrow(table, sink, blocks=blocks)
    return (tmp_path / name).read_bytes()


def test_runs_of_keeps_the_rows_as_views_and_a_blocked_write_holds_only_them(tmp_path, monkeypatch):
    base = _mapped(tmp_path)
    left_out = np.flatnonzero(np.arange(N) % 500 == 7)  # the rows with SECRET in them
    order = np.setdiff1d(np.arange(N), left_out)
    viewed = runs_of(base, order)
    assert all(c.num_chunks == len(left_out) + 1 for c in viewed.columns)  # one per run: views
    want = base.take(pa.array(order))
    assert viewed.equals(want)
    monkeypatch.setattr(snapshot_files, "BLOCK_ROWS", 1_024)  # several blocks, runs across them
    blocked = _written(tmp_path, "views.arrow", viewed, blocks=True)
    assert b"SECRET" not in blocked  # a view's parent buffers are not written
    # the same bytes as the rows taken into one chunk: a full build's and a merged one's agree
    assert blocked == _written(tmp_path, "taken.arrow", want.combine_chunks(), blocks=True)
    back = pa.ipc.open_file(str(tmp_path / "views.arrow")).read_all()
    assert back.equals(want) and back.column("id").num_chunks == 3  # 2,994 rows by 1,024
    # owned: one chunk per column in buffers of its own, a lone slice too
    lone = owned(base.slice(10, 400))
    assert all(c.num_chunks == 1 for c in lone.columns) and lone.equals(base.slice(10, 400))
    assert b"SECRET" not in _written(tmp_path, "lone.arrow", lone, blocks=False)


@pytest.mark.parametrize(
    "order",
    [
        np.arange(10, 400),  # one run, part of the table: a lone slice keeps the rest
        np.random.default_rng(0).permutation(N),  # not runs
    ],
    ids=["lone-slice", "scattered"],
)
def test_runs_of_copies_what_would_keep_rows_left_out(tmp_path, order):
    base = _mapped(tmp_path)
    got = runs_of(base, order)
    assert got.equals(base.take(pa.array(order)))
    assert all(c.num_chunks == 1 for c in got.columns)
    data = got.column("id").chunk(0).buffers()[2]  # its rows' bytes only, in memory
    assert data.size == pc.sum(pc.binary_length(got["id"])).as_py() and data.is_mutable


def test_runs_of_every_row_in_order_keeps_a_chunked_table_and_copies_a_lone_one(tmp_path):
    base = _mapped(tmp_path)
    every = np.arange(N)
    two = pa.concat_tables([base.slice(0, 1_000), base.slice(1_000)])
    assert runs_of(two, every) is two  # several chunks already: copied when written
    one = runs_of(base, every)
    assert one is not base and one.equals(base)


def test_more_runs_than_the_bound_are_taken(tmp_path, monkeypatch):
    base = _mapped(tmp_path)
    monkeypatch.setattr(arrow_access, "RUNS_PER_ROW", 1 / 1_000)  # 3 runs at most
    got = runs_of(
        base,
        np.concatenate(
            [np.arange(0, 100), np.arange(200, 300), np.arange(400, 500), np.arange(600, 700)]
        ),
    )
    assert all(c.num_chunks == 1 for c in got.columns)


def test_a_scattered_take_from_many_chunks_equals_arrows_take() -> None:
    """Rows taken batch by batch (a column of many chunks is never combined whole) are Arrow's
    ``take``: any order, repeats, chunks that do not line up across columns, empty chunks."""
    table = pa.table(
        {
            "id": pa.chunked_array([["a", "b"], [], ["c", "d", "e"], ["f"]]),
            "n": pa.chunked_array([[0], [1, 2, 3], [4, 5]]),
        }
    )
    for rows in ([5, 0, 2, 2, 1, 4], [3], [], list(range(6))[::-1]):
        got = take_scattered(table, np.array(rows, np.int64))
        assert got.to_pydict() == table.take(pa.array(rows, pa.int64())).to_pydict()
        assert all(column.num_chunks == 1 for column in got.columns)
