"""The agent's memory API: ``mem = qortex_core.open(home)``, then remember, search, revise, forget.

Writes go to the append-only ``memories`` table before a call returns and are searchable at
once by every retriever on the home (the fresh tier); ``qortex consolidate`` (or the Dagster
sensor ``memories_arrived``) moves them into the graph. Passages of ingested files are
memories too: :meth:`Memory.get`, :meth:`Memory.history` and :meth:`Memory.forget` take their
``p_`` ids.
"""

from __future__ import annotations

import builtins
import json
import time as clock
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qortex_core.errors import RecordError, SnapshotError
from qortex_core.memory.fresh import FreshConfig, MemoryState, in_window, record_from_row
from qortex_core.memory.metadata import clean_source
from qortex_core.memory.passages import doc_hash, passage_record
from qortex_core.memory.records import (
    DOC_PREFIX,
    GONE,
    MemoryRecord,
    MemoryTable,
    Revision,
    clean_text,
    metadata_each,
    new_record_id,
    parse_time,
    refuse_passage_id,
    revision_rows,
    times_each,
    to_revision,
    utc_now,
    writer_name,
)
from qortex_core.redact import RedactionConfig
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore, default_home
from qortex_core.storage.tenants import tenant_home, validate_tenant

MAX_DOMAIN_CHARS = 64
MAX_LIST = 10_000


@dataclass(frozen=True)
class MemoryOptions:
    """Attributes:
    channel: who writes, recorded in each revision (library, cli, mcp).
    redaction: secrets removed from written text, as on the file path.
    fresh: fresh-tier refresh and lexical settings.
    snapshot_check_s: the ``LATEST`` pointer is checked at most this often.
    """

    channel: str = "library"
    redaction: RedactionConfig = RedactionConfig()
    fresh: FreshConfig = FreshConfig()
    snapshot_check_s: float = 0.2


def _domain(value: object) -> str:
    if value is None:
        return "default"
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DOMAIN_CHARS:
        raise RecordError(f"domain must be 1-{MAX_DOMAIN_CHARS} characters, got {value!r}")
    return value.strip()


class Memory:
    """One tenant's memory under one data home (see :func:`open_memory`)."""

    def __init__(
        self,
        home: str | Path | None = None,
        tenant: str | None = None,
        embedder=None,
        options: MemoryOptions = MemoryOptions(),
    ) -> None:
        self.tenant = validate_tenant(tenant)
        self.home = tenant_home(home or default_home(), tenant)
        self.options = options
        self.store = LanceStore.open(self.home)
        self.table = MemoryTable(self.store)
        self.state = MemoryState(self.table, options.fresh)
        self.writer = writer_name(options.channel)
        self._embedder = embedder
        self._retriever = None
        self._snapshot = ""
        self._checked = float("-inf")

    @property
    def embedder(self):
        """The embedder (the bundled model unless one was given), loaded on first use."""
        if self._embedder is None:
            from qortex_core.embed import make_embedder

            self._embedder = make_embedder()
        return self._embedder

    # -- writes -----------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        time: object = None,
        source: str | None = None,
        domain: str | None = None,
        metadata: dict | None = None,
    ) -> MemoryRecord:
        """Store a new memory durably; it is searchable (tier ``fresh``) when this returns.

        Raises:
            RecordError: empty, whitespace-only or > 1 MB text, a bad time, domain or metadata.
        """
        return self.remember_many(
            [text], time=time, source=source, domain=domain, metadata=metadata
        )[0]

    def remember_many(
        self,
        texts: list[str],
        *,
        time: object | Sequence[object] = None,
        source: str | None = None,
        domain: str | None = None,
        metadata: dict | Sequence[dict] | None = None,
    ) -> list[MemoryRecord]:
        """Store several memories with one embedding batch and one append (all or none).

        ``time`` and ``metadata``: one value for every text, or a list with one per text (the
        times of the turns of a conversation; a turn id, a message id: what maps a record back
        to where it came from).

        Raises:
            RecordError: any text, the time, domain, source or metadata is invalid (nothing
                is stored then).
        """
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
            raise RecordError("texts must be a non-empty list of strings")
        clean = [clean_text(t, self.options.redaction) for t in texts]
        when, where = times_each(time, len(texts)), _domain(domain)
        meta = metadata_each(metadata, len(texts), self.options.redaction)
        source = clean_source(source, self.options.redaction)
        now = utc_now()
        revisions = [
            Revision(new_record_id(t, now), 1, "remember", t, at, now, source, where, self.writer)
            for t, at in zip(clean, when)
        ]
        self._write(revisions, meta)
        graph = self._in_graph()
        return [self._record(self.state.current[r.id], graph) for r in revisions]

    def update(self, record_id: str, text: str, *, time: object = None) -> MemoryRecord:
        """Write a new revision of a record (the old one stays in its history).

        Raises:
            RecordError: bad text or time, an unknown or forgotten id.
        """
        clean = clean_text(text, self.options.redaction)
        row = self._live_row(record_id, "update")
        when = parse_time(time) if time is not None else row["time"]
        self._write([_next(row, "update", clean, when, self.writer)], [_meta(row)])
        return self._state_of(record_id)

    def forget(self, record_id: str) -> MemoryRecord:
        """Take a record (or a file's passage) out of every search now; its history keeps it.

        Raises:
            RecordError: an unknown id, or one already forgotten.
        """
        if isinstance(record_id, str) and record_id.startswith("p_"):
            return self._forget_passage(record_id)
        row = self._live_row(record_id, "forget")
        revision = _next(row, "forget", row["text"], row["time"], self.writer)
        self._write([revision], [_meta(row)], vector=False)
        return self._state_of(record_id)

    def _forget_passage(self, passage_id: str) -> MemoryRecord:
        record = passage_record(self.store, self.state, passage_id, self.tenant)
        if record.source and record.source.startswith(DOC_PREFIX):  # a consolidated memory
            return self.forget(record.source[len(DOC_PREFIX) :])
        if record.forgotten:
            raise RecordError(f"passage {passage_id} is already forgotten")
        digest = doc_hash(self.store, record.source or "")
        now = utc_now()
        revision = Revision(
            passage_id, 2, "forget", "", record.time, now, record.source, record.domain,
            self.writer, f"{record.source}\0{digest}",
        )  # fmt: skip
        self._write([revision], [{}], vector=False)
        return replace(record, forgotten=True)

    def _write(self, revisions: list[Revision], metadata: list[dict], vector: bool = True) -> None:
        """Append revisions (embedding their texts when ``vector``) and fold them in at once."""
        self.state.refresh(force=self.state.version < 0)  # the first read loads what others wrote
        if vector:
            vectors = self.embedder.embed([r.text for r in revisions])  # (n, d)
        else:
            vectors = np.zeros((len(revisions), self._dim()), np.float32)
        model = self.embedder.name if vector else ""
        rows = revision_rows(revisions, metadata, vectors, model)
        self.table.append(rows)
        self.state.absorb(rows)

    def _dim(self) -> int:
        """Vector width of the table (a forget row needs no embedder loaded)."""
        return self.table.dim() or self.embedder.dim

    # -- reads ------------------------------------------------------------------------------
    def get(self, record_id: str) -> MemoryRecord:
        """The current state of a record or a file passage (forgotten ones too).

        Raises:
            RecordError: unknown id.
        """
        if isinstance(record_id, str) and record_id.startswith("p_"):
            return passage_record(self.store, self.state, record_id, self.tenant)
        self.state.refresh()
        if self.state.record(_checked_id(record_id)) is None:
            raise RecordError(f"unknown memory id {record_id!r} (tenant {self.tenant})")
        return self._state_of(record_id)

    def list(
        self,
        domain: str | None = None,
        since: object = None,
        until: object = None,
        limit: int = 100,
    ) -> list[MemoryRecord]:
        """Live written records, newest event (else write) time first.

        Raises:
            RecordError: a bad time or a limit outside 1..10,000.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST:
            raise RecordError(f"limit must be an integer from 1 to {MAX_LIST}, got {limit!r}")
        window = (parse_time(since, "since"), parse_time(until, "until", upper=True))
        self.state.refresh()
        rows = [self.state.current[r] for r in self.state.live_ids]
        rows = [r for r in rows if domain is None or r["domain"] == domain]
        rows = [r for r in rows if in_window(r["time"], *window)]
        rows.sort(
            key=lambda r: r["time"] or self.state.first_created.get(r["id"], ""), reverse=True
        )
        graph = self._in_graph()
        return [self._record(r, graph) for r in rows[:limit]]

    def history(self, record_id: str) -> builtins.list[Revision]:
        """Every revision of a record, oldest first (with those of records merged into it).

        Raises:
            RecordError: unknown id.
        """
        self.state.refresh()
        if isinstance(record_id, str) and record_id.startswith("p_"):
            record = passage_record(self.store, self.state, record_id, self.tenant)
            first = Revision(
                record_id, 1, "ingest", record.text, record.time, record.created_at,
                record.source, record.domain, "ingest",
            )  # fmt: skip
            return [first] + [to_revision(r) for r in self.state.history_rows(record_id)]
        rows = self.state.history_rows(_checked_id(record_id))
        if not rows:
            raise RecordError(f"unknown memory id {record_id!r} (tenant {self.tenant})")
        return [to_revision(r) for r in rows]

    def search(
        self,
        query: str,
        top_k: int = 10,
        mode: str = "auto",
        since: object = None,
        until: object = None,
        domain: str | Sequence[str] | None = None,
        profile: str | None = None,
        min_relevance: float | None = None,
    ):
        """Today's query over the snapshot and the fresh tier, with time and domain filters.

        Returns:
            A :class:`~qortex_core.query.retriever.QueryResult`; each passage says its ``tier``.

        Raises:
            QueryError: a bad query, top_k, mode or domain; RecordError: a bad time.
        """
        from qortex_core.memory.search import search_memory

        window = (parse_time(since, "since"), parse_time(until, "until", upper=True))
        domains = [domain] if isinstance(domain, str) else (list(domain) if domain else None)
        return search_memory(self, query, top_k, mode, window, domains, profile, min_relevance)

    def feedback(
        self,
        query_id: str,
        accepted: Sequence[str] = (),
        rejected: Sequence[str] = (),
        partial: Sequence[str] = (),
    ):
        """Judge results of an earlier :meth:`search` (see ``Retriever.feedback``)."""
        retriever = self.retriever()
        if retriever is None:
            raise SnapshotError("feedback needs a snapshot: run `qortex consolidate` first")
        return retriever.feedback(query_id, accepted, rejected, partial)

    def retriever(self):
        """The retriever on the latest snapshot (reopened when ``LATEST`` moves), or None."""
        now = clock.monotonic()
        if self._retriever is not None and now - self._checked < self.options.snapshot_check_s:
            return self._retriever
        self._checked = now
        try:
            name = snap.latest_name(self.home)
        except SnapshotError:
            if not snap.list_versions(self.home):
                return None
            name = "?"
        if self._retriever is None or name != self._snapshot:
            from qortex_core.query.retriever import Retriever

            self._retriever = Retriever.open(self.home, embedder=self.embedder, state=self.state)
            self._snapshot = name
        return self._retriever

    # -- helpers ----------------------------------------------------------------------------
    def _live_row(self, record_id: str, action: str) -> dict:
        refuse_passage_id(record_id, action)  # only forget, history and get take p_ ids
        self.state.refresh(force=True)
        row = self.state.current.get(_checked_id(record_id))
        if row is None or not record_id.startswith("m_"):
            raise RecordError(f"unknown memory id {record_id!r} (tenant {self.tenant})")
        if row["op"] in GONE:
            gone = "merged into " + row["target"] if row["op"] == "merged" else "forgotten"
            raise RecordError(f"cannot {action} memory {record_id}: it was {gone}")
        return row

    def _in_graph(self) -> frozenset[str]:
        retriever = self.retriever()
        tier = getattr(retriever, "fresh", None)
        return tier.view().in_graph if tier is not None else frozenset()

    def _record(self, row: dict, graph: frozenset[str]) -> MemoryRecord:
        first = {"created_at": self.state.first_created.get(row["id"], row["created_at"])}
        return record_from_row(row, first, "graph" if row["id"] in graph else "fresh")

    def _state_of(self, record_id: str) -> MemoryRecord:
        return self._record(self.state.current[record_id], self._in_graph())


def _next(row: dict, op: str, text: str, when: str | None, writer: str) -> Revision:
    """The revision after ``row`` (a record's newest row)."""
    return Revision(
        row["id"], int(row["revision"]) + 1, op, text, when, utc_now(), row["source"],
        row["domain"], writer,
    )  # fmt: skip


def _meta(row: dict) -> dict:
    return json.loads(row["metadata"] or "{}")


def _checked_id(record_id: object) -> str:
    if not isinstance(record_id, str) or not record_id.strip():
        raise RecordError(f"not a memory id: {record_id!r}")
    return record_id.strip()


def open_memory(
    home: str | Path | None = None, tenant: str | None = None, embedder=None, **options
) -> Memory:
    """One tenant's memory under ``home`` (default ``$QORTEX_HOME`` or ``~/.qortex``)."""
    return Memory(home, tenant, embedder, MemoryOptions(**options))


def is_memory_doc(doc_id: str) -> bool:
    """True for documents made from written memories."""
    return doc_id.startswith(DOC_PREFIX)
