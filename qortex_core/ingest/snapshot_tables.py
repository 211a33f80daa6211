"""The snapshot's Arrow tables (nodes, passages, facts, rules), built with Arrow kernels from the
stored tables in snapshot order: no Python object per row, no id -> index dict."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage import id_keys
from qortex_core.storage.snapshot_schema import SnapshotTables

_DOMAINS = pa.list_(pa.string())
_RULE_COLUMNS = {
    "id": pa.string(),
    "text": pa.string(),
    "category": pa.string(),
    "confidence": pa.float32(),
    "concept_nodes": pa.list_(pa.int32()),
    "domains": _DOMAINS,
    "passages": pa.list_(pa.int32()),  # source passage indices: a forgotten source hides it
}


def listed(lists: pa.ChunkedArray, keys: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(row, key index) of every listed value that is among ``keys``, in list order."""
    flat = contiguous(lists)
    row = pc.list_parent_indices(flat).to_numpy().astype(np.int64)  # (listings,)
    at = id_keys.index_in(pc.list_flatten(flat), keys)  # -1: not a key
    known = at >= 0
    return row[known], at[known]


def contiguous(column: pa.ChunkedArray) -> pa.Array:
    """``column`` as one array: its only chunk as it is (``combine_chunks`` would copy it)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _strings(table: pa.Table, name: str) -> pa.Array:
    """``table[name]`` as one string array; empty for an empty table (which may lack it)."""
    if table.num_rows == 0:
        return pa.array([], pa.string())
    return pc.cast(contiguous(table[name]), pa.string())


def _chunked_strings(table: pa.Table, name: str) -> pa.ChunkedArray:
    """``table[name]`` as strings chunk by chunk, never combined (for a table written by
    blocks); empty for an empty table (which may lack it)."""
    if table.num_rows == 0:
        return pa.chunked_array([], pa.string())
    return pc.cast(table[name], pa.string())  # a chunked column is cast chunk by chunk


def _grouped(rows: np.ndarray, values: pa.Array, n_rows: int, kind: pa.DataType) -> pa.Array:
    """A list per row of ``values`` (sorted by row), empty for rows with none."""
    offsets = np.zeros(n_rows + 1, np.int64)
    offsets[1:] = np.cumsum(np.bincount(rows, minlength=n_rows))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=kind)


def _rule_domains(rules: pa.Table, passages: pa.Table) -> pa.Array:
    """Each rule's distinct stored-passage domains, sorted (rules are filtered by them)."""
    if passages.num_rows == 0:
        return _grouped(np.zeros(0, np.int64), pa.array([], pa.string()), rules.num_rows, _DOMAINS)
    rule, passage = listed(rules["passage_ids"], passages["id"])  # (listings,)
    domains = pc.dictionary_encode(_strings(passages, "domain"))
    by_name = pc.sort_indices(domains.dictionary).to_numpy().astype(np.int64)  # (n_domains,)
    rank = np.empty_like(by_name)
    rank[by_name] = np.arange(len(by_name))
    width = max(len(by_name), 1)
    code = rank[domains.indices.to_numpy(zero_copy_only=False)[passage]]  # (listings,)
    key = np.unique(rule * width + code)  # (pairs,) by rule, then domain name
    names = domains.dictionary.take(pa.array(by_name[key % width]))
    return _grouped(key // width, names, rules.num_rows, _DOMAINS)


def _rule_sources(rules: pa.Table, passages: pa.Table) -> pa.Array:
    """Each rule's stored source passages as passage indices (snapshot order)."""
    kind = _RULE_COLUMNS["passages"]
    if passages.num_rows == 0:
        return _grouped(np.zeros(0, np.int64), pa.array([], pa.int32()), rules.num_rows, kind)
    rule, passage = listed(rules["passage_ids"], passages["id"])  # (listings,)
    return _grouped(rule, pa.array(passage.astype(np.int32), pa.int32()), rules.num_rows, kind)


def _rules_table(rules: pa.Table, concepts: pa.Table, passages: pa.Table) -> pa.Table:
    """Rules with their concepts as phrase indices, the domains of their passages and the
    passages themselves."""
    if rules.num_rows == 0:
        return pa.table({k: pa.array([], t) for k, t in _RULE_COLUMNS.items()})
    concept_keys = concepts["id"] if concepts.num_rows else pa.array([], pa.string())
    rule, node = listed(rules["concepts"], concept_keys)  # (known listings,) in list order
    nodes = pa.array(node.astype(np.int32), pa.int32())
    return pa.table(
        {
            "id": _strings(rules, "id"),
            "text": _strings(rules, "text"),
            "category": _strings(rules, "category"),
            "confidence": pc.cast(contiguous(rules["confidence"]), pa.float32()),
            "concept_nodes": _grouped(rule, nodes, rules.num_rows, _RULE_COLUMNS["concept_nodes"]),
            "domains": _rule_domains(rules, passages),
            "passages": _rule_sources(rules, passages),
        }
    )


def snapshot_tables(
    concepts: pa.Table, passages: pa.Table, facts: pa.Table, rules: pa.Table
) -> SnapshotTables:
    """The node, passage, fact and rule tables of the snapshot, from the stored tables in
    snapshot order (without vectors)."""
    n_phr, n_pas = concepts.num_rows, passages.num_rows
    passage_columns = ("id", "doc_id", "title", "text", "domain", "time", "ingested_at")
    kinds = [pa.repeat(pa.scalar("phrase"), n_phr), pa.repeat(pa.scalar("passage"), n_pas)]
    return SnapshotTables(
        nodes=pa.table(
            {
                "id": pa.concat_arrays([_strings(concepts, "id"), _strings(passages, "id")]),
                "kind": pa.concat_arrays(kinds),
                "name": pa.concat_arrays([_strings(concepts, "name"), _strings(passages, "title")]),
            }
        ),
        passages=passages
        if n_pas
        else pa.table({k: pa.array([], pa.string()) for k in passage_columns}),
        # chunked as read (the base's rows are views of its file): written by blocks
        facts=pa.table(
            {k: _chunked_strings(facts, k) for k in ("id", "subject", "predicate", "object")}
        ),
        rules=_rules_table(rules, concepts, passages),
    )
