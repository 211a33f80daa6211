"""Publishing a built snapshot: arrays that are staged files (the vectors, or the base's file
and a delta) linked in, the fact, node, passage and phrase key tables kept as the base's file
and a delta where most rows are the base's (:mod:`.snapshot_table_segments`), everything else
written."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, cast

import numpy as np
import pyarrow as pa

from qortex_core.ingest.snapshot_base import Base
from qortex_core.ingest.snapshot_facts import FACT_LINKS
from qortex_core.ingest.snapshot_table_segments import (
    node_base_rows,
    passage_base_rows,
    segmented_table,
)
from qortex_core.storage import snapshot as snap
from qortex_core.storage.phrase_keys import PHRASE_KEYS
from qortex_core.storage.segmented_rows import SegmentedRows, rows_stem
from qortex_core.storage.segmented_table import MANIFEST_KEY as TABLE_SEGMENTS
from qortex_core.storage.segmented_table import TableParts
from qortex_core.storage.segmented_table import runs_stem as table_runs_stem
from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotTables
from qortex_core.storage.store import FACTS

Split = dict[str, tuple[TableParts, dict[str, str]]]  # table -> its parts, checksums by path


def base_rows_of(
    tables: SnapshotTables,
    extra: dict[str, pa.Table],
    fact_rows: np.ndarray | None,
    concept_rows: np.ndarray | None,
    base: Base | None,
) -> dict[str, tuple[pa.Table, np.ndarray | None]]:
    """The tables a build may keep as the base's file and a delta, each with its rows' rows in
    the base (``fact_rows``, ``concept_rows``: the facts' and concepts', snapshot order)."""
    passage_rows = passage_base_rows(tables.passages, base)
    found = {
        FACTS: (tables.facts, fact_rows),
        FACT_LINKS: (extra.get(FACT_LINKS), fact_rows),
        "passages": (tables.passages, passage_rows),
        "nodes": (tables.nodes, node_base_rows(concept_rows, passage_rows, base)),
        PHRASE_KEYS: (extra.get(PHRASE_KEYS), concept_rows),
    }
    return {name: (t, rows) for name, (t, rows) in found.items() if t is not None}


def split_tables(
    tables: dict[str, tuple[pa.Table, np.ndarray | None]], base: Base | None, folder: Path
) -> Split:
    """The ``tables`` (name -> the table, each row's row in the base's table or -1) kept as
    the base's file and a delta (:mod:`.snapshot_table_segments`) where most rows are the
    base's; the others are written whole."""
    split = {}
    for name, (table, base_rows) in tables.items():
        got = segmented_table(name, table, base_rows, base, folder)
        if got is not None:
            split[name] = got
    return split


def publish(
    home: str | Path,
    arrays: SnapshotArrays,
    tables: SnapshotTables,
    manifest: dict,
    verify: Callable[[str], None] | None = None,
    extra: dict[str, pa.Table] | None = None,
    digests: dict[str, str] | None = None,
    joined: Split | None = None,
) -> Path:
    """Publish the snapshot; arrays that are memory maps of finished staged ``.npy`` files (the
    vectors, :func:`.snapshot_read.staged`) are linked in rather than written again, with
    their checksums from ``digests`` (path -> digest) where it was taken as they were staged;
    so are the segments and runs of the tables ``joined`` (:func:`split_tables`), which are
    not written whole."""
    data = arrays.as_dict()
    files = {
        name: Path(a.filename)
        for name, a in data.items()
        if isinstance(a, np.memmap) and a.filename is not None
    }
    split = {n: cast(SegmentedRows, a) for n, a in data.items() if isinstance(a, SegmentedRows)}
    for name, a in split.items():  # the base's file and the delta, linked; the row map too
        files.update(zip((*a.names, rows_stem(name)), a.paths))
    if split:
        manifest = dict(manifest, segments={name: list(a.names) for name, a in split.items()})
    kept = {name: a for name, a in data.items() if name not in files and name not in split}
    given = dict(digests or {})
    joined = joined or {}
    for name, (parts, written) in joined.items():  # the base's file, a delta and the runs
        files.update(zip((*parts.names, table_runs_stem(name)), parts.paths))
        given.update(written)
    if joined:
        segments = {name: list(parts.names) for name, (parts, _) in joined.items()}
        manifest = dict(manifest, **{TABLE_SEGMENTS: segments})
    tables_of = {**tables.as_dict(), **(extra or {})}  # ``extra``: what the next build reads
    tables_of = {name: t for name, t in tables_of.items() if name not in joined}
    published = snap.Snapshot(arrays=kept, tables=tables_of, manifest=manifest)
    known = {name: given[str(p)] for name, p in files.items() if str(p) in given}
    # the facts and their links, views of the base's rows: written by blocks, never whole
    return snap.publish(
        home, published, files=files, check=verify, digests=known, blocked=(FACTS, FACT_LINKS)
    )
