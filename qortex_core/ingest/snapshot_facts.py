"""The facts of an incremental snapshot from its base: every fact row the embedding stage did
not touch since the base was built (:mod:`.row_changes`) is the base's row, read from the base
snapshot's memory-mapped tables; only the touched ids are read from LanceDB, with their vectors.

The base keeps each fact's links beside its facts table (table :data:`FACT_LINKS`, row i =
fact row i: ``subject_id``, ``object_id``, ``passage_ids``, and ``relation`` where the build
read it), so the rows it gives equal the stored ones. Without those links, with a chain of
changes that does not reach the base's version of the facts table, with more touched ids than
:data:`MAX_READ`, or with a count that differs from the table's,
the caller reads the table in full as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from qortex_core.ingest import row_changes
from qortex_core.ingest.graph import fact_endpoints
from qortex_core.ingest.snapshot_base import KEYS, Base, RowChange
from qortex_core.storage import id_keys
from qortex_core.storage.arrow_access import take_scattered, view_rows
from qortex_core.storage.store import (
    CONCEPTS,
    FACTS,
    WHERE_IN_MAX,
    LanceStore,
    arrow_to_vectors,
)

FACT_LINKS = "fact_links"  # the snapshot table of each fact's links (the next build's base)
MAX_READ = 4 * WHERE_IN_MAX  # touched ids read by filtered queries; more: the table in full


@dataclass(frozen=True)
class BaseFacts:
    """The facts in a stored order of their own (the base's kept rows, then the touched rows
    read from LanceDB), and what a merge needs to know of them.

    Attributes:
        facts: the fact rows (the columns asked for).
        reuse: (base row of each row or -1, rows whose vector the base holds, the change).
        fresh: the touched rows' ids and (n, d) vectors, as read.
    """

    facts: pa.Table
    reuse: tuple[np.ndarray, np.ndarray, RowChange]
    fresh: tuple[pa.Array, np.ndarray]


def links_of(facts: pa.Table) -> pa.Table:
    """The :data:`FACT_LINKS` table of the snapshot's ``facts`` (in snapshot order)."""
    return facts.select([c for c in facts.column_names if c not in KEYS[FACTS]])


def _base_rows(base: Base, columns: list[str]) -> pa.Table | None:
    """The base's fact rows with ``columns`` (keys and links), or None when it lacks some."""
    links = base.snapshot.tables.get(FACT_LINKS)
    keys = base.keys(FACTS)
    if links is None or links.num_rows != keys.num_rows:
        return None
    both = {**{c: keys[c] for c in keys.column_names}, **{c: links[c] for c in links.column_names}}
    if not set(columns) <= set(both):
        return None
    return pa.table({c: both[c] for c in columns})


def base_facts(
    store: LanceStore, base: Base | None, version: int | None, columns: list[str]
) -> BaseFacts | None:
    """``columns`` of every fact at table version ``version``, taken from ``base`` but for the
    rows touched since (see the module); None when they cannot be."""
    if base is None or version is None:
        return None
    since = base.snapshot.manifest.get("table_versions", {}).get(FACTS)
    ids = None if since is None else row_changes.touched(store, FACTS, int(since), version)
    rows = None if ids is None or len(ids) > MAX_READ else _base_rows(base, columns)
    if rows is None or ids is None:
        return None
    touched = pa.array(ids, pa.string())
    in_base = id_keys.index_in(touched, rows["id"])  # (touched,) base row, -1: not the base's
    keep = np.ones(rows.num_rows, bool)  # (base facts,) one pass over the base's ids
    keep[in_base[in_base >= 0]] = False
    asked = [*columns, "vector"]
    parts = [
        store.read_where(FACTS, "id", ids[s : s + WHERE_IN_MAX], asked)
        for s in range(0, len(ids), WHERE_IN_MAX)
    ]
    read = pa.concat_tables(parts) if parts else None
    if read is None or read.num_rows == 0:
        fresh = rows.slice(0, 0)
        vectors = np.zeros((0, 1), np.float32)
    else:
        fresh = read.select(columns).cast(rows.schema)
        vectors = arrow_to_vectors(read["vector"], read.schema.field("vector").type.list_size)
    # the kept rows as views of the base's runs (kept as views in snapshot order by the
    # reader's :func:`runs_of`, copied only as they are written), then the touched rows
    facts = pa.concat_tables([view_rows(rows, np.flatnonzero(keep)), fresh])
    if facts.num_rows != store.count(FACTS):
        return None  # the base's rows are not the table's: read it in full
    at = id_keys.index_in(fresh["id"], touched)  # (read,) each read row's touched id
    held = (at >= 0) & (in_base[np.maximum(at, 0)] >= 0)  # (read,) the base had it
    change = RowChange(int((~held).sum()), int(held.sum()), int((~keep).sum()) - int(held.sum()))
    base_row = np.concatenate([np.flatnonzero(keep), np.full(fresh.num_rows, -1)])
    reuse = (base_row.astype(np.int64), base_row >= 0, change)
    return BaseFacts(facts, reuse, (fresh["id"].combine_chunks(), vectors))


def ends_from_base(
    base: Base, base_rows: np.ndarray, facts: pa.Table, concept_ids: pa.ChunkedArray
) -> np.ndarray:
    """(n_facts, 2) row in ``concept_ids`` of each fact's subject and object, as
    :func:`~.graph.fact_endpoints` gives them (int32 where the rows fit): a fact the base
    holds (``base_rows[i]`` >= 0) maps the base's ``fact_nodes`` to the new concept rows, the
    others' ends are looked up (one lookup of the base's concepts and those ends together)."""
    nodes = base.snapshot.arrays["fact_nodes"]  # (base facts, 2) int32, memory-mapped
    if len(nodes) != base.keys(FACTS).num_rows or not len(nodes):
        return fact_endpoints(facts, concept_ids)
    new = np.flatnonzero(base_rows < 0)  # (k,) facts read by id
    added = take_scattered(facts.select(["subject_id", "object_id"]), new)
    old_ids = base.keys(CONCEPTS)["id"]
    probe = pa.chunked_array(
        [*old_ids.chunks, *added["subject_id"].chunks, *added["object_id"].chunks], pa.string()
    )
    rows = id_keys.index_in(probe, concept_ids)  # (base concepts + 2 k,) -1: none
    rows = rows.astype(np.int32) if len(concept_ids) < 2**31 else rows  # a gather cached
    moved, k = rows[: len(old_ids)], len(new)
    # (facts, 2): a kept fact's concepts are kept (no -1); row 0 stands in for a new fact's
    ends = moved[np.asarray(nodes)[np.maximum(base_rows, 0)]]
    ends[new, 0], ends[new, 1] = rows[len(old_ids) : len(old_ids) + k], rows[len(old_ids) + k :]
    return ends
