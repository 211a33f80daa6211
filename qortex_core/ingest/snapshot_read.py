"""The graph_snapshot stage's reads: the stored tables in snapshot order, and their vectors as
``.npy`` files, merged from the base snapshot's where the rows are unchanged
(:mod:`.snapshot_base`) or streamed from LanceDB (:mod:`.snapshot_vectors`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest import snapshot_vectors as vectors
from qortex_core.ingest.cells import FactCells, FactCellsConfig
from qortex_core.ingest.graph import (
    GraphConfig,
    fact_endpoints,
    hub_first_order,
    list_lengths,
    listed_weight,
)
from qortex_core.ingest.snapshot_base import (
    FULL_FRACTION,
    KEYS,
    Base,
    RowChange,
    fetch,
    reused,
    write_merged,
)
from qortex_core.ingest.snapshot_cells import full_cells, layout_of, merged_cells
from qortex_core.ingest.snapshot_facts import base_facts, ends_from_base
from qortex_core.storage import id_keys
from qortex_core.storage.arrow_access import runs_of, take_rows
from qortex_core.storage.segmented_rows import SegmentedRows
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, RULES, SYNONYMS, LanceStore

# what the snapshot uses of the concepts (not their descriptions or domains, in no file of it)
_CONCEPT_COLUMNS = ("id", "name", "passage_ids")


@dataclass
class Merge:
    """What one build takes from its base (None: a full build), filled in as tables are read.

    Attributes:
        base: the base snapshot.
        change: rows added, changed and removed against the base (tables merged or compared).
        merged: tables whose vectors were merged from the base.
        read: tables read in full although there is a base (the change passed the bound).
        versions: the stored tables' versions when the build began (a merged table must still
            be at its version once merged: it is not read again, as a full read would check).
        reuse: a table's :func:`~.snapshot_base.reused` in stored row order, where already
            computed (the facts', by their cells).
        fresh: a table's rows read by id with their vectors (ids, vectors), where its rows
            were taken from the base (:mod:`.snapshot_facts`): their offsets are not the
            table's, their vectors are these.
        fact_base_rows: each fact's row in the base (-1: read by id), in snapshot order,
            when the fact rows were taken from the base.
    """

    base: Base | None
    versions: dict[str, int] = field(default_factory=dict)
    change: RowChange = RowChange()
    merged: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    reuse: dict[str, tuple[np.ndarray, np.ndarray, RowChange]] = field(default_factory=dict)
    fresh: dict[str, tuple[pa.Array, np.ndarray]] = field(default_factory=dict)
    fact_base_rows: np.ndarray | None = None  # (facts,) in snapshot order, where rows are taken


@dataclass(frozen=True)
class Stored:
    """The stored tables a snapshot is assembled from (passages, concepts and facts without
    their vectors, which ``vectors`` writes beside the build, in the same row order)."""

    passages: pa.Table
    concepts: pa.Table
    facts: pa.Table
    rules: pa.Table
    synonyms: pa.Table
    vectors: vectors.VectorFiles
    fact_ends: np.ndarray | None = None  # (facts, 2) subject, object rows of ``concepts``
    links: Links | None = None
    # (concepts,) each concept's row in the base where it has the same id and name there, -1
    # elsewhere; None without a base
    concept_base: np.ndarray | None = None


@dataclass(frozen=True)
class Links:
    """The concepts' passage lists as rows of the tables in snapshot order.

    Attributes:
        rows: (known,) concept row of each listed value that is a stored passage, in list order.
        passages: (known,) that passage's row.
        unknown: listed values that are no stored passage (dangling links).
    """

    rows: np.ndarray
    passages: np.ndarray
    unknown: int


def _renumbered(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``rows`` (old row numbers, -1 none) as rows of the table reordered by ``order`` (int32
    where they fit: the gather's table then stays in the processor's cache longer)."""
    new = np.empty(len(order), np.int32 if len(order) < 2**31 else np.int64)
    new[order] = np.arange(len(order))
    if not len(rows) or rows.min() >= 0:  # no -1: a plain gather
        return new[rows]
    return np.where(rows >= 0, new[np.maximum(rows, 0)], -1)


def _merged(
    store: LanceStore,
    name: str,
    keys: pa.Table,
    order: np.ndarray | None,
    path: Path,
    merge: Merge,
    ordered: pa.Table | None = None,
) -> np.ndarray | SegmentedRows | None:
    """``name``'s vectors in snapshot order merged from the base (None: not done)."""
    if merge.base is None:
        return None
    offsets = np.arange(keys.num_rows) if order is None else np.asarray(order, np.int64)
    if ordered is None:
        ordered = keys if order is None else keys.take(pa.array(order))
    known = merge.reuse.get(name)
    if known is not None:  # the stored-order match, put in snapshot order
        known = (known[0][offsets], known[1][offsets], known[2])
    change, written = write_merged(
        store, name, ordered, offsets, merge.base, path, known, merge.fresh.get(name)
    )
    if written is not None and store.versions().get(name) != merge.versions.get(name):
        raise vectors.changed(name)  # a write between the reads of this build
    merge.change = merge.change + change
    (merge.merged if written is not None else merge.read).append(name)
    return written


def staged(
    store: LanceStore,
    name: str,
    keys: pa.Table,
    order: np.ndarray | None,
    folder: Path,
    merge: Merge,
    ordered: pa.Table | None = None,
) -> np.ndarray | SegmentedRows:
    """``name``'s vectors, row i = stored row ``order[i]``, as a memory map of a finished
    ``.npy`` file in ``folder`` (never held whole in memory), or of the base's file and a delta
    (:mod:`.snapshot_segments`); ``keys`` holds the table's key
    columns (:data:`~.snapshot_base.KEYS`, only ``id`` when no merge is wanted), ``ordered``
    the same in snapshot order when the caller has them (not taken again)."""
    final = folder / f"{name}.npy"
    stored = folder / f"{name}.stored.npy"
    merged = None if stored.exists() else _merged(store, name, keys, order, final, merge, ordered)
    if merged is not None:
        return merged
    if not stored.exists() and name in merge.fresh:  # rows of the base's, not the table's order
        raise vectors.changed(name)
    if not stored.exists():
        vectors.write_stored(store, name, keys["id"], stored)
    if order is None:
        return vectors.load(stored)
    vectors.write_permuted(stored, order, final)
    vectors.WRITTEN.take(stored)  # its digest is of no use: the file goes
    stored.unlink()
    return vectors.load(final)


def _fact_cells(
    store: LanceStore, facts: pa.Table, config: FactCellsConfig, folder: Path, merge: Merge
) -> FactCells | None:
    """The fact index (:mod:`.snapshot_cells`): from the base's cells when it has them in this
    layout and the change is within the merge's bound, else from every vector, streamed in
    stored order to ``folder`` (where :func:`staged` then permutes them)."""
    if facts.num_rows < max(config.min_facts, 2):
        return None
    layout = layout_of(facts.num_rows, config)  # a base of another layout or size: anew
    bounds = None if merge.base is None else merge.base.fact_bounds(layout)
    if bounds is not None and merge.base is not None:
        base = merge.base
        keys = facts.select(list(KEYS[FACTS]))
        if FACTS not in merge.reuse:
            merge.reuse[FACTS] = reused(keys, base.keys(FACTS))
        rows, same, change = merge.reuse[FACTS]
        if (~same).sum() <= FULL_FRACTION * facts.num_rows:
            new = np.flatnonzero(~same)
            ids = keys["id"].take(pa.array(new)).combine_chunks()
            fresh = fetch(store, FACTS, new, ids, merge.fresh.get(FACTS))
            old = base.vectors(FACTS)
            if not len(fresh) or fresh.shape[1:] == old.shape[1:]:  # else: another width
                base_row = np.where(same, rows, -1)
                base_ids = base.keys(FACTS)["id"]
                centroids = base.snapshot.arrays.get("fact_cell_centroids")
                return merged_cells(
                    keys["id"], base_row, fresh, base_ids, old, bounds, config, centroids
                )
    stored = folder / f"{FACTS}.stored.npy"
    if FACTS in merge.fresh:  # rows in the base's order, not the table's: not streamed
        raise vectors.changed(FACTS)
    vectors.write_stored(store, FACTS, facts["id"], stored)
    with vectors.mapped(stored) as (rows_map, release):
        return full_cells(facts["id"], rows_map, config, release)


def _by_id(table: pa.Table) -> np.ndarray:
    """(n,) stored rows in id order: the snapshot's order does not depend on where a row was
    stored (an incremental run appends, a full build writes in chunk order)."""
    return id_keys.sort_indices(table["id"])  # ids are unique: a total order


def _id_order_in_cells(cells: FactCells, ids: pa.ChunkedArray) -> FactCells:
    """``cells`` with each cell's facts in id order (``ids``: the facts' ids by stored row).

    The rows are grouped by cell in stored order (a radix sort of small integers); only the
    cells whose ids do not ascend then are sorted. Rows taken from the base come in its order
    (by cell, in id order), so an incremental build sorts only the cells its new or moved
    facts joined, not every id."""
    cell = np.repeat(np.arange(len(cells.bounds) - 1), np.diff(cells.bounds))  # (n,) cell order
    home = np.empty(len(ids), np.int32 if len(cells.bounds) < 2**31 else np.int64)
    home[cells.order] = cell  # (n,) each stored row's cell
    small = home.astype(np.int16) if len(cells.bounds) <= 2**15 else home
    keys = id_keys.packed(ids)
    if keys is None:  # ids of another format: rows in id order, then stably by cell
        by_id = id_keys.sort_indices(ids)
        by_cell = by_id[np.argsort(small[by_id], kind="stable")]
        return FactCells(by_cell, cells.centroids, cells.bounds)
    order = np.argsort(small, kind="stable")  # (n,) rows by cell, in stored order within each
    ranked = keys[1][order]  # (n,) their ids' keys
    bounds = cells.bounds
    descents = np.flatnonzero(ranked[1:] <= ranked[:-1]) + 1  # (d,) a key not above the last
    descents = descents[~np.isin(descents, bounds)]  # a cell's first row follows no row of it
    for c in np.unique(np.searchsorted(bounds, descents, side="right") - 1).tolist():
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        order[lo:hi] = order[lo:hi][np.argsort(ranked[lo:hi], kind="stable")]
    return FactCells(order, cells.centroids, cells.bounds)


def _from_base(
    store: LanceStore, config: GraphConfig, merge: Merge, columns: list[str]
) -> pa.Table | None:
    """The facts taken from the base but for the rows changed since (:mod:`.snapshot_facts`),
    when its fact cells can be merged too; else None (the table is read in full)."""
    if merge.base is None:
        return None
    n, cells = store.count(FACTS), config.fact_cells
    if n >= max(cells.min_facts, 2) and merge.base.fact_bounds(layout_of(n, cells)) is None:
        return None  # the cells are computed anew, from every vector in the table's order
    got = base_facts(store, merge.base, merge.versions.get(FACTS), columns)
    if got is None or (~got.reuse[1]).sum() > FULL_FRACTION * n:
        return None  # ... and so are the vectors of a change this large
    merge.reuse[FACTS], merge.fresh[FACTS] = got.reuse, got.fresh
    return got.facts


def _facts(
    store: LanceStore, config: GraphConfig, folder: Path, merge: Merge, files: vectors.VectorFiles
) -> tuple[pa.Table, FactCells | None]:
    """The facts' links and texts in snapshot order, and their cells; their vectors are
    handed to ``files``."""
    # the facts' links and texts (the texts key a merged vector, and make the facts table);
    # the relation column only when relation weights are set
    links = [*KEYS[FACTS], "subject_id", "object_id", "passage_ids"]
    links = links + ["relation"] if config.relation_weights else links
    taken = _from_base(store, config, merge, links)
    facts = store.read_columns(FACTS, links) if taken is None else taken
    # facts cell by cell when they are many: a query scores only its nearest cells' facts
    cells = _fact_cells(store, facts, config.fact_cells, folder, merge)
    cells = None if cells is None else _id_order_in_cells(cells, facts["id"])
    order = _by_id(facts) if cells is None else cells.order
    stored_facts = facts.select(list(KEYS[FACTS]))
    # taken from the base: its rows stay views of its memory-mapped file until written (the
    # graph is built from them); read in full: copied by runs
    facts = take_rows(facts, order) if taken is None else runs_of(facts, order)
    if FACTS in merge.fresh:
        merge.fact_base_rows = merge.reuse[FACTS][0][order]
    f_keys = facts.select(list(KEYS[FACTS]))
    files.submit(FACTS, partial(staged, store, FACTS, stored_facts, order, folder, merge, f_keys))
    return facts, cells


def read_stored(
    store: LanceStore,
    passages: pa.Table,
    config: GraphConfig,
    folder: Path,
    merge: Merge,
    files: vectors.VectorFiles,
) -> tuple[Stored, FactCells | None]:
    """The stored tables in snapshot order, and the fact index when facts are many; the
    vectors are memory maps of files ``files`` writes to ``folder`` beside the build.

    Snapshot order is a function of the rows, not of their stored order: facts by cell (or
    all of them) in id order, concepts and passages hub first with ties in id order, rules by
    id and synonym edges by their ends. A full build and a chain of incremental ones give the
    same arrays."""
    with ThreadPoolExecutor(1, thread_name_prefix="snapshot-concepts") as pool:
        reading = pool.submit(store.read_columns, CONCEPTS, _CONCEPT_COLUMNS)  # beside the facts
        facts, cells = _facts(store, config, folder, merge, files)
        stored_concepts = reading.result()
    stored_passages = passages
    c_by_id, p_by_id = _by_id(stored_concepts), _by_id(stored_passages)
    concept_ids = stored_concepts["id"].take(pa.array(c_by_id))  # the whole tables are taken
    ends = None  # (facts, 2) the facts' concept rows, -1 unknown: once for both uses
    taken = merge.fact_base_rows  # the fact rows came from the base: so can their endpoints
    if facts.num_rows and len(concept_ids) and taken is not None and merge.base is not None:
        ends = ends_from_base(merge.base, taken, facts, concept_ids)
    elif facts.num_rows and len(concept_ids):
        ends = fact_endpoints(facts, concept_ids)
    # the concepts' passage lists looked up once, in stored order, for every use after
    lists = stored_concepts["passage_ids"]
    listed_at = id_keys.index_in(pc.list_flatten(lists), stored_passages["id"])  # (listings,)
    # hubs first within each node block: locality for the PPR products (ingest/graph.py)
    c_weight = listed_weight(list_lengths(lists)[c_by_id], facts, ends)  # (concepts,) id order
    p_weight = np.bincount(listed_at[listed_at >= 0], minlength=len(p_by_id))[p_by_id]
    c_local = hub_first_order(c_weight, len(c_weight))
    p_local = hub_first_order(p_weight, len(p_weight))
    ends = None if ends is None else _renumbered(ends, c_local)  # snapshot concept rows
    c_order, p_order = c_by_id[c_local], p_by_id[p_local]  # as stored rows
    links = _links(lists, listed_at, c_order, p_order)
    concepts = stored_concepts.select(["id", "name"]).take(pa.array(c_order))  # the lists: links
    passages = stored_passages.take(pa.array(p_order))
    c_keys = list(KEYS[CONCEPTS])
    c_stored, c_ordered = stored_concepts.select(c_keys), concepts.select(c_keys)
    concept_base = _concept_match(c_ordered, c_order, merge)
    files.submit(
        CONCEPTS, partial(staged, store, CONCEPTS, c_stored, c_order, folder, merge, c_ordered)
    )
    p_stored, p_ordered = stored_passages.select(["id"]), passages.select(["id"])
    files.submit(
        PASSAGES, partial(staged, store, PASSAGES, p_stored, p_order, folder, merge, p_ordered)
    )
    del stored_concepts, stored_passages
    rules = store.read_without(RULES, ["vector"])  # no snapshot file holds rule vectors
    rules = rules.take(_by_id(rules)) if rules.num_rows else rules
    synonyms = store.read(SYNONYMS)
    if synonyms.num_rows:
        ends_order = [("a", "ascending"), ("b", "ascending")]
        synonyms = synonyms.take(pc.sort_indices(synonyms, ends_order))
    stored = Stored(passages, concepts, facts, rules, synonyms, files, ends, links, concept_base)
    return stored, cells


def _concept_match(ordered: pa.Table, order: np.ndarray, merge: Merge) -> np.ndarray | None:
    """(concepts,) each concept's row in the base where it has the same id and name there, -1
    elsewhere, in snapshot order (``ordered``: the concepts' keys, stored row ``order[i]``);
    the match is kept in ``merge.reuse`` in stored order for the vectors' merge. None without
    a base. One lookup for the vectors, the text frequencies and the phrase keys."""
    if merge.base is None or ordered.num_rows == 0:
        return None
    rows, same, change = reused(ordered, merge.base.keys(CONCEPTS))  # snapshot order
    stored_rows, stored_same = np.empty_like(rows), np.empty_like(same)
    stored_rows[order], stored_same[order] = rows, same
    merge.reuse[CONCEPTS] = (stored_rows, stored_same, change)
    return np.where(same, rows, -1)


def _links(
    lists: pa.ChunkedArray, listed_at: np.ndarray, c_order: np.ndarray, p_order: np.ndarray
) -> Links:
    """The concepts' passage links in snapshot order (:class:`Links`) from the stored-order
    lookup ``listed_at`` (each listed value's stored passage row, -1 none): each concept's
    run of it gathered in its new place, and the passage rows renumbered."""
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    starts = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])  # (concepts + 1,) where each stored run starts
    runs = lengths[c_order].astype(np.int64)  # (concepts,) in snapshot order
    ahead = np.cumsum(runs) - runs  # (concepts,) where each run lands
    at = np.repeat(starts[c_order] - ahead, runs) + np.arange(int(runs.sum()))  # (listings,)
    passage = listed_at[at]  # (listings,) stored passage row, -1 none
    known = passage >= 0
    row = np.repeat(np.arange(len(runs)), runs)[known]
    return Links(row, _renumbered(passage[known], p_order), int(len(listed_at) - known.sum()))
