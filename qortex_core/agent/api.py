"""The agent's memory API: ``mem = qortex_core.open(home)``, then remember, search, revise, forget.

Writes go to the append-only ``memories`` table before a call returns and are searchable at
once (the fresh tier); ``qortex consolidate`` moves them into the graph. File passages are
memories too: get, history and forget take their ``p_`` ids.
"""

from __future__ import annotations

import builtins
import time as clock
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from qortex_core.agent.graph_methods import GraphMethods
from qortex_core.errors import RecordError, SnapshotError
from qortex_core.memory.fresh import MemoryState, in_window, record_from_row
from qortex_core.memory.metadata import clean_source
from qortex_core.memory.options import MemoryOptions
from qortex_core.memory.passages import doc_hash, passage_record
from qortex_core.memory.records import (
    DOC_PREFIX,
    MAX_LIST,
    MemoryRecord,
    MemoryTable,
    Revision,
    clean_text,
    metadata_each,
    new_record_id,
    parse_time,
    revision_rows,
    times_each,
    to_revision,
    utc_now,
    writer_name,
)
from qortex_core.memory.revise import (
    checked_domain,
    checked_id,
    expected_revision_of,
    next_revision,
    revisable,
    row_metadata,
)
from qortex_core.memory.supersede import Supersession
from qortex_core.storage import snapshot as snap
from qortex_core.storage.record_lock import records_lock
from qortex_core.storage.store import LanceStore, default_home
from qortex_core.storage.tenants import tenant_home, validate_tenant


class Memory(GraphMethods):
    """One tenant's memory under one data home (see :func:`open_memory`), with graph methods."""

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
        self.supersession = Supersession(lambda: self.embedder, resolver=options.resolver)

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
        kept = self.remember_many([text], time=time, source=source, domain=domain,
                                  metadata=metadata)  # fmt: skip
        return kept[0]

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
        when, where = times_each(time, len(texts)), checked_domain(domain)
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

    def update(
        self,
        record_id: str,
        text: str,
        *,
        time: object = None,
        expected_revision: int | None = None,
    ) -> MemoryRecord:
        """Write a new revision of a record (the old one stays in its history).

        Concurrent revisions of one record serialise: each gets the next revision number, and
        the state returned is the one this call wrote. With ``expected_revision``, the write
        happens only if that is still the record's newest revision.

        Raises:
            RecordError: bad text or time, an unknown or forgotten id.
            RevisionConflict: ``expected_revision`` is no longer the newest revision.
        """
        clean = clean_text(text, self.options.redaction)
        when = parse_time(time) if time is not None else None
        expected = expected_revision_of(expected_revision)
        vectors = self.embedder.embed([clean])  # (1, d), before the lock is taken

        def plan() -> tuple[list[Revision], list[dict]]:
            row = self._live_row(record_id, "update", expected)
            at = when if time is not None else row["time"]
            return [next_revision(row, "update", clean, at, self.writer)], [row_metadata(row)]

        self._commit(plan, vectors, self.embedder.name)
        return self._state_of(record_id)

    def forget(self, record_id: str, *, expected_revision: int | None = None) -> MemoryRecord:
        """Take a record (or a file's passage) out of every search now; its history keeps it.

        Forgetting is final: a later ``update`` of the record is refused. A record merged into
        another at consolidation may be forgotten too (purge then removes its text).

        Raises:
            RecordError: an unknown id, or one already forgotten.
            RevisionConflict: ``expected_revision`` is no longer the newest revision.
        """
        if isinstance(record_id, str) and record_id.startswith("p_"):
            return self._forget_passage(record_id)
        expected = expected_revision_of(expected_revision)

        def plan() -> tuple[list[Revision], list[dict]]:
            row = self._live_row(record_id, "forget", expected)
            revision = next_revision(row, "forget", row["text"], row["time"], self.writer)
            return [revision], [row_metadata(row)]

        self._commit(plan, None, "")
        return self._state_of(record_id)

    def _forget_passage(self, passage_id: str) -> MemoryRecord:
        record = passage_record(self.store, self.state, passage_id, self.tenant)
        if record.source and record.source.startswith(DOC_PREFIX):  # a consolidated memory
            return self.forget(record.source[len(DOC_PREFIX) :])
        if record.forgotten:
            raise RecordError(f"passage {passage_id} is already forgotten")
        digest = doc_hash(self.store, record.source or "")

        def plan() -> tuple[list[Revision], list[dict]]:
            newest = self.state.current.get(passage_id)
            if newest is not None and newest["op"] == "forget":
                raise RecordError(f"passage {passage_id} is already forgotten")
            number = int(newest["revision"]) + 1 if newest is not None else 2
            revision = Revision(
                passage_id, number, "forget", "", record.time, utc_now(), record.source,
                record.domain, self.writer, f"{record.source}\0{digest}",
            )  # fmt: skip
            return [revision], [{}]

        self._commit(plan, None, "")
        return replace(record, forgotten=True)

    def _write(self, revisions: list[Revision], metadata: list[dict]) -> None:
        """Append new records' first revisions (embedding their texts) and fold them in."""
        self.state.refresh(force=self.state.version < 0)  # the first read loads what others wrote
        vectors = self.embedder.embed([r.text for r in revisions])  # (n, d)
        self._commit(lambda: (revisions, metadata), vectors, self.embedder.name, reread=False)

    def _commit(
        self,
        plan: Callable[[], tuple[list[Revision], list[dict]]],
        vectors: np.ndarray | None,
        model: str,
        reread: bool = True,
    ) -> None:
        """Under the records lock: ``plan`` the revisions against every committed write
        (``reread``: new records need none), append them (``vectors``: (n, d), or zeros when
        None) and fold them in before the lock goes."""
        dim = self._dim() if vectors is None else 0
        with records_lock(self.home):
            if reread:
                self.state.refresh(force=True)  # every write committed before the lock
            revisions, metadata = plan()
            if vectors is None:
                vectors = np.zeros((len(revisions), dim), np.float32)
            rows = revision_rows(revisions, metadata, vectors, model)
            if model:  # with links to the live records of the same attribute: one commit
                rows = self.supersession.linked(rows, self.state, revisions, self.writer)
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
        if self.state.record(checked_id(record_id)) is None:
            raise RecordError(f"unknown memory id {record_id!r} (tenant {self.tenant})")
        return self._state_of(record_id)

    def list(
        self,
        domain: str | None = None,
        since: object = None,
        until: object = None,
        limit: int = 100,
        include_superseded: bool = False,
    ) -> list[MemoryRecord]:
        """Live written records true now (all: ``include_superseded``), newest event first;
        RecordError for a bad time or a limit outside 1..10,000."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST:
            raise RecordError(f"limit must be an integer from 1 to {MAX_LIST}, got {limit!r}")
        window = (parse_time(since, "since"), parse_time(until, "until", upper=True))
        self.state.refresh()
        closed = frozenset() if include_superseded else self.supersession.closed(self.state)
        rows = [self.state.current[r] for r in self.state.live_ids if r not in closed]
        rows = [r for r in rows if domain in (None, r["domain"]) and in_window(r["time"], *window)]
        first = self.state.first_created
        rows.sort(key=lambda r: r["time"] or first.get(r["id"], ""), reverse=True)
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
        rows = self.state.history_rows(checked_id(record_id))
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
        as_of: object = None,
        include_superseded: bool = False,
        filters: dict | None = None,
        asked_at: object = None,
    ):
        """Today's query over the snapshot and the fresh tier: what is true now, or ``as_of``;
        a :class:`~qortex_core.query.retriever.QueryResult` (each passage says its ``tier``).
        ``filters``: only memories whose metadata passes them (:mod:`qortex_core.query.filters`:
        ``{"user": "ann", "topic": ["a", "b"], "score": {"gte": 3}}``), before the top ``top_k``.
        Without ``as_of``, a time the query names ("in October 2023", "last spring", "two years
        ago", relative to ``asked_at``, default now) is the ``as_of``.

        Raises:
            QueryError: a bad query, top_k, mode, domain or filter; RecordError: a bad time.
        """
        from qortex_core.agent.search import search_memory

        return search_memory(self, query, top_k, mode, (since, until), domain, profile,
                             min_relevance, (as_of, include_superseded), filters,
                             asked_at)  # fmt: skip

    def feedback(
        self, query_id: str, accepted: Sequence[str] = (), rejected: Sequence[str] = (),
        partial: Sequence[str] = (),
    ):  # fmt: skip
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
    def _live_row(self, record_id: str, action: str, expected: int | None = None) -> dict:
        """The newest row of a record that ``action`` may revise (the caller refreshed the
        state under the records lock)."""
        row = self.state.current.get(checked_id(record_id))
        return revisable(row, record_id, action, expected, self.tenant)

    def _in_graph(self) -> frozenset[str]:
        retriever = self.retriever()
        tier = getattr(retriever, "fresh", None)
        return tier.view().in_graph if tier is not None else frozenset()

    def _record(self, row: dict, graph: frozenset[str]) -> MemoryRecord:
        first = {"created_at": self.state.first_created.get(row["id"], row["created_at"])}
        record = record_from_row(row, first, "graph" if row["id"] in graph else "fresh")
        return replace(record, **asdict(self.supersession.timeline(self.state).validity(row["id"])))

    def _state_of(self, record_id: str) -> MemoryRecord:
        return self._record(self.state.current[record_id], self._in_graph())


def open_memory(
    home: str | Path | None = None, tenant: str | None = None, embedder=None, **options
) -> Memory:
    """One tenant's memory under ``home`` (default ``$QORTEX_HOME`` or ``~/.qortex``)."""
    return Memory(home, tenant, embedder, MemoryOptions(**options))
