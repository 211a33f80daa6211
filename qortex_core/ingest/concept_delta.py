"""The concepts rows touched by changed chunks, updated from their stored rows without reading
the other chunks' payloads (a common concept is named in a large share of the corpus).

A concept's row depends on the chunks that mention it, in chunk (id) order
(:mod:`.node_tables`). For a touched concept, the chunks that did not change keep their
contribution: its new ``passage_ids`` are the stored entries of the unchanged chunks merged
in chunk order with the entries the changed chunks' current payloads give. Its name and
description come from its first occurrence, in the first chunk of that list: a changed chunk
(its payload is at hand), the stored row's first chunk (the stored name stands), or else that
one chunk's payload is merged. Its domains are the distinct domains, in chunk order, of the
chunks that list it, found in the record's ``listed`` column (:mod:`.embed_inputs`) for
unchanged chunks. Every step is Arrow or numpy over the touched concepts' entries.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_STR_LIST = pa.list_(pa.string())


def _entries(rows: pa.Table) -> pa.Table:
    """(concept, chunk) per ``passage_ids`` entry of ``rows``, in row then list order."""
    if rows.num_rows == 0:
        return pa.table({"concept": pa.array([], pa.string()), "chunk": pa.array([], pa.string())})
    lists = rows["passage_ids"].combine_chunks()
    parent = pc.list_parent_indices(lists)
    return pa.table({"concept": rows["id"].take(parent), "chunk": pc.list_flatten(lists)})


def _lists(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=_STR_LIST)


def _group_starts(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(groups + 1,) where each run of equal ``keys`` (sorted) starts, and the end."""
    if len(keys) == 0:
        return np.zeros(1, np.int64)
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    new = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    starts = np.flatnonzero(np.r_[True, new.to_numpy(zero_copy_only=False)])
    return np.append(starts, len(keys)).astype(np.int64)


def _listing(pairs: pa.Table, listed: pa.Table) -> np.ndarray:
    """(pairs,) whether each (concept, chunk) pair's chunk lists the concept (``listed``:
    ``id``, ``listed`` of every chunk concerned)."""
    if pairs.num_rows == 0:
        return np.zeros(0, bool)
    lists = listed["listed"].take(pc.index_in(pairs["chunk"], value_set=listed["id"]))
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    hit = pc.equal(pc.list_flatten(lists), pairs["concept"].take(pa.array(parent)))
    mask = np.zeros(pairs.num_rows, bool)
    mask[parent[pc.fill_null(hit, False).to_numpy(zero_copy_only=False)]] = True
    return mask


def _domains(pairs: pa.Table, lists: np.ndarray, current: pa.Table, starts: np.ndarray) -> pa.Array:
    """Each concept's distinct domains of its listing chunks, first seen in chunk order
    (``pairs``: distinct (concept, chunk) sorted; ``starts``: each concept's first pair)."""
    group = np.repeat(np.arange(len(starts) - 1), np.diff(starts))  # (pairs,)
    domain = current["domain"].take(pc.index_in(pairs["chunk"], value_set=current["id"]))
    encoded = pc.dictionary_encode(domain.combine_chunks())
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    at = np.flatnonzero(lists)  # listing pairs in (concept, chunk) order
    key = group[at] * (len(encoded.dictionary) + 1) + code[at]
    _, first = np.unique(key, return_index=True)
    keep = at[np.sort(first)]  # (distinct,) by concept, then first seen
    offsets = np.zeros(len(starts), np.int64)
    np.add.at(offsets, group[keep] + 1, 1)
    return _lists(np.cumsum(offsets), encoded.dictionary.take(pa.array(code[keep])))


def _from_rows(
    name: np.ndarray, description: np.ndarray, mask: np.ndarray, rows: pa.Table, at: pa.Array
) -> None:
    """Fill ``name``/``description`` where ``mask`` from ``rows`` at ``at``."""
    if mask.any():
        pos = pa.array(np.asarray(at.fill_null(0).to_numpy(zero_copy_only=False))[mask])
        name[mask] = rows["name"].take(pos).to_pylist()
        description[mask] = rows["description"].take(pos).to_pylist()


def _named(
    ids: pa.Array,
    first: pa.Array,
    changed_rows: pa.Table,
    changed_chunks: pa.Array,
    stored: pa.Table,
    merge_concepts: Callable[[list[str]], pa.Table],
) -> tuple[pa.Array, pa.Array]:
    """Each concept's name and description from its first chunk ``first``: the changed
    chunks' merge when that chunk changed, the stored row when it is the stored row's first
    chunk, else a merge of just those first chunks (no other chunk of theirs precedes them)."""
    n = len(ids)
    in_changed = pc.index_in(ids, value_set=changed_rows["id"])
    use_changed = pc.is_in(first, value_set=changed_chunks).to_numpy(zero_copy_only=False)
    use_changed &= pc.is_valid(in_changed).to_numpy(zero_copy_only=False)
    in_stored = pc.index_in(ids, value_set=stored["id"])
    use_stored = np.zeros(n, bool)
    if stored.num_rows:
        old_first = pc.list_element(stored["passage_ids"].combine_chunks(), 0).take(in_stored)
        same = pc.fill_null(pc.equal(old_first, first), False).to_numpy(zero_copy_only=False)
        use_stored = ~use_changed & same
    rest = ~use_changed & ~use_stored
    name, description = np.empty(n, object), np.empty(n, object)
    _from_rows(name, description, use_changed, changed_rows, in_changed)
    _from_rows(name, description, use_stored, stored, in_stored)
    if rest.any():
        merged = merge_concepts(sorted(set(first.filter(pa.array(rest)).to_pylist())))
        at = pc.index_in(ids, value_set=merged["id"])
        _from_rows(name, description, rest, merged, at)
    return pa.array(name.tolist(), pa.string()), pa.array(description.tolist(), pa.string())


def updated_concepts(
    stored: pa.Table,
    changed_rows: pa.Table,
    changed_chunks: list[str],
    listed: pa.Table,
    merge_concepts: Callable[[list[str]], pa.Table],
) -> pa.Table:
    """The new rows (id, name, description, passage_ids, domains; sorted by id) of the
    concepts in ``stored`` (their stored rows) and ``changed_rows`` (the changed chunks'
    merge, whose ``passage_ids`` name changed chunks only); a concept no chunk mentions any
    more has no row.

    Args:
        changed_chunks: every chunk added, removed or changed (their stored entries are
            dropped).
        listed: ``id``, ``listed`` and ``domain`` of every chunk the rows may name (recorded
            and changed, as they are now).
        merge_concepts: chunk ids -> the concepts merged over just those chunks.
    """
    changed = pa.array(changed_chunks, pa.string())
    old = _entries(stored)
    kept = old.filter(pc.invert(pc.is_in(old["chunk"], value_set=changed)))
    entries = pa.concat_tables([kept, _entries(changed_rows)]).combine_chunks()
    entries = entries.sort_by([("concept", "ascending"), ("chunk", "ascending")])
    starts = _group_starts(entries["concept"])  # (concepts + 1,)
    ids = entries["concept"].take(pa.array(starts[:-1]))
    first = entries["chunk"].take(pa.array(starts[:-1]))
    pair = pc.binary_join_element_wise(entries["concept"], entries["chunk"], "\0")
    pairs = entries.take(pa.array(_group_starts(pair)[:-1]))  # distinct (concept, chunk)
    name, description = _named(ids, first, changed_rows, changed, stored, merge_concepts)
    return pa.table(
        {
            "id": ids,
            "name": name,
            "description": description,
            "passage_ids": _lists(starts, entries["chunk"].combine_chunks()),
            "domains": _domains(
                pairs, _listing(pairs, listed), listed, _group_starts(pairs["concept"])
            ),
        }
    )
