"""A table kept as segments and runs of rows reads as the table its rows make, and runs that do
not fit their segments are refused, naming the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from qortex_core.storage.segmented_table import (
    TableParts,
    join_tables,
    runs_of_rows,
    runs_stem,
    table_segments_of,
)


def _segments() -> tuple[pa.Table, pa.Table]:
    base = pa.table({"id": [f"f{i}" for i in range(10)], "n": list(range(10))})
    delta = pa.table({"id": ["d0", "d1", "d2"], "n": [100, 101, 102]})
    return base, delta


def test_runs_break_where_rows_jump_and_where_a_segment_starts():
    phys = np.array([0, 1, 2, 5, 6, 9, 10, 11, 3])
    runs = runs_of_rows(phys, (10,))  # rows 9 and 10 are consecutive but in two segments
    assert runs.tolist() == [[0, 3], [5, 2], [9, 1], [10, 2], [3, 1]]
    assert runs_of_rows(np.zeros(0, np.int64)).shape == (0, 2)


def test_the_joined_table_is_the_rows_of_its_runs_in_order():
    base, delta = _segments()
    phys = np.array([2, 3, 4, 10, 0, 11, 12, 8, 9])  # base rows, delta rows, base rows
    parts = TableParts((base, delta), runs_of_rows(phys, (10,)))
    both = pa.concat_tables([base, delta])
    assert parts.table().equals(both.take(pa.array(phys)))
    assert parts.physical().tolist() == phys.tolist()
    assert parts.table().column(0).num_chunks == len(parts.runs)  # zero-copy slices


def test_join_replaces_the_segments_by_the_table_and_keeps_its_parts(tmp_path: Path):
    base, delta = _segments()
    runs = runs_of_rows(np.array([0, 1, 10, 2]), (10,))
    tables = {"facts-aaa": base, "facts-bbb": delta, "nodes": base}
    arrays = {runs_stem("facts"): runs}
    parts = join_tables({"facts": ["facts-aaa", "facts-bbb"]}, tables, arrays, tmp_path)
    assert sorted(tables) == ["facts", "nodes"] and arrays == {}
    assert tables["facts"]["id"].to_pylist() == ["f0", "f1", "d0", "f2"]
    assert parts["facts"].names == ("facts-aaa", "facts-bbb")
    assert parts["facts"].paths[-1] == tmp_path / "facts-runs.npy"


@pytest.mark.parametrize(
    "runs, why",
    [
        ([[0, 2], [9, 3]], "past its segments"),  # a run that crosses into the delta
        ([[12, 2]], "past its segments"),  # past the delta's end
        ([[-1, 1]], "past its segments"),
        ([[0, 0]], "not \\(start, length\\) pairs"),
        ([0, 2], "not \\(start, length\\) pairs"),
    ],
)
def test_runs_that_do_not_fit_their_segments_are_refused(tmp_path: Path, runs, why):
    base, delta = _segments()
    tables = {"facts-aaa": base, "facts-bbb": delta}
    arrays = {runs_stem("facts"): np.array(runs, np.int64)}
    with pytest.raises(ValueError, match=f"table facts cannot be read: .*{why}"):
        join_tables({"facts": ["facts-aaa", "facts-bbb"]}, tables, arrays, tmp_path)


def test_a_missing_segment_or_runs_file_is_named(tmp_path: Path):
    base, _ = _segments()
    with pytest.raises(ValueError, match="lacks facts-bbb.arrow, facts-runs.npy"):
        join_tables({"facts": ["facts-aaa", "facts-bbb"]}, {"facts-aaa": base}, {}, tmp_path)


def test_a_malformed_manifest_entry_names_no_table():
    manifest = {"table_segments": {"facts": ["facts-aaa"], "bad": [], "worse": [1], "x": "y"}}
    assert table_segments_of(manifest) == {"facts": ["facts-aaa"]}
    assert table_segments_of({"table_segments": ["facts"]}) == {}
