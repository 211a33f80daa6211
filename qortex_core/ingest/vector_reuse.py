"""Vectors kept from the tables the embedding stage wrote last time, so a run embeds, and looks
up in the embedding cache, only the rows whose text is new.

A row keeps its old vector when the old table holds its id with the same embedded text and the
old tables were written by the same embedder (:data:`MODEL_STATE` names it; it is cleared before
a rebuild under another model starts writing, so a table half rewritten by a killed run is never
taken for the new model's). Every other row goes to the cache, then to the model.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage.model import fact_text
from qortex_core.storage.store import (
    CONCEPTS,
    FACTS,
    PASSAGES,
    LanceStore,
    arrow_to_vectors,
)

MODEL_STATE = "embeddings_model"  # stage-state row: the embedder the tables' vectors are from
TEXT_COLUMNS = {
    PASSAGES: ("id",),  # a passage id is the hash of its embedded text
    CONCEPTS: ("id", "name"),
    FACTS: ("id", "subject", "predicate", "object"),
}


def embedded_texts(name: str, rows: pa.Table) -> list[str]:
    """The embedded text of each concept (its name), fact (:func:`fact_text`) or rule."""
    if name == FACTS:
        parts = (rows[c].to_pylist() for c in ("subject", "predicate", "object"))
        return [fact_text(*t) for t in zip(*parts)]
    return rows["name" if name == CONCEPTS else "text"].to_pylist()


def _identity(name: str, rows: pa.Table) -> list[str]:
    """What must match for a vector to be kept: the id and the columns its embedded text is made
    of (a passage's id is the hash of its text)."""
    columns = [rows[c] for c in TEXT_COLUMNS.get(name, ("id", "text"))]
    if len(columns) == 1:
        return columns[0].to_pylist()
    return pc.binary_join_element_wise(*columns, "\0").to_pylist()


def _hashes(keys: list[str]) -> np.ndarray:
    return np.fromiter((hash(k) for k in keys), np.int64, len(keys))


class OldVectors:
    """The vectors of one table as last written, found by (id, embedded text).

    Memory: 16 bytes a stored row (a sorted hash of its identity and its row), never the old
    vectors; a block's hits are fetched by row offset and checked against their own identity,
    so a hash collision is a miss, never a wrong vector."""

    def __init__(self, store: LanceStore, name: str, model: str, batch_rows: int = 65536) -> None:
        self.store, self.name, self.batch_rows = store, name, batch_rows
        self.columns = list(TEXT_COLUMNS.get(name, ("id", "text")))
        self.kept = 0  # rows that kept their vector
        self.old_rows = store.count(name)
        hashes = np.zeros(0, np.int64)
        if self.old_rows and store.stage_digest(MODEL_STATE) == model:
            parts = [
                _hashes(_identity(name, pa.Table.from_batches([b])))
                for b in store.scan(name, self.columns, 1 << 20)
            ]
            hashes = np.concatenate(parts) if parts else hashes  # (rows,)
        self._order = np.argsort(hashes, kind="stable")  # (rows,) rows by hash
        self._hashes = hashes[self._order]

    def _candidates(self, keys: list[str]) -> np.ndarray:
        """(n,) the stored row whose identity hashes like each key's, -1 where none does."""
        if not self._hashes.size:
            return np.full(len(keys), -1, np.int64)
        h = _hashes(keys)
        at = np.minimum(np.searchsorted(self._hashes, h), self._hashes.size - 1)
        return np.where(self._hashes[at] == h, self._order[at], -1)

    def _fetch(self, keys: list[str], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(hit mask, (n, d) vectors with the hit rows filled): the candidate rows fetched a
        batch at a time, each kept only when its own identity is the key."""
        hit = np.zeros(len(keys), bool)
        out: np.ndarray | None = None
        wanted = np.flatnonzero(rows >= 0)
        wanted = wanted[np.argsort(rows[wanted], kind="stable")]  # by row: a take keeps order
        for start in range(0, wanted.size, self.batch_rows):
            pos = wanted[start : start + self.batch_rows]
            got = self.store.take(self.name, rows[pos].tolist(), [*self.columns, "vector"])
            if got.num_rows != pos.size:
                return np.zeros(len(keys), bool), None  # the table changed: embed them all
            same = np.array([k == keys[i] for k, i in zip(_identity(self.name, got), pos)])
            if out is None:
                width = got.schema.field("vector").type.list_size
                out = np.zeros((len(keys), width), np.float32)  # (n, d)
            vectors = arrow_to_vectors(got["vector"], out.shape[1])  # (batch, d)
            out[pos[same]] = vectors[same]
            hit[pos[same]] = True
        return hit, out

    def fill(
        self, rows: pa.Table, texts: list[str], embed: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """(len(rows), d) vectors: kept ones where the old table has the row's id and text,
        ``embed`` of the other rows' ``texts`` (the cache, then the model) for the rest."""
        keys = _identity(self.name, rows)
        hit, out = self._fetch(keys, self._candidates(keys))
        missing = np.flatnonzero(~hit)
        if not missing.size:
            self.kept += len(keys)
            return out if out is not None else np.zeros((0, 1), np.float32)
        fresh = np.asarray(embed([texts[i] for i in missing]), np.float32)  # (misses, d)
        if out is not None and out.shape[1] != fresh.shape[1]:  # kept ones of another width
            missing, hit[:] = np.arange(len(keys)), False
            fresh = np.asarray(embed(texts), np.float32)
        if out is None or out.shape[1] != fresh.shape[1]:
            out = np.zeros((len(keys), fresh.shape[1]), np.float32)  # (n, d)
        out[missing] = fresh
        self.kept += int(hit.sum())
        return out
