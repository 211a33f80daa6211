"""The embedding stage's incremental path: the four tables brought up to date with the chunks
that changed (:class:`~.embed_inputs.ChunkDiff`), reading and writing only the rows they touch.

- passages: rows of removed chunks deleted, rows of new and moved chunks written (a moved
  chunk keeps its vector: its id is the hash of its text);
- concepts, facts and rules: the node ids that the changed chunks' old and new payloads
  mention are the touched rows. Each touched row depends only on the chunks that mention
  it, which are the chunks its stored row lists (less the removed ones) and the changed
  chunks: fact and rule rows are merged again (:class:`~.node_tables.NodeTables`) over just
  those chunks; concept rows (a common concept is named by a large share of the chunks) are
  updated from their stored rows (:mod:`.concept_delta`). Either way they equal what a full
  build gives. Touched rows no chunk mentions any more are deleted; rows equal to their
  stored ones are not rewritten.

A written row whose id and embedded text its stored row has keeps that row's vector; every
other text is looked up in the embedding cache (then the model), all tables' texts in one
lookup. Writes go through the store's upsert and delete (one writer: this stage). After an
incremental run the tables hold a full build's rows but not in its order (upserted rows come
last): a reader that needs a canonical order sorts by id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import QortexError
from qortex_core.ingest.chunk_stage import Progress
from qortex_core.ingest.concept_delta import updated_concepts
from qortex_core.ingest.embed_cache import CachedEmbedder
from qortex_core.ingest.embed_inputs import ChunkDiff, LazyInputs, rows_of
from qortex_core.ingest.node_tables import ChunkKey, NodeTables
from qortex_core.ingest.vector_reuse import TEXT_COLUMNS, embedded_texts
from qortex_core.storage.sql import sql_in
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    FACTS,
    PASSAGES,
    RULES,
    LanceStore,
    arrow_to_vectors,
    vectors_to_arrow,
)

NODE_TABLES = (CONCEPTS, FACTS, RULES)


@dataclass
class TableDelta:
    """One table's rows to write (without vectors), their embedded texts, the vectors kept
    from the stored rows (``kept[i]``: row i's, where ``keep[i]``) and the ids to delete."""

    name: str
    rows: pa.Table
    texts: list[str]
    keep: np.ndarray
    kept: np.ndarray
    deleted: list[str]
    added: int = 0  # rows whose id the table did not hold
    vectors: np.ndarray | None = field(default=None)

    @property
    def changed(self) -> int:
        return self.rows.num_rows - self.added


def _merged(part: pa.Table) -> NodeTables:
    """The node tables merged over the chunks of ``part`` (input rows sorted by id)."""
    keys = [ChunkKey(i, d) for i, d in zip(part["id"].to_pylist(), part["domain"].to_pylist())]
    payloads = {
        i: p for i, p in zip(part["id"].to_pylist(), part["payload"].to_pylist()) if p is not None
    }
    return NodeTables(keys, payloads)


def _node_ids(part: pa.Table) -> dict[str, pa.Array]:
    """The ids of the concepts, facts and rules the chunks of ``part`` mention."""
    merged = _merged(part)
    return {
        CONCEPTS: merged.concepts()["id"].combine_chunks(),
        FACTS: merged.facts()["id"].combine_chunks(),
        RULES: merged.rules()["id"].combine_chunks(),
    }


FILTER_IDS = 4096  # ids asked for by one filtered query


def _stored_rows(
    store: LanceStore, name: str, wanted: pa.Array | pa.ChunkedArray, columns: list[str]
) -> pa.Table:
    """``columns`` of the stored rows whose id is in ``wanted``: filtered queries of
    :data:`FILTER_IDS` ids (Lance reads the id column and only the matching rows, never the
    whole table in Python)."""
    table = store.open_latest(name)
    values = [v for v in dict.fromkeys(pa.chunked_array([wanted]).to_pylist()) if v]
    if table is None or not values:
        return pa.table({"id": pa.array([], pa.string())})
    parts = []
    for start in range(0, len(values), FILTER_IDS):
        part = values[start : start + FILTER_IDS]
        query = table.search().where(sql_in("id", part)).select(columns).limit(None)
        parts.append(query.to_arrow())
    return pa.concat_tables(parts)


def _identity(name: str, rows: pa.Table) -> pa.Array:
    """The id and the columns a row's embedded text is made of, joined."""
    columns = [pc.cast(rows[c], pa.string()) for c in TEXT_COLUMNS.get(name, ("id", "text"))]
    if len(columns) == 1:
        return columns[0]
    return pc.binary_join_element_wise(*columns, "\0")


def _keep_vectors(name: str, rows: pa.Table, stored: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, (n, d) kept vectors) for ``rows`` from the ``stored`` rows of the same
    identity."""
    if stored.num_rows == 0 or "vector" not in stored.column_names:
        return np.zeros(rows.num_rows, bool), np.zeros((rows.num_rows, 0), np.float32)
    at = pc.index_in(_identity(name, rows), value_set=_identity(name, stored))
    keep = pc.is_valid(at).to_numpy(zero_copy_only=False)
    width = stored.schema.field("vector").type.list_size
    vectors = arrow_to_vectors(stored["vector"], width)  # (stored, d)
    kept = np.zeros((rows.num_rows, width), np.float32)
    kept[keep] = vectors[at.drop_null().to_numpy()]
    return keep, kept


def _comparable(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A column as scalars Arrow can compare: a list of strings joined (``\\x1f``-separated,
    with its length, so ``["a"]`` and ``["a", ""]`` differ)."""
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        joined = pc.binary_join(column, "\x1f")
        return pc.binary_join_element_wise(
            pc.cast(pc.list_value_length(column), pa.string()), joined, ":"
        )
    return column


def _same_as_stored(rows: pa.Table, stored: pa.Table) -> np.ndarray:
    """(n,) True where the stored row of the same id has every column of ``rows`` equal
    (Arrow compares; lists by their joined text)."""
    if stored.num_rows == 0 or not set(rows.column_names) <= set(stored.column_names):
        return np.zeros(rows.num_rows, bool)
    at = pc.index_in(rows["id"], value_set=stored["id"])
    same = pc.is_valid(at).to_numpy(zero_copy_only=False)
    pos = at.fill_null(0)
    for column in rows.column_names:
        old, new = _comparable(stored[column].take(pos)), _comparable(rows[column])
        equal = pc.fill_null(pc.equal(old, new), False)
        both_null = pc.and_(pc.is_null(old), pc.is_null(new))
        same &= pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
    return same


def _stored_of(store: LanceStore, name: str, touched: pa.Array) -> pa.Table:
    """Every column of the stored rows of ``name`` with a ``touched`` id."""
    table = store.open_latest(name)
    return _stored_rows(store, name, touched, table.schema.names if table is not None else ["id"])


def _delta(name: str, rows: pa.Table, stored: pa.Table, touched: pa.Array) -> TableDelta:
    """The delta that makes the ``touched`` rows of ``name`` the new ``rows``: rows equal to
    their ``stored`` ones are left out, touched ids without a row deleted."""
    gone = touched.filter(pc.invert(pc.is_in(touched, value_set=rows["id"]))).to_pylist()
    rows = rows.filter(pa.array(~_same_as_stored(rows, stored)))
    keep, kept = _keep_vectors(name, rows, stored)
    had = pc.is_in(rows["id"], value_set=stored["id"]) if stored.num_rows else None
    return TableDelta(
        name,
        rows,
        embedded_texts(name, rows),
        keep,
        kept,
        gone,
        added=rows.num_rows - (int(pc.sum(had).as_py() or 0) if had is not None else 0),
    )


def node_delta(
    store: LanceStore, name: str, current: LazyInputs, touched: pa.Array, changed: list[str]
) -> TableDelta:
    """The rows of fact or rule table ``name`` with a ``touched`` id, merged again over the
    chunks that mention them (those the stored rows list, and the ``changed`` chunks)."""
    stored = _stored_of(store, name, touched)
    listed = pc.list_flatten(stored["passage_ids"]).to_pylist() if stored.num_rows else []
    part = current.rows({*listed, *changed})  # every chunk naming a touched id
    rows = getattr(_merged(part), name)()
    return _delta(name, rows.filter(pc.is_in(rows["id"], value_set=touched)), stored, touched)


@dataclass
class NodeDeltas:
    """The node tables' deltas, and ``listed`` (``id``, ``listed``) of the changed chunks and
    of the recorded chunks the touched concepts name (the record takes the changed ones')."""

    deltas: list[TableDelta]
    listed: pa.Table


def _listings(stored: pa.Table, recorded: LazyInputs, mine: pa.Table) -> pa.Table:
    """``id``, ``listed``, ``domain`` of every chunk the ``stored`` concept rows name (as
    recorded: such a chunk is unchanged) and of the changed chunks (``mine``, as merged now)."""
    named = pc.list_flatten(stored["passage_ids"]) if stored.num_rows else pa.array([], pa.string())
    others = pc.unique(named).filter(pc.invert(pc.is_in(pc.unique(named), value_set=mine["id"])))
    kept = recorded.rows(others.to_pylist()).select(["id", "listed", "domain"])
    return pa.concat_tables([kept.cast(mine.schema), mine])


def node_deltas(
    store: LanceStore, current: LazyInputs, recorded: LazyInputs, diff: ChunkDiff
) -> NodeDeltas:
    """The concepts, facts and rules deltas of ``diff``: the concepts updated from their
    stored rows (:mod:`.concept_delta`), facts and rules merged over their chunks."""
    changed = diff.node_chunks()
    before = _node_ids(recorded.rows(changed))
    now = current.rows({*changed, *diff.moved})
    merged = _merged(now)  # the changed chunks' contributions (moved ones add what they did)
    concepts = merged.concepts()
    listed = mine = pa.table(
        {"id": now["id"], "listed": merged.listed, "domain": pc.cast(now["domain"], pa.string())}
    )
    after = {CONCEPTS: concepts, FACTS: merged.facts(), RULES: merged.rules()}
    out = []
    for name in NODE_TABLES:
        ids = [before[name], after[name]["id"].combine_chunks()]
        touched = pc.unique(pa.concat_arrays(ids))
        if name != CONCEPTS:
            out.append(node_delta(store, name, current, touched, changed))
            continue
        stored = _stored_of(store, name, touched)
        listed = _listings(stored, recorded, mine)
        rows = updated_concepts(
            stored,
            concepts,
            sorted({*changed, *diff.moved}),
            listed,
            lambda chunks: _merged(current.rows(chunks)).concepts(),
        )
        out.append(_delta(name, rows, stored, touched))
    return NodeDeltas(out, listed)


def passage_delta(store: LanceStore, current: pa.Table, diff: ChunkDiff) -> TableDelta:
    """The passage rows of new and moved chunks (texts read for those only), and the ids of
    removed chunks (``current``: every chunk's id and :data:`~.embed_inputs.PLACE`)."""
    wanted = sorted({*diff.added, *diff.moved})
    part = rows_of(current, wanted)
    text = _chunk_texts(store, part["id"])
    title = part["title"]
    full = pc.if_else(
        pc.equal(pc.fill_null(title, ""), ""), text, pc.binary_join_element_wise(title, text, "\n")
    )
    rows = pa.table(
        {
            "id": part["id"],
            "doc_id": part["doc_id"],
            "title": pc.fill_null(title, ""),
            "text": text,
            "domain": part["domain"],
            "time": part["time"],
            "ingested_at": part["ingested_at"],
        }
    )
    stored = _stored_rows(store, PASSAGES, rows["id"].combine_chunks(), ["id", "vector"])
    keep, kept = _keep_vectors(PASSAGES, rows, stored)
    return TableDelta(
        PASSAGES, rows, full.to_pylist(), keep, kept, list(diff.removed), added=len(diff.added)
    )


def _chunk_texts(store: LanceStore, wanted: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The stored text of each chunk id in ``wanted`` (in that order)."""
    if len(wanted) == 0:
        return pa.array([], pa.string())
    got = _stored_rows(store, CHUNKS, wanted, ["id", "text"])
    order = pc.index_in(wanted, value_set=got["id"]) if got.num_rows else None
    if order is None or order.null_count:
        raise QortexError("the chunks table changed while it was read: run it again")
    return got["text"].take(order).combine_chunks()


def embed_deltas(deltas: list[TableDelta], cached: CachedEmbedder, progress: Progress) -> None:
    """Fill each delta's vectors: kept ones, and the other rows' texts looked up together."""
    missing = [np.flatnonzero(~d.keep) for d in deltas]
    groups = [[d.texts[i] for i in m] for d, m in zip(deltas, missing)]
    fresh = cached.embed_groups(groups, progress) if any(groups) else []
    widths = [f.shape[1] for f in fresh if f.size] + [d.kept.shape[1] for d in deltas]
    width = max(widths, default=1)  # a kept vector is the same model's (the stage checks)
    for at, (d, m) in enumerate(zip(deltas, missing)):
        out = np.zeros((d.rows.num_rows, width), np.float32)
        if d.kept.shape[1] == width:
            out[d.keep] = d.kept[d.keep]
        if m.size:
            out[m] = np.asarray(fresh[at], np.float32)
        d.vectors = out


def write_delta(store: LanceStore, delta: TableDelta) -> None:
    """Upsert the delta's rows with their vectors (cast to the stored schema) and delete its
    gone ids."""
    if delta.rows.num_rows:
        vectors = delta.vectors if delta.vectors is not None else np.zeros((0, 1), np.float32)
        rows = delta.rows.append_column("vector", vectors_to_arrow(vectors))
        table = store.open_latest(delta.name)
        if table is None or table.count_rows() == 0:  # an empty table's vectors have no width
            store.replace(delta.name, rows)
            return
        store.upsert(delta.name, rows.select(table.schema.names).cast(table.schema))
    store.delete(delta.name, "id", delta.deleted)
