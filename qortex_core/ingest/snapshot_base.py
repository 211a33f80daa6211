"""The previous snapshot as the base of the next one: an incremental merge of its vector rows.

A snapshot stays one complete, immutable folder (readers need nothing new). What a run with a
usable base saves is the vectors and the fact index: a passage, concept or fact row whose id and
embedded text are the base's (a passage's id is the digest of its text; a concept's vector is
its name's, a fact's its subject, predicate and object) keeps the base's vector, read from the
base's memory-mapped file; only the new and changed rows' vectors are read from LanceDB, by row
offset, and no permutation pass is needed. The fact cells are a function of the fact set
(:mod:`.snapshot_cells`), so the base's cells are updated rather than computed again. The graph
arrays and tables are built from the stored tables as in a full build, in the same order, so
the published snapshot equals a full rebuild's.

A base that cannot be used (none published, damaged, another embedding model or width) makes a
full build, with one log line and the reason in the report; so does a change that passes
:data:`FULL_FRACTION` of a table's rows (reading every vector in order is then cheaper).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import QortexError
from qortex_core.ingest import snapshot_vectors as vectors
from qortex_core.ingest.snapshot_segments import segmented
from qortex_core.storage import id_keys
from qortex_core.storage import snapshot as snap
from qortex_core.storage.checksums import HashingWriter
from qortex_core.storage.segmented_rows import SegmentedRows
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, LanceStore

_log = logging.getLogger(__name__)
FULL_FRACTION = 0.5  # a table whose new or changed rows pass this share is read in full
_TAKE_ROWS = 65_536  # rows of one read by offset

# the snapshot array of each table's vectors, and the key columns that fix a row's vector
ARRAYS = {PASSAGES: "passage_vectors", CONCEPTS: "phrase_vectors", FACTS: "fact_vectors"}
SEGMENTED = (CONCEPTS, FACTS)  # kept as the base's file plus a delta (passages: scanned whole)
KEYS = {
    PASSAGES: ("id",),
    CONCEPTS: ("id", "name"),
    FACTS: ("id", "subject", "predicate", "object"),  # a fact's vector is of its three parts
}


@dataclass(frozen=True)
class RowChange:
    """Rows of one run against its base, over passages, concepts and facts."""

    added: int = 0
    changed: int = 0
    removed: int = 0

    def __add__(self, other: RowChange) -> RowChange:
        return RowChange(
            self.added + other.added, self.changed + other.changed, self.removed + other.removed
        )


def log_full(reason: str) -> None:
    """The one log line of a full build that had a previous snapshot."""
    _log.info("graph_snapshot: full build: %s", reason)


def latest(home: str | Path) -> tuple[snap.Snapshot | None, str]:
    """The latest published snapshot, verified, or None and why it cannot serve as a base."""
    try:
        return snap.load(home), ""
    except QortexError as exc:
        if not (snap.snapshots_dir(home) / snap.POINTER).exists():
            return None, "no previous snapshot"
        reason = f"previous snapshot unusable: {exc}"
        _log.warning("graph_snapshot: full build: %s", reason)  # the one line of this build
        return None, reason


@dataclass(frozen=True)
class Base:
    """A usable base: its vector arrays and each table's key columns in the base's row order."""

    snapshot: snap.Snapshot

    @classmethod
    def of(cls, latest: snap.Snapshot | None, embedding_model: str) -> tuple[Base | None, str]:
        """``latest`` as a base, or None and why not (one log line when it exists)."""
        if latest is None:
            return None, ""
        if latest.manifest.get("embedding_model") != embedding_model:
            reason = "the embedding model changed"
            log_full(reason)
            return None, reason
        return cls(latest), ""

    def keys(self, name: str) -> pa.Table:
        """The base's key columns of table ``name``, row i = row i of its vector array."""
        if name == PASSAGES:
            return self.snapshot.tables["passages"].select(["id"])
        if name == FACTS:
            return self.snapshot.tables["facts"].select(list(KEYS[FACTS]))
        nodes = self.snapshot.tables["nodes"].slice(0, self.snapshot.n_phrases)
        return nodes.select(["id", "name"])

    def files(self) -> dict[str, str]:
        """The base's files by name, with their checksums."""
        return dict(self.snapshot.manifest.get("files", {}))

    def vectors(self, name: str) -> np.ndarray:
        return self.snapshot.arrays[ARRAYS[name]]

    def fact_bounds(self, layout: dict) -> np.ndarray | None:
        """The base's fact cell bounds when its cells have ``layout`` (:mod:`.snapshot_cells`),
        else None (no cells, or cells of another layout or size: they are built in full)."""
        bounds = self.snapshot.arrays.get("fact_cell_bounds")
        if self.snapshot.manifest.get("fact_cells") != layout or bounds is None:
            return None
        return np.asarray(bounds) if len(bounds) > 1 else None


def reused(keys: pa.Table, base: pa.Table) -> tuple[np.ndarray, np.ndarray, RowChange]:
    """(base row of each row or -1, rows whose vector the base holds, the change counts)."""
    if keys.num_rows == 0:  # every row removed (an empty table may have no column types)
        return np.zeros(0, np.int64), np.zeros(0, bool), RowChange(0, 0, base.num_rows)
    rows = id_keys.index_in(keys["id"], base["id"])  # (n,) -1: a new row
    found = rows >= 0
    same = found.copy()
    hit = pa.array(rows[found])
    for column in keys.column_names[1:]:
        equal = pc.equal(keys[column].filter(pa.array(found)), base[column].take(hit))
        same[found] &= equal.fill_null(False).to_numpy(zero_copy_only=False)
    held = np.zeros(base.num_rows, bool)  # a mask, not np.unique: no sort of every row
    held[rows[found]] = True
    kept = int(held.sum())
    change = RowChange(int((~found).sum()), int((found & ~same).sum()), base.num_rows - kept)
    return rows, same, change


def fetch(
    store: LanceStore,
    name: str,
    offsets: np.ndarray,
    ids: pa.Array,
    read: tuple[pa.Array, np.ndarray] | None = None,
) -> np.ndarray:
    """(len(offsets), d) vectors of the stored rows at ``offsets``, checked against ``ids``
    (read in offset order, a block at a time, then put in the order asked); of the rows
    ``read`` holds (ids, vectors: read by id already) when given, by their ids.

    Raises:
        SnapshotError: the table changed since the stage read its rows.
    """
    from qortex_core.storage.store import arrow_to_vectors

    if read is not None:
        at = pc.index_in(ids, value_set=read[0])
        if at.null_count:
            raise vectors.changed(name)
        return read[1][at.to_numpy(zero_copy_only=False)]

    order = np.argsort(offsets, kind="stable")  # (f,) Lance takes rows in offset order
    want = ids.take(pa.array(order))
    parts = []
    for s in range(0, len(offsets), _TAKE_ROWS):
        at = offsets[order[s : s + _TAKE_ROWS]]
        rows = store.take(name, at.tolist(), ["id", "vector"])
        if not rows["id"].equals(pa.chunked_array([want.slice(s, _TAKE_ROWS)])):
            raise vectors.changed(name)
        dim = rows.schema.field("vector").type.list_size
        parts.append(arrow_to_vectors(rows["vector"], dim))
    if not parts:
        return np.zeros((0, 1), np.float32)
    out = np.empty((len(offsets), parts[0].shape[1]), np.float32)
    out[order] = np.concatenate(parts)
    return out


def write_merged(
    store: LanceStore,
    name: str,
    keys: pa.Table,
    offsets: np.ndarray,
    base: Base,
    path: Path,
    known: tuple[np.ndarray, np.ndarray, RowChange] | None = None,
    read: tuple[pa.Array, np.ndarray] | None = None,
) -> tuple[RowChange, np.ndarray | SegmentedRows | None]:
    """Write table ``name``'s vectors in snapshot order to the ``.npy`` file ``path``: the base's
    vector for each unchanged row, LanceDB's for the others.

    Args:
        store: the store.
        name: passages, concepts or facts.
        keys: the table's key columns (:data:`KEYS`) in snapshot order.
        offsets: (n,) each row's offset in the stored table.
        base: the base snapshot.
        path: the file to write.
        known: :func:`reused` of ``keys`` when the caller has it already.
        read: the new and changed rows' ids and vectors, where they were read by id (see
            :func:`fetch`).

    Returns:
        The change against the base, and the merged vectors (None when the merge does not
        pay: the caller reads the table in full): a memory map of ``path``, or for the
        facts and concepts, where most rows are the base file's, that file and a delta
        (:mod:`.snapshot_segments`).
    """
    rows, same, change = reused(keys, base.keys(name)) if known is None else known
    n, old = keys.num_rows, base.vectors(name)
    if n and (change.added + change.changed) > FULL_FRACTION * n:
        return change, None
    fresh = np.flatnonzero(~same)  # (f,) snapshot rows read from LanceDB
    got = fetch(
        store, name, offsets[fresh], keys["id"].take(pa.array(fresh)).combine_chunks(), read
    )
    dim = old.shape[1] if old.ndim == 2 and len(old) else got.shape[1]
    if len(got) and got.shape[1] != dim:
        return change, None  # another width: the base's vectors are of no use
    if name in SEGMENTED and n:
        split = segmented(ARRAYS[name], old, base.files(), rows, same, got, path)
        if split is not None:
            return change, split
    with HashingWriter(path) as fh:
        vectors.write_header(fh, n, dim if n else 1)
        step = max(1, vectors.BLOCK_BYTES // max(4 * dim, 1))
        cursor = 0
        for s in range(0, n, step):
            block = np.empty((min(step, n - s), dim), np.float32)
            keep = same[s : s + step]
            block[keep] = old[rows[s : s + step][keep]]
            k = int((~keep).sum())
            block[~keep] = got[cursor : cursor + k]
            cursor += k
            fh.write(block.data.cast("B"))
            vectors.release(old)  # one block of the base's file resident at a time
    vectors.WRITTEN.record(path, fh.digest())
    return change, vectors.load(path)
