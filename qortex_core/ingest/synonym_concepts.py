"""The synonym stage's read of the concepts: ids, names and vectors in stored row order, and a
fingerprint of each vector (what the stage's basis compares to find changed concepts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from qortex_core.ingest.synonym_layout import concept_keys
from qortex_core.storage.store import CONCEPTS, LanceStore, arrow_to_vectors

_PROBE_SEED = 20_240_611
_PRINT_BYTES = 1 << 20  # one block of fingerprint products (fits the cache)


def fingerprints(vectors: np.ndarray) -> np.ndarray:
    """(n,) int64 fingerprint of each float32 row: the bits of its floats times fixed random
    odd numbers, summed with 64-bit wrap-around. Integer arithmetic: a row's fingerprint is the
    same in any table (a float product's last bit can depend on the matrix around the row),
    and two rows that differ in any bit almost surely differ here."""
    rng = np.random.default_rng(_PROBE_SEED)
    odd = rng.integers(0, 1 << 62, vectors.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = np.empty(len(vectors), np.uint64)
    step = max(1, _PRINT_BYTES // max(8 * vectors.shape[1], 1))  # rows whose products fit cache
    for s in range(0, len(vectors), step):
        bits = np.ascontiguousarray(vectors[s : s + step], np.float32).view(np.uint32)
        wide = bits.astype(np.uint64)  # (step, d)
        np.multiply(wide, odd, out=wide)
        wide.sum(axis=1, dtype=np.uint64, out=out[s : s + step])
    return out.view(np.int64)


@dataclass(frozen=True)
class Concepts:
    """The concepts table's ids, names and vectors, in stored row order."""

    ids: pa.ChunkedArray
    names: pa.ChunkedArray
    vectors: np.ndarray  # (m, d) float32
    prints: np.ndarray  # (m,) int64
    keys: np.ndarray  # (m,) int64 keys of the ids (synonym_layout.concept_keys)


def read_concepts(store: LanceStore) -> Concepts:
    """Every concept's id, name and vector, a batch at a time, the vectors straight into one
    array (the whole table is never held as Arrow rows)."""
    ids: list[pa.Array] = []
    names: list[pa.Array] = []
    vectors = np.zeros((0, 1), np.float32)
    at = 0
    for batch in store.scan(CONCEPTS, ["id", "name", "vector"]):
        dim = batch.schema.field("vector").type.list_size
        if at + batch.num_rows > len(vectors) or vectors.shape[1] != dim:  # first, or rows added
            rows = max(store.count(CONCEPTS), at + batch.num_rows, 2 * at)
            grown = np.empty((rows, dim), np.float32)
            grown[:at] = vectors[:at]
            vectors = grown
        vectors[at : at + batch.num_rows] = arrow_to_vectors(batch.column("vector"), dim)
        at += batch.num_rows
        ids.append(batch.column("id"))
        names.append(batch.column("name"))
    if at == 0:
        empty = pa.chunked_array([], pa.string())
        return Concepts(empty, empty, vectors, np.zeros(0, np.int64), np.zeros(0, np.int64))
    vectors = vectors[:at]
    id_column = pa.chunked_array(ids)  # chunked as read, as a whole read gives them
    return Concepts(
        id_column,
        pa.chunked_array(names),
        vectors,
        fingerprints(vectors),
        concept_keys(id_column),
    )
