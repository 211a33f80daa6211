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
from qortex_core.storage.sql import sql_in
from qortex_core.storage.store import EMBEDDINGS, LanceStore, arrow_to_vectors, vectors_to_arrow

SLICE_TEXTS = 4096  # texts per model call: whole batches, a progress report after each
SAVE_TEXTS = 32768  # new vectors are appended at least this often: a killed stage keeps them
FEW_KEYS = 4096  # a lookup of at most this many keys asks the table for them by a filter


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


def _first_positions(keys: list[str]) -> np.ndarray:
    """(n,) position of each key's first occurrence."""
    first: dict[str, int] = {}
    return np.array([first.setdefault(k, i) for i, k in enumerate(keys)], np.int64)


def _hashes(keys: Sequence[str]) -> np.ndarray:
    return np.fromiter((hash(k) for k in keys), np.int64, len(keys))


def _by_hash(hashes: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sorted by hash; equal hashes keep row order."""
    order = np.argsort(hashes, kind="stable")
    return hashes[order], rows[order]


class _KeyIndex:
    """The cache's key column as sorted 64-bit hashes and their rows (16 bytes a key, read
    once, then extended by this process's own appends), so a lookup need not read every stored
    key again. Python's ``hash`` is stable within a process, which is all it needs; a row it
    names is confirmed against the row's own key when fetched (:meth:`LanceVectorCache._take`),
    so a collision or a table changed by another writer is caught, never returned.

    Appends are kept log-structured: each makes a sorted run, merged with the run before it
    while that one is not more than twice its size, so runs at least halve from the oldest to
    the newest, ``n`` appended keys cost ``n log n`` in all, and a lookup sorts its hashes and
    searches ``log n`` runs with them. A single sorted array extended by ``np.insert`` would
    copy every held key at every append (quadratic in the cache's size), and searching in the
    keys' own random order misses the cache far more often than in sorted order.
    ``merged`` counts the keys merges have copied."""

    def __init__(self, hashes: np.ndarray, rows: np.ndarray, count: int) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray]] = [_by_hash(hashes, rows)]
        self.count = count
        self.merged = 0

    @classmethod
    def read(cls, store: LanceStore) -> _KeyIndex:
        """Every stored key, a batch at a time."""
        batches = store.scan(EMBEDDINGS, ["key"], 1 << 20)
        parts = [_hashes(b.column(0).to_pylist()) for b in batches]
        hashes = np.concatenate(parts) if parts else np.zeros(0, np.int64)  # (rows,)
        return cls(hashes, np.arange(hashes.size, dtype=np.int64), hashes.size)

    def appended(self, keys: Sequence[str]) -> None:
        """``keys`` were appended as the next rows of the table."""
        rows = np.arange(self.count, self.count + len(keys), dtype=np.int64)
        self.runs.append(_by_hash(_hashes(keys), rows))
        self.count += len(keys)
        while len(self.runs) > 1 and self.runs[-2][0].size <= 2 * self.runs[-1][0].size:
            (h_old, r_old), (h_new, r_new) = self.runs[-2:]  # older rows first: kept first
            self.runs[-2:] = [
                _by_hash(np.concatenate([h_old, h_new]), np.concatenate([r_old, r_new]))
            ]
            self.merged += h_old.size + h_new.size

    def rows_of(self, keys: Sequence[str]) -> np.ndarray:
        """(len(keys),) the first row whose key hashes like each key's, -1 where none does."""
        h = _hashes(keys)  # (n,)
        order = np.argsort(h)
        h = h[order]  # sorted needles search ~8x faster than random ones (cache locality)
        found = np.full(len(keys), -1, np.int64)  # (n,) in needle order
        for hashes, rows in reversed(self.runs):  # newest first: an older run's row wins
            if hashes.size:
                at = np.minimum(np.searchsorted(hashes, h), hashes.size - 1)  # (n,)
                found = np.where(hashes[at] == h, rows[at], found)
        out = np.empty_like(found)
        out[order] = found
        return out


class LanceVectorCache:
    """The store's embedding table as a :class:`VectorCache`.

    A lookup finds each key's row in a :class:`_KeyIndex` of the key column (read once per
    cache object, then kept up to date with its own appends), then fetches only the rows that
    hit by row offset, checking each fetched key. When the table changed under it (another
    writer), the index is read again and, should the rows still disagree, the vectors are
    scanned a batch at a time keeping the hit rows. Memory: the index and the looked-up keys'
    vectors, not the whole cache (which holds every text ever embedded, under every model); no
    lookup reads every stored key again (at 1M passages that was ~21 M keys per block)."""

    def __init__(self, store: LanceStore, batch_rows: int = 65536) -> None:
        self.store = store
        self.batch_rows = batch_rows  # vectors per scanned batch
        self._width: int | None = None  # vector width of the table as last read; 0: no table
        self._index: _KeyIndex | None = None

    def _rows(self, keys: Sequence[str], count: int) -> np.ndarray:
        """(n,) cache row of each key by the index (read again unless it holds ``count``, the
        table's rows)."""
        if self._index is None or self._index.count != count:
            self._index = _KeyIndex.read(self.store)
        return self._index.rows_of(keys)

    def contains(self, keys: Sequence[str]) -> np.ndarray:
        """(n,) bool: which ``keys`` the cache holds (fetches the key of each hit row)."""
        return self._find(list(keys), with_vectors=False)[0]

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._find(list(keys), with_vectors=True)

    def _find(self, keys: list[str], with_vectors: bool) -> tuple[np.ndarray, np.ndarray]:
        count = self.store.count(EMBEDDINGS)
        if not keys or not count:
            return np.zeros(len(keys), bool), np.zeros((len(keys), 1), np.float32)
        if self._index is None and len(keys) <= FEW_KEYS:  # a few keys: asked for, not indexed
            return self._select(keys, with_vectors)
        for _ in range(2):  # a stale index (another writer) is read again once
            found = self._take(keys, self._rows(keys, count), with_vectors)
            if found is not None:
                return found
            self._index = None
        hit, out = self._scan(pa.array(keys, pa.string()))
        first = _first_positions(keys)  # a repeated key: its first position was filled
        return hit[first], out[first]

    def _take(
        self, keys: list[str], rows: np.ndarray, with_vectors: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Only the cache rows the index names, each fetched once by row offset; None when a
        fetched row's key is not the key looked up (the table changed, or a hash collided)."""
        at = np.flatnonzero(rows >= 0)  # (hits,) key positions
        distinct, inverse = np.unique(rows[at], return_inverse=True)  # ascending cache rows
        hit, out = np.zeros(len(keys), bool), np.zeros((len(keys), 1), np.float32)
        columns = ["key", "vector"] if with_vectors else ["key"]
        wanted = pa.array(keys, pa.string())
        for start in range(0, distinct.size, self.batch_rows):
            part = distinct[start : start + self.batch_rows]
            got = self.store.take(EMBEDDINGS, part.tolist(), columns)
            sel = (inverse >= start) & (inverse < start + part.size)  # (hits,) in this part
            pos, local = at[sel], inverse[sel] - start
            if got.num_rows != part.size or not got["key"].take(pa.array(local)).equals(
                pa.chunked_array([wanted.take(pa.array(pos))])
            ):
                return None
            hit[pos] = True
            if with_vectors:
                width = got.schema.field("vector").type.list_size
                if start == 0:
                    self._width, out = width, np.zeros((len(keys), width), np.float32)  # (n, d)
                out[pos] = arrow_to_vectors(got["vector"], width)[local]
        return hit, out

    def _select(self, keys: list[str], with_vectors: bool) -> tuple[np.ndarray, np.ndarray]:
        """The rows of only ``keys``, by a filtered query of :data:`FEW_KEYS` keys at most
        (the key column's index, read in full, pays off only for many keys)."""
        wanted = pa.array(keys, pa.string())
        columns = ["key", "vector"] if with_vectors else ["key"]
        table = self.store.open_latest(EMBEDDINGS)  # a filtered scan: only the rows asked for
        where = sql_in("key", dict.fromkeys(keys))
        query = table.search().where(where) if table is not None else None
        got = query.select(columns).limit(None).to_arrow() if query is not None else pa.table({})
        rows = _positions(wanted, got["key"].combine_chunks()) if got.num_rows else None
        hit = rows >= 0 if rows is not None else np.zeros(len(keys), bool)
        if not with_vectors or rows is None:
            return hit, np.zeros((len(keys), 1), np.float32)
        width = got.schema.field("vector").type.list_size
        self._width, out = width, np.zeros((len(keys), width), np.float32)  # (n, d)
        out[hit] = arrow_to_vectors(got["vector"], width)[rows[hit]]
        return hit, out

    def _scan(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Every cache row scanned a batch at a time, keeping the looked-up keys' vectors
        (each key's first position)."""
        hit = np.zeros(len(keys), bool)
        out: np.ndarray | None = None
        for batch in self.store.scan(EMBEDDINGS, ["key", "vector"], self.batch_rows):
            width = batch.schema.field("vector").type.list_size
            if out is None:
                self._width = width
                out = np.zeros((len(keys), width), np.float32)  # (n, d)
            rows = _positions(batch["key"], keys)  # (batch,) key position or -1
            take = np.flatnonzero(rows >= 0)
            if take.size:
                picked = batch["vector"].take(pa.array(take))  # (take,) vectors
                out[rows[take]] = arrow_to_vectors(picked, width)
                hit[rows[take]] = True
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
            self._index = None
        else:
            before = self.store.count(EMBEDDINGS)
            self.store.append(EMBEDDINGS, rows)  # find() missed these keys: nothing to merge
            if self._index is not None and self._index.count == before:
                self._index.appended(keys)  # the next rows, unless another writer came between
            else:
                self._index = None
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
