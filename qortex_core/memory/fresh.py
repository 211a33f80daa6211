"""The fresh tier: memories not yet in the loaded snapshot, searched densely and lexically.

:class:`MemoryState` keeps the folded state of the ``memories`` table in step with every
process's writes (the table version is checked at most every ``refresh_s``; only rows written
since the last read are fetched). :func:`graph_view` compares it with a snapshot's passages:
which records the snapshot already holds (tier ``graph``) and which snapshot passages must be
hidden now (forgotten or superseded records, forgotten file passages).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.memory.metadata import read_metadata
from qortex_core.memory.records import DOC_PREFIX, GONE, JSON_COLUMN, MemoryRecord, MemoryTable
from qortex_core.storage.store import arrow_to_vectors

_OVERLAP_S = (
    120  # rows are re-read from this far before the newest seen (clock skew between writers)
)


@dataclass(frozen=True)
class FreshConfig:
    """Attributes:
    refresh_s: the table version is checked at most this often.
    lexical_weight: weight of the min-max BM25 score added to a fresh hit's cosine.
    lexical_candidates: full-text hits considered per query.
    """

    refresh_s: float = 0.2
    lexical_weight: float = 0.1
    lexical_candidates: int = 50


@dataclass(frozen=True)
class FreshHit:
    """A live record that matched: its cosine to the query and its lexical score."""

    record: MemoryRecord
    cosine: float
    lexical: float
    score: float


def record_from_row(row: dict, first: dict | None = None, tier: str = "fresh") -> MemoryRecord:
    """The state of a record from its newest row (and its first row, for ``created_at``)."""
    first = first or row
    return MemoryRecord(
        id=row["id"],
        text=row["text"],
        time=row["time"],
        created_at=first["created_at"],
        updated_at=row["created_at"],
        source=row["source"],
        domain=row["domain"],
        metadata=read_metadata(row["metadata"]),
        revision=int(row["revision"]),
        tier=tier,
        forgotten=row["op"] in GONE,
        merged_into=row["target"] if row["op"] == "merged" else None,
    )


class MemoryState:
    """Every row of the memories table seen so far, and the live records folded from it.

    Rows are folded in one at a time (a record's newest revision wins), so absorbing a write
    costs O(rows written), not O(table); the live vector matrix is rebuilt on the next search.
    """

    def __init__(self, table: MemoryTable, config: FreshConfig = FreshConfig()) -> None:
        self.table = table
        self.config = config
        self.version = -1
        self.generation = 0  # bumped whenever absorbed rows changed the state
        self._checked = float("-inf")
        self._keys: set[str] = set()
        self._since: str | None = None
        self._rows: list[dict] = []  # every row seen (vector dropped), in arrival order
        self._vectors: dict[str, np.ndarray] = {}  # id -> vector of its newest row
        self._matrix: tuple[list[str], np.ndarray] | None = None  # live ids, (n_live, d)
        self._newest_keys: dict[str, str] | None = None  # row key -> id, each id's newest row
        self.current: dict[str, dict] = {}  # id -> newest row (vector dropped)
        self.first_created: dict[str, str] = {}  # id -> created_at of its first row
        self.forgotten_passages: dict[str, str] = {}  # file passage id -> "doc_id\0content hash"

    def refresh(self, force: bool = False) -> bool:
        """Read other processes' writes if the table moved; True when the state changed."""
        now = time.monotonic()
        if not force and now - self._checked < self.config.refresh_s:
            return False
        self._checked = now
        version = self.table.version()
        if version == self.version:
            return False
        rows = self.table.read(self._since)
        self.version = version
        return self.absorb(rows)

    def absorb(self, rows: pa.Table) -> bool:
        """Fold rows in (own writes are absorbed at once, without a re-read)."""
        if rows.num_rows == 0:
            return False
        keys = rows["key"].to_pylist()
        fresh = [i for i, k in enumerate(keys) if k not in self._keys]
        if not fresh:
            return False
        rows = rows.take(pa.array(fresh, pa.int64()))
        dim = rows.schema.field("vector").type.list_size
        vectors = arrow_to_vectors(rows["vector"], dim)  # (n_new, d)
        kept = rows.drop_columns([c for c in ("vector", JSON_COLUMN) if c in rows.column_names])
        for row, vector in zip(kept.to_pylist(), vectors):
            self._fold(row, vector)
        latest = max(rows["created_at"].to_pylist())
        cut = _minus_seconds(latest, _OVERLAP_S)
        self._since = cut if self._since is None else max(self._since, cut)
        self._matrix = self._newest_keys = None
        self.generation += 1
        return True

    def _fold(self, row: dict, vector: np.ndarray) -> None:
        rid = row["id"]
        self._keys.add(row["key"])
        self._rows.append(row)
        if rid not in self.first_created or row["created_at"] < self.first_created[rid]:
            self.first_created[rid] = row["created_at"]
        old = self.current.get(rid)
        if old is not None and (old["revision"], old["created_at"]) >= (
            row["revision"],
            row["created_at"],
        ):
            return
        self.current[rid] = row
        self._vectors[rid] = vector
        if rid.startswith("p_"):
            if row["op"] == "forget":
                self.forgotten_passages[rid] = row["target"] or ""
            else:
                self.forgotten_passages.pop(rid, None)

    def vector_of(self, rid: str) -> np.ndarray | None:
        """The (d,) stored vector of record ``rid``'s newest row (None: unknown)."""
        return self._vectors.get(rid)

    def changed_since(self, seen: int) -> tuple[set[str], int]:
        """Ids of the rows absorbed after the first ``seen``, and how many rows are absorbed
        now (pass it back next time)."""
        return {r["id"] for r in self._rows[seen:]}, len(self._rows)

    def is_live(self, rid: str) -> bool:
        """``rid`` is a written record in search (not forgotten or merged away)."""
        row = self.current.get(rid)
        return rid.startswith("m_") and row is not None and row["op"] not in GONE

    @property
    def live_ids(self) -> list[str]:
        """Written records in search, in the row order of :attr:`vectors`."""
        return self._live()[0]

    @property
    def vectors(self) -> np.ndarray:
        """(n_live, d) stored vectors of the live records."""
        return self._live()[1]

    def _live(self) -> tuple[list[str], np.ndarray]:
        if self._matrix is None:
            live = [
                rid
                for rid, row in self.current.items()
                if rid.startswith("m_") and row["op"] not in GONE
            ]
            dim = next(iter(self._vectors.values())).shape[0] if self._vectors else 1
            matrix = (
                np.stack([self._vectors[r] for r in live]) if live else np.zeros((0, dim))
            ).astype(np.float32)
            self._matrix = (live, matrix)
            self._newest_keys = None
        return self._matrix

    def record(self, rid: str, tier: str = "fresh") -> MemoryRecord | None:
        """The current state of written record ``rid`` (None when unknown)."""
        row = self.current.get(rid)
        if row is None:
            return None
        return record_from_row(row, {"created_at": self.first_created.get(rid, "")}, tier)

    def key_owner(self, key: str) -> str | None:
        """The record whose newest row has ``key`` (None: an older revision or unknown)."""
        if self._newest_keys is None:
            self._newest_keys = {row["key"]: rid for rid, row in self.current.items()}
        return self._newest_keys.get(key)

    def history_rows(self, rid: str) -> list[dict]:
        """Every row of ``rid`` and of the records merged into it, oldest first."""
        absorbed = {r["target"] for r in self._rows if r["id"] == rid and r["op"] == "merge"}
        mine = [r for r in self._rows if r["id"] == rid or r["id"] in absorbed]
        return sorted(mine, key=lambda r: (r["created_at"], r["revision"]))


@dataclass(frozen=True)
class GraphView:
    """How the state meets one snapshot.

    Attributes:
        in_graph: written records whose current text the snapshot holds.
        hidden: (n_passages,) True for snapshot passages that must not be returned now.
    """

    in_graph: frozenset[str]
    hidden: np.ndarray


def _candidate_rows(passages: pa.Table, state: MemoryState) -> np.ndarray:
    """(k,) int64 passage rows :func:`graph_view` must look at: memory passages and passages
    forgotten by id (the rest of a large snapshot never leaves Arrow)."""
    wanted = pc.starts_with(passages["doc_id"], DOC_PREFIX)
    if state.forgotten_passages:
        gone = pa.array(list(state.forgotten_passages), pa.string())
        wanted = pc.or_(wanted, pc.is_in(passages["id"], value_set=gone))
    return np.flatnonzero(pc.fill_null(wanted, False).to_numpy(zero_copy_only=False))


def graph_view(
    state: MemoryState, passages: pa.Table, doc_hashes: dict[str, str] | None = None
) -> GraphView:
    """Records the snapshot holds, and the snapshot passages to hide.

    A passage of record ``m`` (document ``memory:m``) stands for the record while its text is
    part of the record's current text; it is hidden when the record is forgotten, merged away
    or updated past it. A file passage forgotten by id is hidden while its file keeps the
    content hash it had then (``doc_hashes``: document id -> content hash now).
    """
    n = passages.num_rows
    hidden = np.zeros(n, bool)
    if n == 0:
        return GraphView(frozenset(), hidden)
    rows = _candidate_rows(passages, state)  # only these rows are read into Python
    picked = passages.select(["id", "doc_id", "text"]).take(pa.array(rows))
    holds: dict[str, bool] = {}
    for i, pid, doc, text in zip(
        rows.tolist(),
        picked["id"].to_pylist(),
        picked["doc_id"].to_pylist(),
        picked["text"].to_pylist(),
    ):
        if doc.startswith(DOC_PREFIX):
            row = state.current.get(doc[len(DOC_PREFIX) :])
            stands = row is not None and row["op"] not in GONE and text in row["text"]
            hidden[i] = not stands
            holds[doc] = holds.get(doc, True) and stands
        elif pid in state.forgotten_passages:
            mark = state.forgotten_passages[pid]
            doc_id, _, digest = mark.partition("\0")
            hidden[i] = doc_hashes is None or doc_hashes.get(doc_id, digest) == digest
    in_graph = frozenset(d[len(DOC_PREFIX) :] for d, ok in holds.items() if ok)
    return GraphView(in_graph, hidden)


def _minus_seconds(iso: str, seconds: int) -> str:
    moment = dt.datetime.fromisoformat(iso) - dt.timedelta(seconds=seconds)
    return moment.isoformat(timespec="microseconds")


def in_window(when: str | None, since: str | None, until: str | None) -> bool:
    """True when ``when`` lies in [since, until] (a record without a time passes only no filter)."""
    if since is None and until is None:
        return True
    if when is None:
        return False
    return (since is None or when >= since) and (until is None or when <= until)


def search_fresh(
    state: MemoryState,
    vector: np.ndarray,
    query: str,
    top_k: int,
    exclude: frozenset[str] = frozenset(),
    domains: list[str] | None = None,
    window: tuple[str | None, str | None] = (None, None),
    only: tuple[frozenset[str], str] | None = None,
) -> list[FreshHit]:
    """Live records outside ``exclude`` ranked by cosine + lexical_weight x min-max BM25.

    Args:
        vector: (d,) unit query vector; query: its text for the full-text channel.
        exclude: records served by the graph tier instead.
        only: (the records a metadata filter keeps, its ``where`` predicate): the others are
            skipped before the top ``top_k`` are taken, and the full-text channel searches
            only the rows that pass the predicate.
    """
    if not state.live_ids:
        return []
    cos = state.vectors @ np.asarray(vector, np.float32)  # (n_live,)
    lexical = np.zeros(len(cos), np.float32)  # (n_live,) min-max BM25 of each record's newest row
    bm25 = state.table.text_search(
        query, state.config.lexical_candidates, only[1] if only is not None else None
    )
    if bm25:
        at = {rid: i for i, rid in enumerate(state.live_ids)}
        top = max(bm25.values()) or 1.0
        for rid, key_score in _scores_by_record(state, bm25).items():
            if rid in at:
                lexical[at[rid]] = key_score / top
    score = cos + state.config.lexical_weight * lexical  # (n_live,)
    hits: list[FreshHit] = []
    for i in _best_first(score, top_k):
        rid = state.live_ids[i]
        row = state.current[rid]
        if rid in exclude or (domains and row["domain"] not in domains):
            continue
        if only is not None and rid not in only[0]:
            continue
        if not in_window(row["time"], *window):
            continue
        record = cast(MemoryRecord, state.record(rid))  # live ids always have a record
        hits.append(FreshHit(record, float(cos[i]), float(lexical[i]), float(score[i])))
        if len(hits) == top_k:
            break
    return hits


def _best_first(score: np.ndarray, top_k: int):
    """Indices of ``score`` best first: a partial sort of the head, the rest only if needed."""
    head = min(len(score), max(8 * top_k, 64))
    first = np.argpartition(-score, head - 1)[:head] if head < len(score) else np.arange(len(score))
    first = first[np.argsort(-score[first], kind="stable")]  # (head,) best first
    yield from first.tolist()
    if head < len(score):  # filters dropped most of the head: walk the rest in order
        rest = np.setdiff1d(np.argsort(-score, kind="stable"), first, assume_unique=True)
        yield from rest[np.argsort(-score[rest], kind="stable")].tolist()


def _scores_by_record(state: MemoryState, bm25: dict[str, float]) -> dict[str, float]:
    """BM25 scores keyed by record id, kept only for rows that are their record's newest."""
    out: dict[str, float] = {}
    for key, value in bm25.items():
        rid = state.key_owner(key)
        if rid is not None:
            out[rid] = max(out.get(rid, 0.0), value)
    return out
