"""BTREE indexes on the key columns of the large tables.

Without one, every lookup, upsert (``merge_insert``) or delete of a few keys scans the whole key
column: at 1M passages a 10-passage run read the 21 M-key embedding cache and the 14.5 M-row
facts table several times. With one, Lance reads the index and only the rows written since it
was last extended (``num_unindexed_rows``), which it scans.

:func:`keep` brings one column's index up to date after a stage's writes:

- a table of :data:`MIN_ROWS` rows or more gets an index (a small one is scanned as fast);
- rows written since are left to the scan until they pass :data:`UNINDEXED_MAX`, then indexed
  as a new segment of the index (pylance ``optimize_indices(num_indices_to_merge=0)``), so a
  small run writes no index version at all;
- past :data:`MAX_SEGMENTS` segments they are merged into one.

A table rewritten whole (``replace``: a full build, a compaction) loses its indexes; the next
:func:`keep` creates them again. An index is never needed for a correct answer: a table with
none, or whose index could not be written, is scanned.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Sequence, TypeVar

from qortex_core.errors import storage_error
from qortex_core.storage import compaction

if TYPE_CHECKING:
    from qortex_core.storage.store import LanceStore

_log = logging.getLogger(__name__)
MIN_ROWS = 50_000  # a smaller table is scanned: an index would not pay for its files
UNINDEXED_MAX = 65_536  # rows written since the index was extended, scanned until then
MAX_SEGMENTS = 8  # segments of one index before they are merged

Done = Literal["", "created", "extended", "merged"]
T = TypeVar("T")


def _index_on(table, column: str):
    """The table's BTREE index on ``column`` (LanceDB's ``IndexConfig``), or None."""
    for index in table.list_indices():
        if list(index.columns) == [column] and str(index.index_type).lower() == "btree":
            return index
    return None


def keep(table, column: str, min_rows: int | None = None) -> Done:
    """Bring the BTREE index on ``column`` of the LanceDB ``table`` up to date (see the module
    text); what it did: ``""`` (nothing: no new table version), ``created``, ``extended``
    (the rows written since, as a new segment) or ``merged`` (every segment into one);
    ``min_rows``: :data:`MIN_ROWS` unless given."""
    from lancedb.index import BTree

    if table.count_rows() < max(MIN_ROWS if min_rows is None else min_rows, 1):
        return ""
    index = _index_on(table, column)
    if index is None:
        table.create_index(column, config=BTree())
        return "created"
    stats = table.index_stats(index.name)
    if stats is None or stats.num_unindexed_rows <= UNINDEXED_MAX:
        return ""
    merge = int(stats.num_indices) if stats.num_indices >= MAX_SEGMENTS else 0
    try:
        dataset = table.to_lance()
    except ImportError:  # no pylance: the whole index, built again
        table.create_index(column, config=BTree(), replace=True)
        return "created"
    dataset.optimize.optimize_indices(index_names=[index.name], num_indices_to_merge=merge)
    table.checkout_latest()  # the version written through pylance
    return "merged" if merge else "extended"


def keep_tables(store: LanceStore, keyed: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """After a stage's writes: each table's small fragments merged when they have piled up
    (:func:`.compaction.compact`), then :func:`keep` on its key ``columns``; what was done, by
    ``table`` (``compacted``) and ``table.column``, where something was. A read-only store
    writes nothing. A compaction or an index Lance refuses to write (a concurrent writer's
    commit won) is left for the next run with a log line: lookups then scan, as without one;
    a full or failing disk is raised."""
    done: dict[str, str] = {}
    if not store.writable:
        return done
    for name, columns in keyed.items():
        table = store.table(name)
        if table is None:
            continue
        merged = _tried(store, name, name, "compact", partial(compaction.compact, table))
        if merged:  # before the indexes: compaction remaps them, then they are kept
            done[name] = "compacted"
        for column in columns:
            what = _tried(store, name, f"{name}.{column}", "index", partial(keep, table, column))
            if what:
                done[f"{name}.{column}"] = what
    return done


def _tried(store: LanceStore, name: str, what: str, verb: str, step: Callable[[], T]) -> T | None:
    """``step()`` on table ``name`` (``what``: the table or its column, for the log); None,
    with a log line, when Lance refuses the write (a concurrent writer's commit won: it is left
    for the next run); a full or failing disk is raised."""
    try:
        return step()
    except (OSError, RuntimeError) as exc:
        where = f"cannot {verb} table {name!r} of data home {store.config.home}"
        error = storage_error(where, exc)
        if error is not None:
            raise error from None
        _log.warning("%s of %s not done: %s", verb, what, exc)
        return None
