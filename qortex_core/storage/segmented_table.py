"""A snapshot's Arrow table kept as a base file plus a delta file, read as one table.

The facts of an incremental snapshot build are the previous snapshot's fact rows, in a new
order with a few rows inserted and removed. Instead of writing every row again, the build
links the previous snapshot's file in (a hard link: no byte copied), writes the rows that file
lacks to a small delta file, and stores the runs of rows: row ``i`` of the table is physical
row ``i`` of the runs laid end to end, each run ``(start, length)`` a range of physical rows
of the segments laid end to end. :func:`join_tables` reads them as the table a full build
writes: the same rows, as zero-copy slices of the segments' memory maps (one chunk a run).

As :mod:`.segmented_rows` does for vector arrays; the manifest's ``table_segments`` names each
such table's segments (file stems, ``.arrow``), and ``{name}-runs.npy`` holds its runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

RUNS_SUFFIX = "-runs"  # the runs file's stem is the table's name and this
MANIFEST_KEY = "table_segments"


@dataclass(frozen=True)
class TableParts:
    """A table as segments and runs.

    Attributes:
        segments: the segment tables (memory-mapped files), of one schema.
        runs: (k, 2) int64 physical start and length of each run, in row order.
        names: each segment's file stem in the snapshot folder.
        paths: each segment's file, then the runs file's (a build links them on).
    """

    segments: tuple[pa.Table, ...]
    runs: np.ndarray
    names: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()

    @property
    def starts(self) -> np.ndarray:
        """(segments + 1,) the physical row each segment starts at, then the total."""
        return np.cumsum([0] + [s.num_rows for s in self.segments]).astype(np.int64)

    def physical(self) -> np.ndarray:
        """(n,) int64 each row's physical row."""
        if not len(self.runs):
            return np.zeros(0, np.int64)
        lengths = self.runs[:, 1]
        ahead = np.cumsum(lengths) - lengths  # (k,) the row each run starts at
        return np.repeat(self.runs[:, 0] - ahead, lengths) + np.arange(int(lengths.sum()))

    def table(self) -> pa.Table:
        """The rows in order: one zero-copy slice of a segment per run."""
        starts = self.starts
        pieces = []
        for start, length in self.runs.tolist():
            k = int(np.searchsorted(starts, start, side="right")) - 1
            pieces.append(self.segments[k].slice(start - int(starts[k]), length))
        if not pieces:
            return self.segments[0].slice(0, 0)
        return pa.concat_tables(pieces)


def runs_of_rows(phys: np.ndarray, bounds: Sequence[int] = ()) -> np.ndarray:
    """(k, 2) int64 runs ``(start, length)`` of consecutive physical rows ``phys``, in order,
    none crossing one of the segment ``bounds`` (the physical rows segments start at)."""
    phys = np.asarray(phys, np.int64)
    if not len(phys):
        return np.zeros((0, 2), np.int64)
    cut = (np.diff(phys) != 1) | np.isin(phys[1:], np.asarray(bounds, np.int64))
    starts = np.flatnonzero(cut) + 1  # (k - 1,) where a run starts
    at = np.concatenate([[0], starts])
    lengths = np.diff(np.append(at, len(phys)))
    return np.stack([phys[at], lengths], axis=1).astype(np.int64)


def plain(table: pa.Table, path: Path) -> TableParts:
    """A table stored whole (``path``) as one segment and one run."""
    return TableParts((table,), np.array([[0, table.num_rows]], np.int64), (path.stem,), (path,))


def runs_stem(name: str) -> str:
    """The file stem of table ``name``'s runs."""
    return f"{name}{RUNS_SUFFIX}"


def table_segments_of(manifest: dict) -> dict[str, list[str]]:
    """The tables the manifest stores as segments and runs: table name -> its segments' file
    stems (a malformed entry is none: the table is then missing)."""
    return stems_under(manifest, MANIFEST_KEY)


def stems_under(manifest: dict, key: str) -> dict[str, list[str]]:
    """The manifest's map ``key`` of names to segment file stems, malformed entries left out
    (``segments`` for arrays, :data:`MANIFEST_KEY` for tables)."""
    found = manifest.get(key)
    if not isinstance(found, dict):
        return {}
    return {
        k: list(v)
        for k, v in found.items()
        if isinstance(k, str) and isinstance(v, list) and v and all(isinstance(s, str) for s in v)
    }


def _within(runs: np.ndarray, starts: np.ndarray) -> bool:
    """Whether every run lies inside one segment (``starts``: where each begins, then the end)."""
    if not len(runs):
        return True
    first = runs[:, 0]
    if int(first.min()) < 0 or int(first.max()) >= int(starts[-1]):
        return False
    k = np.searchsorted(starts, first, side="right") - 1  # (runs,) each run's segment
    return bool((first + runs[:, 1] <= starts[k + 1]).all())


def _assemble(
    name: str,
    stems: Sequence[str],
    tables: dict[str, pa.Table],
    arrays: dict[str, Any],
    folder: Path,
) -> TableParts:
    missing = [f"{s}.arrow" for s in stems if s not in tables]
    missing += [] if runs_stem(name) in arrays else [f"{runs_stem(name)}.npy"]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    segments = tuple(tables.pop(s) for s in stems)
    if len({s.schema for s in segments}) != 1:
        raise ValueError("its segments differ in their columns")
    runs = np.asarray(arrays.pop(runs_stem(name)))
    bad_shape = runs.ndim != 2 or runs.shape[1:] != (2,) or runs.dtype.kind not in "iu"
    if bad_shape or (len(runs) and (runs[:, 1] < 1).any()):
        raise ValueError("its runs are not (start, length) pairs")
    if not _within(runs, np.cumsum([0] + [s.num_rows for s in segments])):
        raise ValueError("its runs point past its segments")
    paths = tuple(folder / f"{s}.arrow" for s in stems) + (folder / f"{runs_stem(name)}.npy",)
    return TableParts(segments, runs.astype(np.int64), tuple(stems), paths)


def join_tables(
    split: dict[str, list[str]], tables: dict[str, pa.Table], arrays: dict[str, Any], folder: Path
) -> dict[str, TableParts]:
    """Replace, in ``tables`` (a loaded snapshot's ``.arrow`` files by stem), each table of
    ``split`` (name -> its segments' stems) by its rows, taking its runs out of ``arrays``;
    each such table's parts.

    Raises:
        ValueError: one names the table that cannot be read, and why.
    """
    parts = {}
    for name, stems in split.items():
        try:
            parts[name] = _assemble(name, stems, tables, arrays, folder)
        except ValueError as exc:
            raise ValueError(f"table {name} cannot be read: {exc}") from None
        tables[name] = parts[name].table()
    return parts
