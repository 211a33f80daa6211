"""Feedback: a query log that remembers which concepts each result came through, and an
append-only LanceDB table of judgements (``feedback_events``).

Both tables are only ever appended to (never merge-inserted or updated), so any
number of processes (the retriever, the CLI, the MCP server) can write at once.
"""

from __future__ import annotations

import atexit
import datetime as dt
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

import pyarrow as pa

from qortex_core.errors import QueryError, StorageError
from qortex_core.jsonable import JsonRecord
from qortex_core.storage import ids
from qortex_core.storage.sql import sql_quote
from qortex_core.storage.store import FEEDBACK_EVENTS, QUERY_LOG, LanceStore

KINDS = ("accepted", "rejected", "partial")
DEFAULT_TENANT = "default"

EVENT_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("query_id", pa.string()),
        ("result_id", pa.string()),
        ("kind", pa.string()),
        ("concept_ids", pa.list_(pa.string())),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tenant", pa.string()),
    ]
)
LOG_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("result_id", pa.string()),
        ("result_kind", pa.string()),
        ("concept_ids", pa.list_(pa.string())),
        ("snapshot", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tenant", pa.string()),
    ]
)


def now() -> dt.datetime:
    """The current UTC time (microsecond resolution, as stored)."""
    return dt.datetime.now(dt.timezone.utc)


@dataclass(frozen=True)
class ResultTrace:
    """One returned result and the concept ids it came through."""

    result_id: str
    result_kind: str  # "passage" or "rule"
    concept_ids: tuple[str, ...]


@dataclass(frozen=True)
class FeedbackEvent(JsonRecord):
    """One judgement of one result of one query."""

    event_id: str
    query_id: str
    result_id: str
    kind: str
    concept_ids: tuple[str, ...]
    ts: dt.datetime
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True)
class FeedbackConfig:
    """Attributes:
    log_capacity: queries kept in memory for resolving feedback without a table read.
    log_queries: append every query's result traces to the ``query_log`` table.
    flush_every: traces of this many queries are appended in one commit (1: every query) ...
    flush_after_s: ... or once the oldest pending query is this old; pending traces are also
        written at interpreter exit and before a table lookup.
    """

    log_capacity: int = 1024
    log_queries: bool = True
    flush_every: int = 16
    flush_after_s: float = 2.0


class QueryLog:
    """Which concepts each result of a query came through: a bounded map backed by a table."""

    def __init__(
        self,
        store: LanceStore,
        config: FeedbackConfig = FeedbackConfig(),
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        self.store = store
        self.config = config
        self.tenant = tenant
        self._recent: OrderedDict[str, dict[str, tuple[str, ...]]] = OrderedDict()
        self._pending: list[dict] = []
        self._pending_queries = 0
        self._pending_since = 0.0
        self.problem: str | None = None  # why query-log rows were last skipped (None: never)
        atexit.register(self._flush_at_exit)

    def record(self, query_id: str, snapshot: str, traces: Sequence[ResultTrace]) -> None:
        """Remember the traces of ``query_id`` (in memory, and durably when ``log_queries``)."""
        self._recent[query_id] = {t.result_id: tuple(t.concept_ids) for t in traces}
        self._recent.move_to_end(query_id)
        while len(self._recent) > self.config.log_capacity:
            self._recent.popitem(last=False)
        if not self.config.log_queries or not traces:
            return
        when = now()
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.extend(
            {
                "query_id": query_id,
                "result_id": t.result_id,
                "result_kind": t.result_kind,
                "concept_ids": list(t.concept_ids),
                "snapshot": snapshot,
                "ts": when,
                "tenant": self.tenant,
            }
            for t in traces
        )
        self._pending_queries += 1
        if (
            self._pending_queries >= self.config.flush_every
            or time.monotonic() - self._pending_since >= self.config.flush_after_s
        ):
            self.flush()

    def flush(self) -> int:
        """Append pending traces to the ``query_log`` table in one commit; returns the rows written.

        Logging never stops a query: when the home is read-only or the machine refuses the
        write (disk full), the rows are dropped and :attr:`problem` says why.
        """
        rows, self._pending, self._pending_queries = self._pending, [], 0
        if not rows:
            return 0
        if not self.store.writable:
            self.problem = f"query log skipped: data home {self.store.config.home} is not writable"
            return 0
        try:
            self.store.append(QUERY_LOG, pa.Table.from_pylist(rows, schema=LOG_SCHEMA))
        except StorageError as exc:
            self.problem = f"query log skipped: {exc}"
            return 0
        return len(rows)

    def _flush_at_exit(self) -> None:
        try:
            self.flush()
        # the home may be gone at exit; the log is best effort, events are not
        except Exception:  # noqa: BLE001
            pass

    def resolve(self, query_id: str) -> dict[str, tuple[str, ...]]:
        """Result id -> concept ids for a logged query.

        Raises:
            QueryError: the query id is unknown (never logged, or logged under another tenant).
        """
        if query_id in self._recent:
            return self._recent[query_id]
        self.flush()
        table = self.store.open_latest(QUERY_LOG)
        rows = (
            []
            if table is None
            else (
                table.search()
                .where(f"query_id = {sql_quote(query_id)}")
                .limit(None)
                .to_arrow()
                .to_pylist()
            )
        )
        if not rows:
            raise QueryError(
                f"unknown query id {query_id!r} "
                "(run the query first; ids come from `qortex query --json`)"
            )
        return {r["result_id"]: tuple(r["concept_ids"] or ()) for r in rows}


def judgements(
    accepted: Sequence[str] = (), rejected: Sequence[str] = (), partial: Sequence[str] = ()
) -> dict[str, list[str]]:
    """The three judgement lists as a kind -> result ids map."""
    return {"accepted": list(accepted), "rejected": list(rejected), "partial": list(partial)}


def make_events(
    query_id: str,
    judged: Mapping[str, Sequence[str]],
    traces: Mapping[str, tuple[str, ...]],
    tenant: str = DEFAULT_TENANT,
) -> list[FeedbackEvent]:
    """One event per judged result, carrying the concepts that result came through.

    A result named twice under one kind is judged once; its id is a hash of (query, result,
    kind), so a repeated call makes the same events (:func:`record_feedback` skips them).

    Raises:
        QueryError: an unknown kind, no judged result, a result id the query did not return, or
            one result judged two ways in one call.
    """
    unknown_kinds = set(judged) - set(KINDS)
    if unknown_kinds:
        raise QueryError(
            f"unknown feedback kind {sorted(unknown_kinds)[0]!r}: use {', '.join(KINDS)}"
        )
    if not any(judged.values()):
        raise QueryError("no result ids given: pass at least one accepted, rejected or partial id")
    missing = [r for ids_ in judged.values() for r in ids_ if r not in traces]
    if missing:
        raise QueryError(
            f"result {missing[0]!r} was not returned by query {query_id}: judge only the ids "
            "that query returned"
        )
    unique = {kind: list(dict.fromkeys(judged.get(kind, ()))) for kind in KINDS}
    kind_of: dict[str, str] = {}
    for kind in KINDS:
        for r in unique[kind]:
            if r in kind_of:
                raise QueryError(
                    f"result {r!r} of query {query_id} is judged both {kind_of[r]} and {kind} in "
                    "one call: judge each result once"
                )
            kind_of[r] = kind
    when = now()
    return [
        FeedbackEvent(ids.event_id(query_id, r, kind), query_id, r, kind, traces[r], when, tenant)
        for kind in KINDS
        for r in unique[kind]
    ]


def append_events(store: LanceStore, events: Sequence[FeedbackEvent]) -> int:
    """Durably append ``events`` (one commit); returns how many were written."""
    store.append(
        FEEDBACK_EVENTS,
        pa.Table.from_pylist(
            [
                {
                    "event_id": e.event_id,
                    "query_id": e.query_id,
                    "result_id": e.result_id,
                    "kind": e.kind,
                    "concept_ids": list(e.concept_ids),
                    "ts": e.ts,
                    "tenant": e.tenant,
                }
                for e in events
            ],
            schema=EVENT_SCHEMA,
        ),
    )
    return len(events)


def read_events(store: LanceStore) -> tuple[list[FeedbackEvent], int]:
    """Every event committed so far (by any process), oldest first, and the table version read."""
    table, version = store.latest(FEEDBACK_EVENTS)
    if table.num_rows == 0:
        return [], version
    events = [
        FeedbackEvent(
            r["event_id"],
            r["query_id"],
            r["result_id"],
            r["kind"],
            tuple(r["concept_ids"] or ()),
            r["ts"],
            r["tenant"],
        )
        for r in table.to_pylist()
    ]
    # two processes may append the same judgement at once: it counts once
    first: dict[str, FeedbackEvent] = {}
    for event in sorted(events, key=lambda e: (e.ts, e.event_id)):
        first.setdefault(event.event_id, event)
    return list(first.values()), version


def record_feedback(
    store: LanceStore,
    log: QueryLog,
    query_id: str,
    accepted: Sequence[str] = (),
    rejected: Sequence[str] = (),
    partial: Sequence[str] = (),
) -> list[FeedbackEvent]:
    """Resolve ``query_id`` through ``log`` and append one event per judged result.

    Returns:
        the events appended: judgements already recorded for this query are not appended again.
    """
    events = make_events(
        query_id, judgements(accepted, rejected, partial), log.resolve(query_id), log.tenant
    )
    seen = recorded_event_ids(store, query_id)
    fresh = [e for e in events if e.event_id not in seen]
    append_events(store, fresh)
    return fresh


def recorded_event_ids(store: LanceStore, query_id: str) -> set[str]:
    """Ids of the events already recorded for ``query_id``."""
    table = store.open_latest(FEEDBACK_EVENTS)
    if table is None:
        return set()
    rows = table.search().where(f"query_id = {sql_quote(query_id)}").select(["event_id"])
    return set(rows.limit(None).to_arrow()["event_id"].to_pylist())
