"""Agent-written memories: an append-only LanceDB table of revisions and the state it folds to.

One row per write (``remember``, ``update``, ``forget``, ``merge``/``merged``); a record's
current state is its newest revision. Rows are never edited in place, so every revision stays in
the history and several processes may write at once (Lance commits appends without conflict). A
file's passage
is forgotten the same way: a ``forget`` row keyed by the passage id, whose ``target`` holds the
file's content hash at that moment (the passage is hidden until the file changes).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa

from qortex_core.errors import RecordError
from qortex_core.jsonable import JsonRecord
from qortex_core.memory.metadata import clean_metadata
from qortex_core.redact import RedactionConfig, redact
from qortex_core.storage import ids, times
from qortex_core.storage.record_lock import is_local
from qortex_core.storage.sql import sql_quote
from qortex_core.storage.store import LanceStore, vectors_to_arrow

MEMORIES = "memories"
DOC_PREFIX = "memory:"  # documents (and so passages) made from a memory record: memory:<record id>
MAX_TEXT_BYTES = 1_000_000
MAX_LIST = 10_000  # records one list call returns at most
_READ_ATTEMPTS = 5  # reads restarted on the newest version when a purge cleaned theirs
GONE = ("forget", "merged")  # ops that take a record out of search
JSON_COLUMN = "metadata_json"  # the metadata again, as Lance JSON (JSONB): what filters read


@dataclass(frozen=True)
class MemoryRecord(JsonRecord):
    """A memory as it stands now.

    Attributes:
        id: ``m_...`` for written memories, ``p_...`` for a passage of a file.
        text: the text as stored (after secret redaction).
        time: event time (ISO 8601, UTC) or None.
        created_at: when it was first written (ISO 8601, UTC).
        updated_at: when its newest revision was written.
        tier: ``fresh`` (not yet in the loaded snapshot) or ``graph``.
        forgotten: True once forgotten (or merged into another record: ``merged_into``).
    """

    id: str
    text: str
    time: str | None
    created_at: str
    updated_at: str
    source: str | None = None
    domain: str = "default"
    metadata: dict = field(default_factory=dict)
    revision: int = 1
    tier: str = "fresh"
    forgotten: bool = False
    merged_into: str | None = None
    valid_from: str | None = None  # true from (its event time)
    valid_until: str | None = None  # until a later statement of the same attribute (None: still)
    superseded_by: str | None = None  # that statement's record


@dataclass(frozen=True)
class Revision(JsonRecord):
    """One row of a record's history: what was written, when and by whom."""

    id: str
    revision: int
    op: str
    text: str
    time: str | None
    created_at: str
    source: str | None
    domain: str
    writer: str
    target: str | None = None


def utc_now() -> str:
    """Now as ISO 8601 in UTC with microseconds (string order = time order)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def parse_time(value: object, what: str = "time", upper: bool = False) -> str | None:
    """``value`` (None, a datetime, a date or an ISO 8601 string) as ISO 8601 UTC to the second
    (:mod:`qortex_core.storage.times`); a time without a zone is UTC, a bare date its midnight
    (as an ``upper`` bound: its last second).

    Raises:
        RecordError: not a datetime, date nor a parseable ISO 8601 string, or outside years
            1000-9999 once converted to UTC.
    """
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        shown = f"{value!r}"[:40] if not isinstance(value, int) or abs(value) < 10**40 else "number"
        raise RecordError(f"invalid {what} {shown}: use ISO 8601, e.g. 2026-03-01T09:30:00Z")
    try:
        return times.parse_bound(value, upper)
    except ValueError as exc:
        given = value[:40] if isinstance(value, str) else value
        why = times.RANGE if "out of range" in str(exc) else "use ISO 8601"
        raise RecordError(f"invalid {what} {given!r}: {why}") from None


def clean_text(text: object, redaction: RedactionConfig = RedactionConfig()) -> str:
    """The text to store: checked, and with secrets redacted as on the file path.

    Raises:
        RecordError: not a string, empty or whitespace, over 1 MB, or not valid UTF-8.
    """
    if not isinstance(text, str):
        raise RecordError(f"memory text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise RecordError("memory text is empty")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise RecordError("memory text is not valid UTF-8 (it holds undecodable bytes)") from None
    if size > MAX_TEXT_BYTES:
        raise RecordError(f"memory text is {size} bytes: the limit is {MAX_TEXT_BYTES}")
    return redact(text.strip(), redaction)


def writer_name(channel: str) -> str:
    """Who writes: the channel (library, cli, mcp), host and process id."""
    return f"{channel}@{socket.gethostname()}:{os.getpid()}"


def new_record_id(text: str, created_at: str) -> str:
    """A fresh record id (content hash of the text, the time and a nonce)."""
    return ids.memory_id(text, created_at, uuid.uuid4().hex)


def revision_rows(
    revisions: list[Revision], metadata: list[dict], vectors: np.ndarray, model: str = ""
) -> pa.Table:
    """Revisions as rows of the memories table; ``vectors`` is (n, d) float32 from ``model``."""
    keys = [ids.revision_key(r.id, r.revision, r.created_at, uuid.uuid4().hex) for r in revisions]
    columns = {
        "key": keys,
        "id": [r.id for r in revisions],
        "revision": pa.array([r.revision for r in revisions], pa.int64()),
        "op": [r.op for r in revisions],
        "text": [r.text for r in revisions],
        "time": pa.array([r.time for r in revisions], pa.string()),
        "created_at": [r.created_at for r in revisions],
        "source": pa.array([r.source for r in revisions], pa.string()),
        "domain": [r.domain for r in revisions],
        "metadata": [json.dumps(m, ensure_ascii=False, sort_keys=True) for m in metadata],
        "writer": [r.writer for r in revisions],
        "target": pa.array([r.target for r in revisions], pa.string()),
        "model": [model] * len(revisions),
    }
    table = pa.table(columns)
    return table.append_column("vector", vectors_to_arrow(vectors))


class MemoryTable:
    """The ``memories`` table: appends, the latest version, reads and full-text search."""

    def __init__(self, store: LanceStore) -> None:
        self.store = store
        self._handle = None

    def _open(self):
        if self._handle is None:
            self._handle = self.store.open_latest(MEMORIES)
        return self._handle

    def append(self, rows: pa.Table) -> None:
        """Append rows durably (the call returns after Lance committed them), with the JSON
        copy of their metadata. The caller holds the records lock: a local table written before
        that column existed is first rewritten with it (once, as a purge rewrites it); one in
        an object store, where that lock is not held, stays as it is (filters then read the
        metadata in Python)."""
        handle = self._open()
        if handle is not None:
            handle.checkout_latest()  # another process may have upgraded it, or appended
        if handle is not None and JSON_COLUMN not in handle.schema.names:
            if not is_local(self.store.config.home):
                kept = [c for c in rows.column_names if c != JSON_COLUMN]
                self.store.append(MEMORIES, rows.select(kept))
                return
            self.store.replace(MEMORIES, with_json_column(handle.to_arrow()))
            self._handle = None
            self._ensure_fts()
        self.store.append(MEMORIES, with_json_column(rows))
        if handle is None:  # the first write here: an FTS index that later appends search unindexed
            self._handle = self.store.open_latest(MEMORIES)
            self._ensure_fts()

    def _ensure_fts(self) -> None:
        from lancedb.index import FTS

        handle = self._open()
        if handle is not None and not any(i.index_type == "FTS" for i in handle.list_indices()):
            try:
                handle.create_index("text", config=FTS(), replace=False)
            except (RuntimeError, ValueError):  # another process created it first
                pass

    def version(self) -> int:
        """The table's newest committed version (0 before the first write); cheap."""
        handle = self._open()
        if handle is None:
            return 0
        handle.checkout_latest()
        return int(handle.version)

    def dim(self) -> int:
        """Vector width of the table (0 before the first write)."""
        handle = self._open()
        return int(handle.schema.field("vector").type.list_size) if handle is not None else 0

    def read(self, since: str | None = None) -> pa.Table:
        """Rows as committed now (only those created at or after ``since`` when given).

        A purge may clean the version just checked out (it rewrites the table under the records
        lock, which readers do not take): the read then starts again on the newest version.
        """
        handle = self._open()
        if handle is None:
            return pa.table({})
        if since is None:
            return self._retrying(handle, lambda: handle.to_arrow())
        where = f"created_at >= {sql_quote(since)}"
        return self._retrying(handle, lambda: handle.search().where(where).limit(None).to_arrow())

    def matching_ids(self, predicate: str) -> set[str] | None:
        """Ids of the records whose rows pass ``predicate`` (a ``where`` over
        :data:`JSON_COLUMN`, evaluated by LanceDB); None when the table has no such column."""
        handle = self._open()
        if handle is None:
            return set()

        def run() -> pa.Table:
            if JSON_COLUMN not in handle.schema.names:
                return pa.table({})
            return handle.search().where(predicate).select(["id"]).limit(None).to_arrow()

        rows = self._retrying(handle, run)
        return set(rows["id"].to_pylist()) if rows.num_columns else None

    @staticmethod
    def _retrying(handle, read: Callable[[], pa.Table]) -> pa.Table:
        """``read()`` on the newest version, again when a purge cleaned the one checked out."""
        for attempt in range(_READ_ATTEMPTS):
            handle.checkout_latest()
            try:
                return read()
            except (OSError, RuntimeError) as exc:
                if "Not found" not in str(exc) or attempt + 1 == _READ_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def text_search(self, query: str, limit: int, where: str | None = None) -> dict[str, float]:
        """BM25 scores of the rows whose text matches ``query`` (by row key), best first; with
        ``where`` (over :data:`JSON_COLUMN`) only among the rows that pass it."""
        handle = self._open()
        if handle is None or not query.strip():
            return {}
        if where is not None and JSON_COLUMN not in handle.schema.names:
            where = None  # a table from before the column: the caller filters the records
        try:
            search = handle.search(query, query_type="fts").select(["key", "_score"])
            if where is not None:
                search = search.where(where, prefilter=True)
            hits = search.limit(limit).to_arrow()
        except (RuntimeError, ValueError):  # no index yet, or a query the parser refuses
            return {}
        return dict(zip(hits["key"].to_pylist(), hits["_score"].to_pylist()))

    def optimize(self) -> None:
        """Fold appended rows into the FTS index and compact small fragments."""
        handle = self._open()
        if handle is not None:
            self._ensure_fts()
            handle.optimize()


def with_json_column(rows: pa.Table) -> pa.Table:
    """``rows`` with :data:`JSON_COLUMN` (kept when there): each row's metadata as JSON, ``{}``
    for a stored value that is not a JSON object (a row from before metadata was checked)."""
    if JSON_COLUMN in rows.column_names:
        return rows
    values = [text if _is_object(text) else "{}" for text in rows["metadata"].to_pylist()]
    return rows.append_column(JSON_COLUMN, pa.array(values, pa.json_()))


def _is_object(text: str | None) -> bool:
    try:
        return isinstance(json.loads(text or ""), dict)
    except (ValueError, RecursionError):
        return False


def to_revision(row: dict) -> Revision:
    """A table row (as a dict) as a :class:`Revision`."""
    return Revision(
        row["id"],
        int(row["revision"]),
        row["op"],
        row["text"],
        row["time"],
        row["created_at"],
        row["source"],
        row["domain"],
        row["writer"],
        row["target"],
    )


# -- what remember_many takes per text ---------------------------------------------------
def metadata_each(
    value: object, n: int, redaction: RedactionConfig = RedactionConfig()
) -> list[dict]:
    """One metadata dict per text, checked and redacted (:func:`~.metadata.clean_metadata`): a
    dict (or None) shared by all, or a list of ``n`` dicts."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RecordError(f"metadata list has {len(value)} entries for {n} texts")
        return [clean_metadata(v, redaction) for v in value]
    return [clean_metadata(value, redaction)] * n


def times_each(value: object, n: int) -> list[str | None]:
    """One event time per text: one time (or None) for all, or a list of ``n`` times."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RecordError(f"time list has {len(value)} entries for {n} texts")
        return [parse_time(v) for v in value]
    return [parse_time(value)] * n
