"""An incremental build's large tables as the base's file plus a delta
(:mod:`~qortex_core.storage.segmented_table`), not written again row by row.

The facts of an incremental build are the base's rows (:mod:`.snapshot_facts`), reordered by
their cells, with the rows read by id inserted; most of its concepts and passages are the
base's rows too (the same id and name; the same id, whose text it hashes, and the same other
columns: :func:`passage_base_rows`), and so are their rows of the nodes, passages and phrase
keys tables. Where the base's first segment (its whole
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
import pyarrow.compute as pc

from qortex_core.ingest.snapshot_base import Base
from qortex_core.ingest.snapshot_segments import segment_stem
from qortex_core.storage import id_keys
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
    segments, names, paths = [first], [segment_stem(name, digest)], [parts.paths[0]]
    written: dict[str, str] = {str(parts.paths[0]): digest}  # linked, not hashed again
    if len(extra):
        delta = take_scattered(table, extra)  # (e rows) buffers of their own
        path = folder / f"{name}-delta.arrow"
        with HashingWriter(path) as sink:
            write_arrow(delta, sink)
        written[str(path)] = sink.digest()
        segments.append(delta)
        names.append(segment_stem(name, sink.digest()))
        paths.append(path)
    runs_path = folder / f"{runs_stem(name)}.npy"
    with HashingWriter(runs_path) as sink:
        np.lib.format.write_array(sink, runs, allow_pickle=False)
    written[str(runs_path)] = sink.digest()
    return TableParts(tuple(segments), runs, tuple(names), (*paths, runs_path)), written


def passage_base_rows(passages: pa.Table, base: Base | None) -> np.ndarray | None:
    """(n,) each passage's row in the base's passages table where the row is the same, -1
    elsewhere; None without a base of the same columns. A passage id is a digest of its title
    and text, so the same id is the same text; the other columns are compared."""
    old = None if base is None else base.snapshot.tables.get("passages")
    if old is None or old.schema != passages.schema or not passages.num_rows:
        return None
    at = id_keys.index_in(passages["id"], old["id"])  # (n,) base row by id, -1 none
    have = np.flatnonzero(at >= 0)
    same = np.ones(len(have), bool)
    compared = [c for c in passages.column_names if c not in ("id", "title", "text")]
    # (have,) rows of both, taken chunk by chunk: a segmented base's columns are many chunks
    new_rows = take_scattered(passages.select(compared), have)
    old_rows = take_scattered(old.select(compared), at[have])
    for name in compared:
        a, b = new_rows[name], old_rows[name]
        equal = pc.fill_null(pc.equal(a, b), False)  # (have,) both set and equal
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same &= pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
    rows = np.full(passages.num_rows, -1, np.int64)
    rows[have[same]] = at[have[same]]
    return rows


def node_base_rows(
    concept_rows: np.ndarray | None, passage_rows: np.ndarray | None, base: Base | None
) -> np.ndarray | None:
    """(concepts + passages,) each node's row in the base's nodes table (concepts first, then
    passages), -1 for one it lacks; None when either part is unknown."""
    if base is None or concept_rows is None or passage_rows is None:
        return None
    n_base = base.snapshot.n_phrases
    return np.concatenate([concept_rows, np.where(passage_rows >= 0, passage_rows + n_base, -1)])
