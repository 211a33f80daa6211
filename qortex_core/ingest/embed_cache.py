"""The embedding stage's one model call path: a persistent vector cache and an embedder over it.

:class:`CachedEmbedder` takes a group of texts (the stage passes one table's block of rows at
a time), looks their cache keys up in one read of the cache's key column and fetches only the
rows that hit, sends each distinct missing text to the model once, longest first, in slices of
whole batches, appends the new vectors (one append per ``SAVE_TEXTS`` texts, so a killed stage
keeps most of its work), and scatters the vectors back to each group. Within a call the model
therefore sees the same length-sorted batches as one plain ``encode`` of the distinct texts.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.embed import Embedder, EmbedderWrapper
from qortex_core.ingest.chunk_stage import Progress, no_progress
from qortex_core.storage import ids
from qortex_core.storage.store import EMBEDDINGS, LanceStore, arrow_to_vectors, vectors_to_arrow

SLICE_TEXTS = 4096  # texts per model call: whole batches, a progress report after each
SAVE_TEXTS = 32768  # new vectors are appended at least this often: a killed stage keeps them


class VectorCache(Protocol):
    """Vectors stored under cache keys (``ids.embedding_key``)."""

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(hit, vectors)``: a (n,) bool mask over ``keys`` and (n, d) vectors whose hit rows
        hold the stored vectors (the other rows are zero, for the caller to fill)."""

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store (n, d) ``vectors`` under ``keys`` (keys that ``find`` just missed)."""


def _positions(values: pa.Array | pa.ChunkedArray, keys: pa.Array) -> np.ndarray:
    """(len(values),) first position of each value in ``keys``, -1 where absent."""
    at = pc.index_in(values, value_set=keys)
    return np.asarray(at.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)


def _same(batch_keys: pa.Array, stored: pa.ChunkedArray, start: int) -> bool:
    """Whether a scanned batch holds the key column's rows from ``start`` on (a scan is in row
    order; a table appended to between the two reads need not be)."""
    expected = stored.slice(start, len(batch_keys))
    return len(expected) == len(batch_keys) and bool(
        pc.all(pc.equal(batch_keys, expected.combine_chunks())).as_py()
    )


class LanceVectorCache:
    """The store's embedding table as a :class:`VectorCache`.

    A lookup reads the key column once, then fetches only the rows that hit by row offset (or,
    when the table changed between the two reads, scans the vectors a batch at a time keeping the
    hit rows), so its memory is the looked-up keys' vectors, not the whole cache (which holds
    every text ever embedded, under every model). One append per write."""

    def __init__(self, store: LanceStore, batch_rows: int = 65536) -> None:
        self.store = store
        self.batch_rows = batch_rows  # vectors per scanned batch
        self._width: int | None = None  # vector width of the table as last read; 0: no table

    def _rows_of(self, keys: pa.Array) -> tuple[pa.ChunkedArray | None, np.ndarray]:
        """The cache's key column and, per cache row, the first position of its key in
        ``keys`` (-1: not wanted)."""
        stored = self.store.read_columns(EMBEDDINGS, ["key"])
        if not stored.num_rows or not len(keys):
            return None, np.full(stored.num_rows, -1, np.int64)
        return stored["key"], _positions(stored["key"], keys)

    @staticmethod
    def _repeats(keys: pa.Array) -> np.ndarray | None:
        """(n,) first position of each key when some key repeats, else None."""
        first = pc.index_in(keys, value_set=keys).to_numpy(zero_copy_only=False)
        return first if len(first) and (first != np.arange(len(first))).any() else None

    def contains(self, keys: Sequence[str]) -> np.ndarray:
        """(n,) bool: which ``keys`` the cache holds (reads the key column only)."""
        wanted_keys = pa.array(keys, pa.string())
        hit = np.zeros(len(keys), bool)
        _, wanted = self._rows_of(wanted_keys)
        hit[wanted[wanted >= 0]] = True
        first = self._repeats(wanted_keys)
        return hit if first is None else hit[first]

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        wanted_keys = pa.array(keys, pa.string())
        hit, out = self._find(wanted_keys)
        first = self._repeats(wanted_keys)  # a repeated key: its first position was filled
        return (hit, out) if first is None else (hit[first], out[first])

    def _find(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        stored, wanted = self._rows_of(keys)  # (rows,) key position or -1
        hit = np.zeros(len(keys), bool)
        if stored is None or not (wanted >= 0).any():  # nothing to read (a first run): no scan
            return hit, np.zeros((len(keys), 1), np.float32)
        found = self._take(keys, stored, wanted)
        return found if found is not None else self._scan(keys, stored, wanted)

    def _take(
        self, keys: pa.Array, stored: pa.ChunkedArray, wanted: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Only the cache rows holding a looked-up key, fetched by row offset; None when a
        fetched row's key is not the one the key column had there (the table changed)."""
        rows = np.flatnonzero(wanted >= 0)  # (hits,) ascending cache rows
        hit, out = np.zeros(len(keys), bool), np.zeros((len(keys), 1), np.float32)
        for start in range(0, rows.size, self.batch_rows):
            at = rows[start : start + self.batch_rows]
            got = self.store.take(EMBEDDINGS, at.tolist(), ["key", "vector"])
            if got.num_rows != at.size or not got["key"].equals(stored.take(pa.array(at))):
                return None
            width = got.schema.field("vector").type.list_size
            if start == 0:
                self._width, out = width, np.zeros((len(keys), width), np.float32)  # (n, d)
            out[wanted[at]] = arrow_to_vectors(got["vector"], width)
            hit[wanted[at]] = True
        return hit, out

    def _scan(
        self, keys: pa.Array, stored: pa.ChunkedArray, wanted: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every cache row scanned a batch at a time, keeping the looked-up keys' vectors."""
        hit = np.zeros(len(keys), bool)
        out: np.ndarray | None = None
        start = 0
        for batch in self.store.scan(EMBEDDINGS, ["key", "vector"], self.batch_rows):
            width = batch.schema.field("vector").type.list_size
            if out is None:
                self._width = width
                out = np.zeros((len(keys), width), np.float32)  # (n, d)
            rows = wanted[start : start + batch.num_rows]  # (batch,) key position or -1
            if not _same(batch["key"], stored, start):
                rows = _positions(batch["key"], keys)  # another order or version: look up here
            take = np.flatnonzero(rows >= 0)
            if take.size:
                picked = batch["vector"].take(pa.array(take))  # (take,) vectors
                out[rows[take]] = arrow_to_vectors(picked, width)
                hit[rows[take]] = True
            start += batch.num_rows
        if out is None:
            self._width = 0
            out = np.zeros((len(keys), 1), np.float32)
        return hit, out

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        if not len(keys):
            return
        rows = pa.table({"key": pa.array(keys, pa.string()), "vector": vectors_to_arrow(vectors)})
        if self._width is None:
            first = next(iter(self.store.scan(EMBEDDINGS, ["vector"], batch_rows=1)), None)
            self._width = first.schema.field("vector").type.list_size if first else 0
        if self._width and self._width != vectors.shape[1]:
            # a model of another width (re-embedding on purpose): keys name the model, so the
            # old vectors can never be hits for it; the cache starts over in the new width
            self.store.replace(EMBEDDINGS, rows)
        else:
            self.store.append(EMBEDDINGS, rows)  # find() missed these keys: nothing to merge
        self._width = int(vectors.shape[1])


class CachedEmbedder(EmbedderWrapper):
    """Wraps an embedder so no (model, text) pair is embedded twice.

    ``calls``, ``texts_embedded`` and ``cache_hits`` count real work and saved work.
    """

    def __init__(
        self,
        inner: Embedder,
        cache: VectorCache,
        slice_texts: int = SLICE_TEXTS,
        save_texts: int = SAVE_TEXTS,
    ) -> None:
        super().__init__(inner)
        self.cache = cache
        self.slice_texts = slice_texts
        self.save_texts = save_texts
        self.calls = 0
        self.texts_embedded = 0
        self.cache_hits = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_groups([texts])[0]

    def embed_groups(
        self, groups: Sequence[Sequence[str]], progress: Progress = no_progress
    ) -> list[np.ndarray]:
        """One (len(group), d) array per group, every distinct text embedded at most once."""
        texts = [t for group in groups for t in group]  # (n,)
        keys = ids.embedding_keys(self.name, texts)
        row_of = dict(zip(keys, range(len(keys))))  # key -> a position of its text
        distinct = list(row_of)  # (u,) first-seen order
        hit, found = self.cache.find(distinct)  # (u,) bool, (u, d) hit rows filled
        todo = [k for k, h in zip(distinct, hit) if not h]
        new = self._embed_missing(todo, [texts[row_of[k]] for k in todo], progress)  # (misses, d)
        missed = set(todo)
        self.cache_hits += sum(1 for k in keys if k not in missed)
        return self._scatter(groups, keys, distinct, hit, found, new)

    @staticmethod
    def _scatter(
        groups: Sequence[Sequence[str]],
        keys: list[str],
        distinct: list[str],
        hit: np.ndarray,
        found: np.ndarray,
        new: np.ndarray,
    ) -> list[np.ndarray]:
        """Each group's rows from the distinct keys' vectors: ``found``'s hit rows, ``new`` for
        the misses (the arrays are views of one matrix when no text repeats)."""
        if not hit.any():
            table = new  # (u, d): every distinct key missed, in order
        else:
            table = found  # (u, d): the hit rows are filled; the misses go in place
            if len(new):
                table[~hit] = new
        if len(distinct) < len(keys):
            index = {k: i for i, k in enumerate(distinct)}
            at = np.fromiter((index[k] for k in keys), np.int64, len(keys))  # (n,)
            table = table[at]  # (n, d)
        out, start = [], 0
        for group in groups:
            out.append(table[start : start + len(group)])  # (len(group), d)
            start += len(group)
        return out

    def _embed_missing(self, keys: list[str], texts: list[str], progress: Progress) -> np.ndarray:
        """(len(texts), d) vectors: longest first in whole-batch slices, scattered back, and
        appended to the cache under ``keys`` every ``save_texts`` texts and at the end."""
        if not texts:
            return np.zeros((0, 1), np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # (m,) longest first
        vectors = np.zeros((0, 1), np.float32)
        unsaved = 0
        for start in range(0, len(texts), self.slice_texts):
            rows = order[start : start + self.slice_texts]  # (slice,)
            part = np.asarray(self.inner.embed([texts[i] for i in rows]), np.float32)
            if not start:
                vectors = np.empty((len(texts), part.shape[1]), np.float32)  # (m, d)
            vectors[rows] = part  # scattered back to the caller's order
            self.calls += 1
            done = min(start + self.slice_texts, len(texts))
            if done - unsaved >= self.save_texts or done == len(texts):
                saved = order[unsaved:done]  # (done - unsaved,)
                self.cache.add([keys[i] for i in saved], vectors[saved])
                unsaved = done
            progress("embed", done, len(texts))
        self.texts_embedded += len(texts)
        return vectors
