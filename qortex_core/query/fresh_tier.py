"""The retriever's hook into agent memories: hide what was forgotten, add what is fresh.

A :class:`FreshTier` sits beside one loaded snapshot. Before ranking, :meth:`FreshTier.visible`
removes snapshot passages whose record was forgotten, merged away or updated (and forgotten file
passages); after ranking, :meth:`FreshTier.merge` interleaves the best fresh records (written
but not yet consolidated) with the graph hits by relevance, marked ``tier: "fresh"``.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import Callable

import numpy as np
import pyarrow as pa

from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.memory.fresh import FreshConfig, FreshHit, GraphView, MemoryState, graph_view
from qortex_core.memory.fresh import search_fresh as _search
from qortex_core.memory.metadata import read_metadata
from qortex_core.memory.records import DOC_PREFIX, JSON_COLUMN, MemoryTable
from qortex_core.memory.timeline import TimelineCache
from qortex_core.query.filters import MetadataFilter
from qortex_core.query.liveness import Liveness
from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage.store import LanceStore

Relevance = Callable[[FreshHit], float]


def cosine_relevance(hit: FreshHit) -> float:
    """A fresh hit's relevance before calibration: its cosine, clipped to [0, 1]."""
    return float(min(max(hit.cosine, 0.0), 1.0))


class FreshTier:
    """Forgotten and fresh memories of one home, against one snapshot's passages."""

    def __init__(
        self,
        store: LanceStore,
        passages: pa.Table,
        config: FreshConfig = FreshConfig(),
        state: MemoryState | None = None,
    ) -> None:
        self.store = store
        self.passages = passages
        self.state = state or MemoryState(MemoryTable(store), config)
        self._view: GraphView | None = None
        self._view_version = -2
        self._domains: tuple[int, set[str]] | None = None  # (state generation, domains)
        self._live: tuple[tuple, Liveness | None] | None = None  # (hidden key, its liveness)
        self.timelines = TimelineCache()
        self.supersession: object | None = None  # facets and subject index of the ranking
        self.moment: tuple[str | None, bool] = (None, False)  # (as_of, include_superseded)
        self._rows_of: dict[str, list[int]] | None = None  # record id -> its passage rows
        self._docs: dict[str, str] | None = None  # memory passage id -> its document
        self._matched: dict[str, tuple[int, frozenset[str]]] = {}  # predicate -> (generation, ids)

    @contextmanager
    def at(self, as_of: str | None, include_superseded: bool = False):
        """Within the block, queries answer what was true at ``as_of`` (None: now), with
        superseded records too when ``include_superseded``."""
        before, self.moment = self.moment, (as_of, include_superseded)
        try:
            yield self
        finally:
            self.moment = before

    def withheld(self) -> frozenset[str]:
        """Written records the current query must not return (superseded, or not true at
        ``as_of``)."""
        return self.timelines.of(self.state).hidden(*self.moment)

    def record_rows(self) -> dict[str, list[int]]:
        """Record id -> the rows of its passages in the snapshot."""
        if self._rows_of is None:
            self._index_passages()
        return self._rows_of or {}

    def passage_docs(self) -> dict[str, str]:
        """Passage id -> document id, for the passages of written memories."""
        if self._docs is None:
            self._index_passages()
        return self._docs or {}

    def _index_passages(self) -> None:
        self._rows_of, self._docs = {}, {}
        if not self.passages.num_rows:
            return
        docs = self.passages["doc_id"].to_pylist()
        for i, (pid, doc) in enumerate(zip(self.passages["id"].to_pylist(), docs)):
            if doc.startswith(DOC_PREFIX):
                self._rows_of.setdefault(doc[len(DOC_PREFIX) :], []).append(i)
                self._docs[pid] = doc

    def view(self) -> GraphView:
        """The graph view for the newest state (recomputed only when the table moved)."""
        self.state.refresh()
        if self._view is None or self._view_version != self.state.generation:
            hashes = self._doc_hashes() if self.state.forgotten_passages else None
            self._view = graph_view(self.state, self.passages, hashes)
            self._view_version = self.state.generation
        return self._view

    def _doc_hashes(self) -> dict[str, str]:
        """Document id -> content hash now (a forgotten passage returns once its file changed)."""
        rows = self.store.read(DOCUMENTS)
        if rows.num_rows == 0:
            return {}
        return dict(zip(rows["id"].to_pylist(), rows["content_hash"].to_pylist()))

    def _hidden(self) -> tuple[np.ndarray, frozenset[str]]:
        """(n_passages,) passages out of search now (forgotten ones, and those of records
        :meth:`withheld`), and the withheld records."""
        hidden = self.view().hidden
        withheld = self.withheld()
        if withheld:
            rows = self.record_rows()
            hidden = hidden.copy()
            hidden[[i for r in withheld for i in rows.get(r, ())]] = True
        return hidden, withheld

    def visible(self, allowed: np.ndarray | None) -> np.ndarray | None:
        """``allowed`` (n_passages,) with hidden passages turned off (None: all allowed):
        forgotten ones, and those of records :meth:`withheld` now."""
        hidden, _ = self._hidden()
        if not hidden.any():
            return allowed
        return ~hidden if allowed is None else allowed & ~hidden

    def liveness(self, snapshot: SnapshotView) -> Liveness | None:
        """What live passages of ``snapshot`` (the view of :attr:`passages`) still back; None
        while nothing is hidden. The facts, concepts and rules of superseded memories (or, at
        ``as_of``, of memories not true then) go with their passages, in every mode.
        Recomputed only when the hidden set changed."""
        forgotten = self.view().hidden
        withheld = self.withheld()
        same = self._live is not None and self._live[0][0] is forgotten
        if not same or self._live is None or self._live[0][1] != withheld:
            self._live = ((forgotten, withheld), Liveness.of(snapshot, self._hidden()[0]))
        return self._live[1]

    def domains(self) -> set[str]:
        """Domains of live fresh records (a query may filter on them before consolidation)."""
        self.state.refresh()
        if self._domains is None or self._domains[0] != self.state.generation:
            live = {self.state.current[r]["domain"] for r in self.state.live_ids}
            self._domains = (self.state.generation, live)
        return self._domains[1]

    def matching(self, flt: MetadataFilter) -> frozenset[str]:
        """Written records whose metadata passes ``flt``: LanceDB evaluates its predicate over
        the memories table (a table from before the JSON column: the same test in Python)."""
        self.state.refresh()
        where = flt.sql(JSON_COLUMN)
        cached = self._matched.get(where)
        if cached is not None and cached[0] == self.state.generation:
            return cached[1]
        found = self.state.table.matching_ids(where)
        if found is None:
            rows = self.state.current.items()
            found = {r for r, row in rows if flt.matches(read_metadata(row["metadata"]))}
        if len(self._matched) >= 16:
            self._matched.clear()
        self._matched[where] = (self.state.generation, frozenset(found))
        return self._matched[where][1]

    def filter_mask(self, flt: MetadataFilter) -> np.ndarray:
        """(n_passages,) True for the snapshot passages of records :meth:`matching` keeps (file
        passages carry no metadata: never)."""
        mask = np.zeros(self.passages.num_rows, bool)
        rows = self.record_rows()
        picked = [i for r in self.matching(flt) for i in rows.get(r, ())]
        mask[picked] = True
        return mask

    def search(
        self,
        vector: np.ndarray,
        text: str,
        top_k: int,
        domains: list[str] | None = None,
        window: tuple[str | None, str | None] = (None, None),
        flt: MetadataFilter | None = None,
    ) -> list[FreshHit]:
        """The best live records the snapshot does not hold yet (those ``flt`` keeps)."""
        view = self.view()
        exclude = view.in_graph | self.withheld()
        only = (self.matching(flt), flt.sql(JSON_COLUMN)) if flt is not None else None
        return _search(self.state, vector, text, top_k, exclude, domains, window, only)

    def merge(
        self,
        result,
        hits: list[FreshHit],
        top_k: int,
        relevance: Relevance = cosine_relevance,
    ):
        """``result`` with fresh hits interleaved by relevance, at most ``top_k`` passages.

        Graph hits keep their order; each fresh hit goes before the first graph hit whose
        relevance (``hit.relevance`` when set, else its dense cosine) is lower than its own.
        """
        from qortex_core.query.results import PassageHit

        if not hits:
            return result
        fresh = [
            (
                relevance(h),
                PassageHit(
                    id=h.record.id,
                    title="",
                    text=h.record.text,
                    domain=h.record.domain,
                    score=h.score,
                    breakdown={"dense": h.cosine, "lexical": h.lexical, "final": h.score},
                    tier="fresh",
                    time=h.record.time,
                    relevance=relevance(h),
                ),
            )
            for h in hits
        ]
        merged = []
        queue = sorted(fresh, key=lambda pair: -pair[0])
        for hit in result.passages:
            key = relevance_of(hit)
            while queue and queue[0][0] > key:
                merged.append(queue.pop(0)[1])
            merged.append(hit)
        merged.extend(h for _, h in queue)
        return replace(result, passages=merged[:top_k])


def relevance_of(hit) -> float:
    """A hit's relevance in [0, 1]: its own when set, else its dense cosine clipped."""
    value = getattr(hit, "relevance", None)
    if value is not None:
        return float(value)
    return float(min(max(hit.breakdown.get("dense", 0.0), 0.0), 1.0))
