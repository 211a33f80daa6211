"""An incremental build's fact tables as the base's file plus a delta
(:mod:`~qortex_core.storage.segmented_table`), not written again row by row.

The facts of an incremental build are the base's rows (:mod:`.snapshot_facts`), reordered by
their cells, with the rows read by id inserted. Where the base's first segment (its whole
file, when the base stored the table plainly) still holds most of the rows, the new snapshot
links that file in and writes only a delta (the rows it lacks) and the runs of rows. A delta
past :data:`DELTA_SHARE` of the rows, a base file whose rows are mostly gone
(:data:`KEEP_SHARE`), or more than :data:`MAX_RUNS` runs (each is a chunk of the table a
retriever reads) makes a plain file again: the compaction, whose cost is a full write.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from qortex_core.ingest.snapshot_base import Base
from qortex_core.storage.arrow_access import take_scattered
from qortex_core.storage.checksums import HashingWriter
from qortex_core.storage.segmented_table import TableParts, plain, runs_of_rows, runs_stem
from qortex_core.storage.snapshot_files import write_arrow

DELTA_SHARE = 0.125  # a delta of more than this share of the rows: the table is written whole
KEEP_SHARE = 0.75  # a base file of which fewer rows are still used: written whole
MAX_RUNS = 4096  # more runs of rows (chunks of the loaded table): written whole


def _base_parts(base: Base, name: str) -> tuple[TableParts, str] | None:
    """The base's table ``name`` as parts, and its first segment's checksum; None when the
    base has no such file."""
    snapshot = base.snapshot
    parts = snapshot.table_parts.get(name)
    if parts is None:
        table = snapshot.tables.get(name)
        if table is None or snapshot.path is None:
            return None
        parts = plain(table, Path(snapshot.path) / f"{name}.arrow")
    digest = snapshot.manifest.get("files", {}).get(parts.paths[0].name)
    return None if not isinstance(digest, str) else (parts, digest)


def _stem(name: str, digest: str) -> str:
    """A segment's file stem: the table's name and the tail of the file's checksum."""
    return f"{name}-{digest.rsplit(':', 1)[-1][-12:]}"


def _physical(parts: TableParts, base_rows: np.ndarray) -> np.ndarray | None:
    """(n,) each row's physical row in the base's segments, -1 for a row the base lacks; None
    when ``base_rows`` point past the base's table."""
    base_phys = parts.physical()  # (base rows,)
    known = base_rows >= 0
    if known.any() and int(base_rows.max()) >= len(base_phys):
        return None
    phys = np.full(len(base_rows), -1, np.int64)
    phys[known] = base_phys[base_rows[known]]
    return phys


def segmented_table(
    name: str, table: pa.Table, base_rows: np.ndarray | None, base: Base | None, folder: Path
) -> tuple[TableParts, dict[str, str]] | None:
    """``table`` (the snapshot's, in snapshot order) as the base's first segment plus a delta
    written to ``folder``, and the checksums of the files written (path -> checksum); None
    where a plain file is due (see the module).

    Args:
        base_rows: (n,) each row's row in the base's table, -1 for one it lacks (its rows
            equal the base's where it has them), or None when unknown.
    """
    found = None if base is None or base_rows is None else _base_parts(base, name)
    if found is None or base_rows is None or len(base_rows) != table.num_rows:
        return None
    parts, digest = found
    first = parts.segments[0]
    phys = _physical(parts, np.asarray(base_rows, np.int64))
    if phys is None or first.schema != table.schema:
        return None
    n, held = table.num_rows, first.num_rows
    in_first = (phys >= 0) & (phys < held)
    extra = np.flatnonzero(~in_first)  # (e,) rows the delta holds, in row order
    if len(extra) > DELTA_SHARE * n or int(in_first.sum()) < KEEP_SHARE * held:
        return None
    phys[extra] = held + np.arange(len(extra))
    runs = runs_of_rows(phys, (held,))
    if len(runs) > MAX_RUNS:
        return None
    segments, names, paths = [first], [_stem(name, digest)], [parts.paths[0]]
    written: dict[str, str] = {str(parts.paths[0]): digest}  # linked, not hashed again
    if len(extra):
        delta = take_scattered(table, extra)  # (e rows) buffers of their own
        path = folder / f"{name}-delta.arrow"
        with HashingWriter(path) as sink:
            write_arrow(delta, sink)
        written[str(path)] = sink.digest()
        segments.append(delta)
        names.append(_stem(name, sink.digest()))
        paths.append(path)
    runs_path = folder / f"{runs_stem(name)}.npy"
    with HashingWriter(runs_path) as sink:
        np.lib.format.write_array(sink, runs, allow_pickle=False)
    written[str(runs_path)] = sink.digest()
    return TableParts(tuple(segments), runs, tuple(names), (*paths, runs_path)), written
