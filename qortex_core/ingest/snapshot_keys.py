"""Each concept's phrase key (:mod:`qortex_core.storage.phrase_keys`), stored with the snapshot
so that a retriever opening it does not normalise every concept name again: a concept the
base snapshot holds under the same id and name keeps the base's key, only the others' names
are normalised."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.snapshot_base import KEYS, Base, reused
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
