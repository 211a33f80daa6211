"""The snapshot's facts are in cell order, then id order within a cell, however the rows came:
in the base's order with new rows appended (only the cells they joined are sorted again), in
any stored order, or with ids of another format."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from qortex_core.ingest import snapshot_read
from qortex_core.ingest.cells import FactCells


def _cells(home: np.ndarray, n_cells: int) -> FactCells:
    order = np.argsort(home, kind="stable")
    bounds = np.searchsorted(home[order], np.arange(n_cells + 1))
    return FactCells(order, np.zeros((n_cells, 2), np.float32), bounds)


def _want(home: np.ndarray, ids: list[str]) -> np.ndarray:
    return np.array(sorted(range(len(ids)), key=lambda r: (home[r], ids[r])))


@pytest.mark.parametrize("kind", ["base_then_new", "shuffled", "other_format"])
def test_each_cell_holds_its_facts_in_id_order(kind, monkeypatch):
    rng = np.random.default_rng(7)
    n, n_cells = 3000, 300
    ids = [f"f_{int(v):016x}" for v in rng.choice(2**62, n, replace=False)]
    home = rng.integers(0, n_cells, n)
    if kind == "base_then_new":  # the base's rows by cell and id, then 30 new ones
        base = _want(home[:-30], ids[:-30])
        rows = np.r_[base, np.arange(n - 30, n)]
        ids, home = [ids[r] for r in rows], home[rows]
    elif kind == "other_format":
        ids = [f"fact-{v}" for v in rng.permutation(n)]
    cells = _cells(home, n_cells)
    sorted_cells = []
    real_argsort = np.argsort

    def counting(a, *args, **kwargs):
        sorted_cells.append(len(a))
        return real_argsort(a, *args, **kwargs)

    monkeypatch.setattr(snapshot_read.np, "argsort", counting)
    got = snapshot_read._id_order_in_cells(cells, pa.chunked_array([ids]))
    monkeypatch.undo()
    assert np.array_equal(got.order, _want(home, ids))
    if kind == "base_then_new":  # the grouping, then only the cells new facts joined
        assert sorted_cells[0] == n and len(sorted_cells) - 1 <= 30
        assert sum(sorted_cells[1:]) < n // 2
