"""What the embedding stage's tables were built from, one row per chunk, and how the current
chunks differ from it.

The ``embedded_chunks`` table holds, for every chunk the passages, concepts, facts and rules
tables were last built from, the chunk's columns that reach those tables (``doc_id``,
``title``, ``domain``, ``time``, ``ingested_at``; the id is the hash of its text) and its
successful extraction payload under the stage's extractor (null when it had none), and the
ids of the concepts that payload lists (``listed``: what a concept's domains are made of). The
current inputs are read column-wise (the chunks table without its texts, the extractions of
that extractor) and compared with the stored rows by id with Arrow compute: no Python object
per chunk. The comparison reads each payload's BLAKE3 digest, which Lance computes
(:data:`DIGEST`), not the payloads: an incremental run then reads the payloads of the chunks
it merges again, by id (:class:`LazyInputs`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest import row_changes
from qortex_core.ingest.chunk_stage import ok_extractions
from qortex_core.storage import id_keys
from qortex_core.storage.store import CHUNKS, WHERE_IN_MAX, LanceStore

EMBEDDED_CHUNKS = "embedded_chunks"  # the stage's record of the chunks its tables hold
PLACE = ("doc_id", "title", "domain", "time", "ingested_at")  # a passage row's other columns
COLUMNS = ("id", *PLACE, "payload")
LISTED = pa.list_(pa.string())
READ_STATE = "embeddings_read"  # stage-state row: the chunks' and extractions' versions compared
DIGEST = "payload_digest"  # a payload's BLAKE3, computed by Lance: a diff reads no payload
_DIGEST_SQL = "digest(payload, 'blake3')"


def _string_column(rows: pa.Table, name: str) -> pa.Array | pa.ChunkedArray:
    """``rows[name]`` as strings; nulls when the table predates the column."""
    if name in rows.column_names:
        return pc.cast(rows[name], pa.string())
    return pa.nulls(rows.num_rows, pa.string())


def current_inputs(
    store: LanceStore, extractor_key: str, digests: bool = False, only: list[str] | None = None
) -> pa.Table:
    """Every chunk's :data:`COLUMNS` now (in stored order): its successful payload under
    ``extractor_key`` or null; with ``digests`` the payload's :data:`DIGEST` instead (Lance
    hashes the payloads: none is read); ``only``: the rows of those chunk ids (at most
    :data:`~qortex_core.storage.store.WHERE_IN_MAX`)."""
    table = store.open_latest(CHUNKS)
    names = table.schema.names if table is not None else []
    columns = [c for c in ("id", *PLACE) if c in names]
    if only is None:
        chunks = store.read_columns(CHUNKS, columns)
    else:
        chunks = store.read_where(CHUNKS, "id", only, columns) if columns else pa.table({})
    payload_column = DIGEST if digests else "payload"
    if chunks.num_rows == 0:
        return _empty(payload_column)
    asked = {"passage_id": "passage_id", payload_column: _DIGEST_SQL if digests else "payload"}
    found = ok_extractions(store, extractor_key, asked, only)
    payload = pa.nulls(chunks.num_rows, pa.binary() if digests else pa.string())
    if found.num_rows:
        at = pc.index_in(chunks["id"], value_set=found["passage_id"])  # null where none
        payload = found[payload_column].take(at)
    columns_now = {c: _string_column(chunks, c) for c in ("id", *PLACE)}
    return pa.table({**columns_now, payload_column: payload})


def empty_inputs() -> pa.Table:
    return _empty("payload")


def _empty(payload_column: str) -> pa.Table:
    kind = {DIGEST: pa.binary()}
    return pa.table(
        {c: pa.array([], kind.get(c, pa.string())) for c in (*COLUMNS[:-1], payload_column)}
    )


def has_record(store: LanceStore) -> bool:
    """Whether the record exists (with its ``listed`` column)."""
    table = store.open_latest(EMBEDDED_CHUNKS)
    return table is not None and "listed" in table.schema.names


def stored_inputs(
    store: LanceStore, digests: bool = False, only: list[str] | None = None
) -> pa.Table | None:
    """The stored record (:data:`COLUMNS` and ``listed``, in stored order), or None when
    there is none (or one without the ``listed`` column); with ``digests`` the payload's
    :data:`DIGEST` instead of the payload and no ``listed``; ``only``: those chunk ids' rows
    (at most :data:`~qortex_core.storage.store.WHERE_IN_MAX`)."""
    table = store.open_latest(EMBEDDED_CHUNKS)
    if table is None or "listed" not in table.schema.names:
        return None
    columns: list[str] | dict[str, str] = [*COLUMNS, "listed"]
    if digests:  # recorded with the row where the record has the column, else hashed now
        digest = DIGEST if DIGEST in table.schema.names else _DIGEST_SQL
        columns = {**{c: c for c in COLUMNS[:-1]}, DIGEST: digest}
    if only is None:
        rows = store.read_columns(EMBEDDED_CHUNKS, columns)
    else:
        rows = store.read_where(EMBEDDED_CHUNKS, "id", only, columns)
    if rows.num_rows == 0 and not digests:
        return empty_inputs().append_column("listed", pa.array([], LISTED))
    return rows if rows.num_rows else _empty(DIGEST)


def _differs(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """(n,) True where the strings differ (two nulls are the same)."""
    same = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return ~pc.or_(same, both_null).to_numpy(zero_copy_only=False)


@dataclass(frozen=True)
class ChunkDiff:
    """The current chunks against the stored record (ids sorted).

    ``added``: chunks not in the record; ``removed``: recorded chunks gone; ``moved``: chunks
    whose passage row changes (document, title, domain or times); ``reextracted``: chunks whose
    payload or domain changed (what the concepts, facts and rules tables read of a chunk)."""

    added: list[str]
    removed: list[str]
    moved: list[str]
    reextracted: list[str]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.moved or self.reextracted)

    @property
    def size(self) -> int:
        """Chunks that changed in any way."""
        return len(self.added) + len(self.removed) + len(set(self.moved) | set(self.reextracted))

    def recorded(self) -> list[str]:
        """Chunks whose record row is written again, sorted."""
        return sorted({*self.added, *self.moved, *self.reextracted})

    def node_chunks(self) -> list[str]:
        """Chunks whose contribution to the node tables may have changed, sorted."""
        return sorted({*self.added, *self.removed, *self.reextracted})


def diff_inputs(current: pa.Table, stored: pa.Table) -> ChunkDiff:
    """The chunks added, removed and changed between ``stored`` and ``current``."""
    at = id_keys.index_in(current["id"], stored["id"])  # (current,) -1: a new chunk
    new = at < 0
    gone = ~id_keys.is_in(stored["id"], current["id"])  # (stored,)
    both = current.filter(pa.array(~new))
    # (both,) the stored row of each kept chunk: the compared columns only (not ``listed``)
    before = stored.select(current.column_names).take(pa.array(at[~new]))
    moved = np.zeros(both.num_rows, bool)
    for column in PLACE:
        moved |= _differs(both[column], before[column])
    compared = DIGEST if DIGEST in both.column_names else "payload"
    payload = _differs(both[compared], before[compared])
    reextracted = payload | _differs(both["domain"], before["domain"])
    ids = both["id"]
    return ChunkDiff(
        added=current["id"].filter(pa.array(new)).to_pylist(),
        removed=stored["id"].filter(pa.array(gone)).to_pylist(),
        moved=ids.filter(pa.array(moved)).to_pylist(),
        reextracted=ids.filter(pa.array(reextracted)).to_pylist(),
    )


def rows_of(inputs: pa.Table, wanted: list[str]) -> pa.Table:
    """The rows of ``inputs`` whose id is in ``wanted``, sorted by id (the merge order)."""
    if not wanted:
        return inputs.slice(0, 0)
    rows = inputs.filter(pc.is_in(inputs["id"], value_set=pa.array(wanted, pa.string())))
    return rows.take(pc.sort_indices(rows["id"]))


FETCH_MAX = 4 * WHERE_IN_MAX  # ids read by filtered queries; more: the columns are read whole


class LazyInputs:
    """One side of a diff: every chunk's key columns in memory (the payload's :data:`DIGEST`),
    the full rows (payloads, and the record's ``listed``) read by id when asked: an
    incremental run reads the payloads of the chunks it merges again, not of every chunk.

    Attributes:
        keys: every chunk's ``id``, :data:`PLACE` and :data:`DIGEST`.
    """

    def __init__(self, keys: pa.Table, read: Callable[[list[str] | None], pa.Table]) -> None:
        self.keys = keys
        self._read = read  # chunk ids (None: every chunk) -> their full rows
        self._every: pa.Table | None = None

    def rows(self, wanted: Iterable[str]) -> pa.Table:
        """The full rows of the ``wanted`` chunk ids it holds, sorted by id (:func:`rows_of`)."""
        ids = sorted(set(wanted))
        if len(ids) > FETCH_MAX:  # one read of every row beats many filtered ones
            if self._every is None:
                self._every = self._read(None)
            return rows_of(self._every, ids)
        parts = [self._read(ids[s : s + WHERE_IN_MAX]) for s in range(0, len(ids), WHERE_IN_MAX)]
        return rows_of(pa.concat_tables(parts) if parts else self._read([]), ids)


def touched_chunks(store: LanceStore, now: dict[str, int]) -> list[str] | None:
    """The chunk ids the chunk and extraction stages wrote or removed since the record was
    compared (:mod:`.row_changes`, from the versions :data:`READ_STATE` holds), sorted; None
    when their links do not cover those versions or name more than :data:`FETCH_MAX` chunks."""
    try:
        then = json.loads(store.stage_digest(READ_STATE) or "null")
    except ValueError:
        return None
    if not isinstance(then, dict):
        return None
    ids: set[str] = set()
    for name, version in now.items():
        got = row_changes.touched(store, name, int(then.get(name, -1)), version)
        if got is None:
            return None
        ids.update(got)
    return sorted(ids) if len(ids) <= FETCH_MAX else None


def compared_inputs(
    store: LanceStore, extractor_key: str, touched: list[str] | None
) -> tuple[pa.Table, pa.Table | None]:
    """The current inputs' and the record's key columns (payload digests) of every chunk
    (``touched`` None) or of the ``touched`` chunks only (read by id): every other chunk is
    as recorded. The record is None when there is none."""
    if touched is None:
        every = current_inputs(store, extractor_key, digests=True)
        return every, stored_inputs(store, digests=True)
    parts = [touched[s : s + WHERE_IN_MAX] for s in range(0, len(touched), WHERE_IN_MAX)] or [[]]
    now = [current_inputs(store, extractor_key, digests=True, only=p) for p in parts]
    then = [stored_inputs(store, digests=True, only=p) for p in parts]
    return _joined(now), _joined([t for t in then if t is not None] or [_empty(DIGEST)])


def _joined(tables: list[pa.Table]) -> pa.Table:
    """``tables`` as one (the first when every one is empty: an empty read's column types
    are not the table's)."""
    full = [t for t in tables if t.num_rows]
    return pa.concat_tables(full) if full else tables[0]


class Payloads(Mapping[str, str]):
    """The payloads of an inputs table by chunk id, turned into Python strings a slice of
    rows at a time when read in row order (as the node-table merge reads them): memory for
    one slice's text beside the Arrow column."""

    def __init__(self, inputs: pa.Table, batch: int = 20_000) -> None:
        self._ids = inputs["id"].to_pylist()
        self._position = {c: i for i, c in enumerate(self._ids)}
        self._payload, self._batch = inputs["payload"], max(1, batch)
        self._has = pc.is_valid(self._payload).to_numpy(zero_copy_only=False)
        self._loaded: tuple[int, list] = (-1, [])

    def __getitem__(self, chunk_id: str) -> str:
        at = self._position[chunk_id]
        if not self._has[at]:
            raise KeyError(chunk_id)
        b = at // self._batch
        if self._loaded[0] != b:
            self._loaded = (b, self._payload.slice(b * self._batch, self._batch).to_pylist())
        return self._loaded[1][at - b * self._batch]

    def __contains__(self, chunk_id: object) -> bool:
        at = self._position.get(chunk_id) if isinstance(chunk_id, str) else None
        return at is not None and bool(self._has[at])

    def __iter__(self) -> Iterator[str]:
        return (c for c, h in zip(self._ids, self._has) if h)

    def __len__(self) -> int:
        return int(self._has.sum())


def write_record(
    store: LanceStore,
    current: pa.Table,
    listed: pa.Table,
    diff: ChunkDiff | None,
    digests: pa.Table | None = None,
) -> None:
    """Record ``current`` (with ``listed``: ``id``, ``listed`` of its chunks) as what the
    tables were built from: the whole table (``diff`` None) or only the rows of ``diff``'s
    chunks; with ``digests`` (``id``, :data:`DIGEST` of at least those chunks) each row keeps
    its payload's digest, so the next diff reads it instead of hashing every payload (a
    record made before the column keeps its columns until it is written whole)."""
    wanted = None if diff is None else diff.recorded()
    rows = current if wanted is None else rows_of(current, wanted)
    at = pc.index_in(rows["id"], value_set=listed["id"])
    if at.null_count:
        raise ValueError("a recorded chunk has no listed concepts")  # a caller's bug
    rows = rows.select(list(COLUMNS)).append_column("listed", listed["listed"].take(at))
    table = store.open_latest(EMBEDDED_CHUNKS)
    held = table is None or diff is None or DIGEST in table.schema.names
    if digests is not None and held:
        found = id_keys.index_in(rows["id"], digests["id"])
        if (found < 0).any():
            raise ValueError("a recorded chunk has no digest")  # a caller's bug
        rows = rows.append_column(DIGEST, digests[DIGEST].take(pa.array(found)))
    if diff is None:
        store.replace(EMBEDDED_CHUNKS, rows)
        return
    store.upsert(EMBEDDED_CHUNKS, rows)
    store.delete(EMBEDDED_CHUNKS, "id", diff.removed)
