"""Each concept's phrase key (:mod:`qortex_core.storage.phrase_keys`) and the retriever's
lookup of them (sorted key hashes and rows), stored with the snapshot so that a retriever
opening it neither normalises every concept name again nor hashes and sorts every key: a
concept the base snapshot holds under the same id and name keeps the base's key and hash, only
the others' names are normalised and hashed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.snapshot_base import KEYS, Base, reused
from qortex_core.storage.arrow_access import sorted_key_hashes, string_hashes
from qortex_core.storage.phrase_keys import PHRASE_KEYS, phrase_keys
from qortex_core.storage.store import CONCEPTS


def _from_base(
    concepts: pa.Table, base: Base | None, same_as: np.ndarray | None
) -> tuple[np.ndarray, pa.Array] | None:
    """(each concept's row in the base with the same id and name or -1, the base's keys), when
    the base stores them (``same_as``: those rows; None: looked up here)."""
    stored = None if base is None else base.snapshot.tables.get(PHRASE_KEYS)
    if base is None or stored is None:
        return None
    old = base.keys(CONCEPTS)  # (base concepts,) id, name in the base's order
    if stored.num_rows != old.num_rows:
        return None
    if same_as is None:
        rows, same, _ = reused(concepts.select(list(KEYS[CONCEPTS])), old)
        same_as = np.where(same, rows, -1)
    return same_as, pc.cast(stored["key"].combine_chunks(), pa.large_string())


def phrase_key_table(
    concepts: pa.Table, base: Base | None, same_as: np.ndarray | None = None
) -> pa.Table:
    """The :data:`PHRASE_KEYS` table of ``concepts`` (snapshot order; column ``key``, null for
    a name not worth matching); ``same_as``: each concept's row in ``base`` with the same id
    and name, -1 none, when the caller has it."""
    if concepts.num_rows == 0:
        return pa.table({"key": pa.array([], pa.large_string())})
    found = _from_base(concepts, base, same_as)
    if found is None:
        return pa.table({"key": phrase_keys(concepts["name"])})
    rows, old = found
    fresh = np.flatnonzero(rows < 0)  # (f,) concepts whose names are normalised now
    made = phrase_keys(concepts["name"].take(pa.array(fresh)))
    place = rows.copy()
    place[fresh] = len(old) + np.arange(len(fresh))  # (n,) row in old + made
    return pa.table({"key": pa.concat_arrays([old, made]).take(pa.array(place))})


def _base_lookup(base: Base) -> tuple[np.ndarray, np.ndarray] | None:
    """The base's stored lookup (hashes, rows), when it has one that fits its concepts."""
    hashes = base.snapshot.arrays.get("phrase_key_hashes")
    rows = base.snapshot.arrays.get("phrase_key_rows")
    n_base = base.keys(CONCEPTS).num_rows
    if hashes is None or rows is None or len(hashes) != len(rows) or not len(rows):
        return None
    return (hashes, rows) if int(np.max(rows)) < n_base else None


def phrase_lookup(
    keys: pa.Array | pa.ChunkedArray, base: Base | None, same_as: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The lookup of ``keys`` (the :data:`PHRASE_KEYS` column, snapshot order) as
    :func:`~qortex_core.storage.arrow_access.sorted_key_hashes` gives it: (k,) sorted int64
    hashes, (k,) int32 rows, equal hashes in row order. With a base lookup and ``same_as``
    (each concept's base row with the same id and name, -1 none), the base's entries are
    renumbered (still in hash order), only the other keys hashed, and the nearly sorted whole
    sorted again (a stable sort finds the runs: about a tenth of a full sort's time)."""
    old = None if base is None or same_as is None else _base_lookup(base)
    if old is None or base is None or same_as is None:
        return sorted_key_hashes(keys)
    old_hashes, old_rows = old
    new_row = np.full(base.keys(CONCEPTS).num_rows, -1, np.int64)  # (base concepts,)
    kept = np.flatnonzero(same_as >= 0)
    new_row[same_as[kept]] = kept
    moved = new_row[old_rows]  # (k_old,) each base entry's row now, -1 gone
    fresh = np.flatnonzero(same_as < 0)  # (f,) concepts whose keys are hashed now
    fresh_keys = keys.take(pa.array(fresh))
    valid = pc.is_valid(fresh_keys).to_numpy(zero_copy_only=False)
    hashes = np.concatenate([old_hashes[moved >= 0], string_hashes(fresh_keys)[valid]])
    rows = np.concatenate([moved[moved >= 0], fresh[valid]])
    order = np.argsort(hashes, kind="stable")  # (k,) base entries first: nearly sorted
    hashes, rows = hashes[order], rows[order]
    tied = np.zeros(len(hashes), bool)  # entries whose hash another shares: by row
    same = hashes[1:] == hashes[:-1]
    tied[1:] |= same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    rows[at] = rows[at][np.lexsort((rows[at], hashes[at]))]
    return hashes, rows.astype(np.int32)
