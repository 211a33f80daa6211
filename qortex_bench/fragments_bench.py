"""``qortex bench fragments``: what the small fragments of many incremental runs cost a LanceDB
table's reads, and what merging them (:mod:`qortex_core.storage.compaction`) gives back, in
one run.

A table of ``rows`` rows shaped like the concepts table (an id, a name, a 64-float vector) is
written whole, with its key index; then ``runs`` runs each append ``per_run`` rows and delete
one row, as a scheduled ingestion's stages do. The same reads are timed on the one-fragment
table, after the runs and after a compaction: a full scan of ids and vectors, a keyed read of
``keys`` ids through the index, and a row count (each the median of ``repeat``); and a run's
writes, the first and the last runs' and those of runs after the compaction (means of 10)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

NAME = "fragments_bench"


@dataclass(frozen=True)
class FragmentsBenchConfig:
    rows: int = 500_000
    runs: int = 300
    per_run: int = 10
    keys: int = 100
    repeat: int = 3
    workdir: Path | None = None


def _rows(start: int, stop: int) -> pa.Table:
    ids = pa.array([f"c_{i:016x}" for i in range(start, stop)])
    vectors = np.random.default_rng(start).standard_normal((stop - start, 64), np.float32)
    flat = pa.array(vectors.reshape(-1))
    return pa.table({"id": ids, "name": ids, "vector": pa.FixedSizeListArray.from_arrays(flat, 64)})


def _median_s(step: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 4)


def _reads(store, config: FragmentsBenchConfig) -> dict:
    """The timed reads, and the table's fragments."""
    rng = np.random.default_rng(7)
    wanted = [f"c_{i:016x}" for i in rng.integers(0, config.rows, config.keys).tolist()]
    table = store.db.open_table(NAME)
    return {
        "fragments": len(table.to_lance().get_fragments()),
        "scan_s": _median_s(lambda: store.read_columns(NAME, ["id", "vector"]), config.repeat),
        "keyed_read_s": _median_s(
            lambda: store.read_where(NAME, "id", wanted, ["id", "vector"]), config.repeat
        ),
        "count_s": _median_s(lambda: store.count(NAME), config.repeat),
    }


_LAST = 10  # runs whose writes are averaged: the first, the last, and those after compaction


def _run(store, config: FragmentsBenchConfig, run: int) -> float:
    """One run's writes, as a stage's: ``per_run`` rows appended, one row deleted; seconds."""
    start = time.perf_counter()
    at = config.rows + run * config.per_run
    store.append(NAME, _rows(at, at + config.per_run))
    store.delete(NAME, "id", [f"c_{run * 997 % config.rows:016x}"])
    return time.perf_counter() - start


def _mean(seconds: list[float]) -> float:
    return round(sum(seconds) / max(len(seconds), 1), 4)


def _ratios(phase: dict, base: dict) -> dict:
    return {
        k: round(phase[k] / max(base[k], 1e-9), 2) for k in ("scan_s", "keyed_read_s", "count_s")
    }


def run_fragments_bench(config: FragmentsBenchConfig) -> dict:
    """One table through the three phases; their reads and the ratios to the first."""
    from qortex_core.storage import compaction, key_index
    from qortex_core.storage.store import LanceStore, StoreConfig

    root = Path(tempfile.mkdtemp(prefix="qortex-fragments-", dir=config.workdir))
    try:
        store = LanceStore(StoreConfig(root))
        store.replace(NAME, _rows(0, config.rows))
        key_index.keep(store.db.open_table(NAME), "id", min_rows=1)
        whole = _reads(store, config)
        runs = [_run(store, config, run) for run in range(config.runs)]  # not compacted
        piled = _reads(store, config)
        start = time.perf_counter()
        merged = compaction.compact(store.table(NAME))  # the handle the reads use
        compact_s = time.perf_counter() - start
        compacted = _reads(store, config)
        later = [_run(store, config, config.runs + run) for run in range(_LAST)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "config": {k: v for k, v in vars(config).items() if k != "workdir"},
        "one_fragment": whole,
        "after_runs": {
            **piled,
            "first_runs_write_s": _mean(runs[:_LAST]),
            "last_runs_write_s": _mean(runs[-_LAST:]),
        },
        "compacted": {
            **compacted,
            "fragments_merged": merged,
            "compact_s": round(compact_s, 3),
            "next_runs_write_s": _mean(later),
        },
        "after_runs_vs_one": _ratios(piled, whole),
        "compacted_vs_one": _ratios(compacted, whole),
        "compacted_vs_after_runs": _ratios(compacted, piled),
    }
