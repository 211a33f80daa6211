"""The passages' full-text (BM25) index: a LanceDB table kept in step with ``passages``.

``passage_text`` holds one row per passage (``id``, ``text`` = title + newline + text, as
embedded) under LanceDB's native full-text index (``FTS()``). :func:`sync` makes it hold
exactly the passages being published: new passages are appended, gone ones deleted. New rows
are indexed as a new segment of the index (Lance's ``optimize_indices`` with
``num_indices_to_merge=0``, through ``pylance``): only they are tokenised, in milliseconds,
where LanceDB's ``optimize()`` rewrites the whole index (2-3 s at 100k passages). BM25
statistics span the segments, so the scores are those of one index over the same rows
(a test checks). Past :data:`MAX_SEGMENTS` segments, ``optimize()`` folds them into one and
compacts the table. Passage ids are content hashes, so an id never changes text. The table
keeps stable row ids, so a merge does not remap the index; a sync that deletes rebuilds it,
as such an index still counts deleted rows (:func:`_rebuild_after_deletes`).

Each snapshot pins the version :func:`sync` returns (manifest ``table_versions``); a query
checks that version out (:func:`open_pinned`), so it searches exactly its snapshot's
passages with the BM25 statistics of that set, while a newer ingest writes the next
version. Versions are dropped only by ``qortex prune`` (retention keeps every version
since the oldest kept snapshot); :func:`sync` never cleans any.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage.sql import sql_in

PASSAGE_TEXT = "passage_text"
_KEEP_VERSIONS = dt.timedelta(days=36500)  # optimize() must not clean versions snapshots pin
_DELETE_BATCH = 500
_TIE_MARGIN = 32  # hits read past the limit, so passages tied at the limit are ranked by id
_STABLE_IDS = {"new_table_enable_stable_row_ids": "true"}
_STABLE = {b"qortex.stable_row_ids": b"1"}  # schema metadata of a table made with them
MAX_SEGMENTS = 16  # index segments (one per sync that added rows) before they are folded
_REBUILD_TAG = "qortex-rebuild-index"  # set while a sync's deletes await the index rebuild

_log = logging.getLogger(__name__)


def passage_rows(passages: pa.Table) -> pa.Table:
    """(id, text) rows of a passages table; text as embedded: title, newline, text."""
    # cast: an emptied table may read back with null-typed columns
    pid, title, text = (pc.cast(passages[c], pa.string()) for c in ("id", "title", "text"))
    joined = pc.if_else(pc.equal(title, ""), text, pc.binary_join_element_wise(title, text, "\n"))
    return pa.table({"id": pid, "text": joined})


def _create(db, rows: pa.Table):
    """The table, with stable row ids: a compaction then moves rows without remapping the
    index, which makes merging a few new rows cheaper (docs/benchmarks.md). Deleted
    rows stay in such an index's statistics, so a sync that deletes rebuilds it
    (:func:`_rebuild_after_deletes`)."""
    from lancedb.index import FTS

    marked = rows.replace_schema_metadata({**(rows.schema.metadata or {}), **_STABLE})
    table = db.create_table(PASSAGE_TEXT, marked, exist_ok=False, storage_options=_STABLE_IDS)
    table.create_index("text", config=FTS(with_position=False))
    return table


def _stable(table) -> bool:
    """Whether ``table`` was made with stable row ids (older homes' tables were not)."""
    return all((table.schema.metadata or {}).get(k) == v for k, v in _STABLE.items())


def _pending(table) -> bool:
    """A sync deleted rows and was stopped before it rebuilt the index."""
    return _REBUILD_TAG in table.tags.list()


def finish_rebuild(table) -> None:
    """Finish the index rebuild a stopped sync left marked (its version tag would block the
    cleanup of old versions: ``qortex prune`` and ``purge`` call this first)."""
    _rebuild_after_deletes(table, deleting=False)


def _rebuild_after_deletes(table, deleting: bool) -> None:
    """Around a sync's deletes on a stable-row-id table: mark (a version tag) before them,
    rebuild the index and drop the mark after; a sync stopped in between leaves the mark,
    and the next one rebuilds."""
    from lancedb.index import FTS

    if not _stable(table):
        return  # optimize() remaps such an index, dropping deleted rows
    if deleting and not _pending(table):
        table.tags.create(_REBUILD_TAG, table.version)
    elif not deleting and _pending(table):
        table.create_index("text", config=FTS(with_position=False), replace=True)
        table.tags.delete(_REBUILD_TAG)


def open_latest(db):
    try:
        return db.open_table(PASSAGE_TEXT)
    except (FileNotFoundError, ValueError):
        return None


@dataclass(frozen=True)
class SyncPlan:
    """What :func:`sync` has to do to make ``passage_text`` hold a passage set: rows to add
    and ids to delete.

    Attributes:
        table: the table, None when it is to be made (or stays absent: no passage at all).
        new: (id, text) rows not held yet (every row when the table is to be made).
        gone: held ids that are not among the passages.
        stale: the rows are right but the index does not cover exactly them (a run stopped
            between writing rows and indexing them): it is merged again.
    """

    table: Any
    new: pa.Table
    gone: list[str]
    stale: bool = False

    @property
    def idle(self) -> bool:
        """Nothing to write: the table holds exactly the passages, indexed (or there are none)."""
        return self.new.num_rows == 0 and not self.gone and not self.stale

    @property
    def version(self) -> int:
        """The table's version as it stands (0: no table)."""
        return int(self.table.version) if self.table is not None else 0


def plan_sync(db, passages: pa.Table) -> SyncPlan:
    """What :func:`sync` would write for ``passages`` (a read of the held ids; no write)."""
    table = open_latest(db)
    if table is None:
        return SyncPlan(None, passage_rows(passages), [])
    held = table.search().select(["id"]).limit(None).to_arrow()["id"]  # no Python set of ids
    ids = pc.cast(passages["id"], pa.string())
    # the text of the new passages only: joining every title and text costs seconds at 1M
    new = passage_rows(passages.filter(pc.invert(pc.is_in(ids, value_set=held))))
    gone = sorted(set(held.filter(pc.invert(pc.is_in(held, value_set=ids))).to_pylist()))
    stale = new.num_rows == 0 and not gone and (_pending(table) or not _covered(table))
    return SyncPlan(table, new, gone, stale)


def apply_sync(db, plan: SyncPlan) -> int:
    """Carry out ``plan``; the table's version after it (0: no passages, no table). The
    index merge (``optimize()``) costs about the whole index, so a caller with other work may
    run this beside it (it writes ``passage_text`` only)."""
    table = plan.table
    if plan.idle:
        return plan.version
    if table is None:
        return int(_create(db, plan.new).version)
    if plan.gone:
        _rebuild_after_deletes(table, deleting=True)
    if plan.new.num_rows:
        table.add(plan.new)
    for start in range(0, len(plan.gone), _DELETE_BATCH):
        table.delete(sql_in("id", plan.gone[start : start + _DELETE_BATCH]))
    if plan.gone or plan.stale or not _index_segment(table):
        table.optimize(cleanup_older_than=_KEEP_VERSIONS)  # index the new rows, compact
        _fold_segments(table)
    _rebuild_after_deletes(table, deleting=False)
    _reindex_if_stale(table)
    return int(table.version)


def segments(table) -> int:
    """The number of segments of the table's full-text index (0: no index)."""
    indices = table.list_indices()
    return int(table.index_stats(indices[0].name).num_indices) if indices else 0


def _index_segment(table) -> bool:
    """Index the rows just added as a new segment of the index; False when that is not the
    way here (the segments are at :data:`MAX_SEGMENTS`, the table has no stable row ids, or
    ``pylance`` is missing): the caller then runs ``optimize()``."""
    if not _stable(table) or not 0 < segments(table) < MAX_SEGMENTS:
        return False
    try:
        dataset = table.to_lance()
    except ImportError:
        return False
    dataset.optimize.optimize_indices(num_indices_to_merge=0)  # the new rows only
    table.checkout_latest()  # the version written through pylance
    return True


def _fold_segments(table) -> None:
    """Merge the index's segments into one (``optimize()`` leaves them as they are)."""
    count = segments(table)
    if count <= 1:
        return
    try:
        dataset = table.to_lance()
    except ImportError:
        return
    dataset.optimize.optimize_indices(num_indices_to_merge=count)
    table.checkout_latest()


def sync(db, passages: pa.Table) -> int:
    """Make ``passage_text`` hold exactly ``passages``' ids; its version (0: no passages).

    Args:
        db: the store's LanceDB connection.
        passages: the passages table (``id``, ``title``, ``text``) being published.
    """
    return apply_sync(db, plan_sync(db, passages))


def _covered(table) -> bool:
    """Whether the full-text index covers exactly the table's rows (none unindexed, none
    deleted but still counted); False when the table has no index."""
    indices = table.list_indices()
    if not indices:
        return False
    stats = table.index_stats(indices[0].name)
    return stats.num_unindexed_rows == 0 and stats.num_indexed_rows == table.count_rows()


def _reindex_if_stale(table) -> None:
    """Rebuild the index when it does not cover exactly the table's rows (deleted rows still
    counted, or rows left unindexed): its BM25 statistics would then differ from those of an
    index built on the same passages at once."""
    from lancedb.index import FTS

    if _covered(table):
        return
    _log.info("passage_text: the full-text index is rebuilt (its statistics drifted)")
    table.create_index("text", config=FTS(with_position=False), replace=True)


def open_pinned(db, version: int):
    """The table checked out at ``version`` (a snapshot's), else the latest; None when absent.

    Returns:
        (table, exact): ``exact`` False when the pinned version is gone (pruned) and the
        latest version is searched instead.
    """
    table = open_latest(db)
    if table is None or not version:
        return None, False
    try:
        table.checkout(int(version))
    except (ValueError, RuntimeError, OSError) as exc:
        _log.warning("passage_text version %s unavailable (%s): searching the latest", version, exc)
        return open_latest(db), False
    return table, True


def search(table, text: str, limit: int) -> tuple[list[str], np.ndarray]:
    """BM25 search of ``text``: the ids of the best ``limit`` passages and their scores.

    The query is matched as plain terms (``MatchQuery``: no query syntax to trip over);
    terms are lower-cased, stemmed and stop words dropped, as when indexing.
    """
    from lancedb.query import MatchQuery

    if not text.strip():
        return [], np.zeros(0, np.float32)
    hits = (
        # pydantic dataclass: the other fields have defaults that mypy (no pydantic plugin) misses
        table.search(MatchQuery(text, "text"), query_type="fts")  # type: ignore[call-arg]
        .limit(limit + _TIE_MARGIN)
        .select(["id", "_score"])
        .to_arrow()
    )
    return ranked(hits["id"].to_pylist(), hits["_score"].to_numpy(), limit)


def ranked(ids: list[str], scores: np.ndarray, limit: int) -> tuple[list[str], np.ndarray]:
    """The best ``limit`` of (id, score) hits, by score then id.

    LanceDB orders equal scores by where the rows lie, which differs between a table synced
    step by step and one written at once; by id the order is a function of the passage set.
    """
    score = np.asarray(scores, dtype=np.float32)
    order = np.lexsort((np.asarray(ids, dtype=str), -score))[:limit]
    return [ids[i] for i in order], score[order]
