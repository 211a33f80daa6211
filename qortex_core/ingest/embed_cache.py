"""The embedding stage's one model call path: a persistent vector cache and an embedder over it.

:class:`CachedEmbedder` takes every text the stage needs (passages, concepts, facts and rules
at once), looks all their cache keys up in one read of the cache table, sends each distinct
missing text to the model once, longest first, in slices of whole batches, writes the new
vectors with one append, and scatters the vectors back to each group. The model therefore
sees the same global length-sorted batches as one plain ``encode`` of the distinct texts.
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


class VectorCache(Protocol):
    """Vectors stored under cache keys (``ids.embedding_key``)."""

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(hit, vectors)``: a (n,) bool mask over ``keys`` and the (hits, d) vectors of the
        hits in key order."""

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store (n, d) ``vectors`` under ``keys`` (keys that ``find`` just missed)."""


class LanceVectorCache:
    """The store's embedding table as a :class:`VectorCache`: one read per lookup (only the hit
    rows' vectors are converted) and one append per write."""

    def __init__(self, store: LanceStore) -> None:
        self.store = store
        self._width: int | None = None  # vector width of the table as last read; 0: no table

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        cache = self.store.read(EMBEDDINGS)
        self._width = cache.schema.field("vector").type.list_size if cache.num_rows else 0
        if not self._width or not keys:
            return np.zeros(len(keys), bool), np.zeros((0, self._width or 1), np.float32)
        where = pc.index_in(pa.array(keys, pa.string()), value_set=cache["key"])  # (n,) or null
        hit = where.is_valid().to_numpy(zero_copy_only=False)  # (n,) bool
        rows = where.drop_null()  # (hits,) row numbers in the cache table, key order
        return hit, arrow_to_vectors(cache["vector"].take(rows), self._width)  # (hits, d)

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        if not len(keys):
            return
        rows = pa.table({"key": pa.array(keys, pa.string()), "vector": vectors_to_arrow(vectors)})
        if self._width is None:
            self.find([])
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

    def __init__(self, inner: Embedder, cache: VectorCache, slice_texts: int = SLICE_TEXTS) -> None:
        super().__init__(inner)
        self.cache = cache
        self.slice_texts = slice_texts
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
        hit, found = self.cache.find(distinct)  # (u,) bool, (hits, d)
        todo = [k for k, h in zip(distinct, hit) if not h]
        new = self._embed_missing([texts[row_of[k]] for k in todo], progress)  # (misses, d)
        if todo:
            self.cache.add(todo, new)
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
        """Each group's rows from the distinct keys' vectors: ``found`` for the hits, ``new`` for
        the misses (the arrays are views of one matrix when no text repeats)."""
        if not len(found):
            table = new  # (u, d): every distinct key missed, in order
        elif not len(new):
            table = found  # (u, d): every distinct key hit, in order
        else:
            table = np.empty((len(distinct), new.shape[1]), np.float32)  # (u, d)
            table[hit], table[~hit] = found, new
        if len(distinct) < len(keys):
            index = {k: i for i, k in enumerate(distinct)}
            at = np.fromiter((index[k] for k in keys), np.int64, len(keys))  # (n,)
            table = table[at]  # (n, d)
        out, start = [], 0
        for group in groups:
            out.append(table[start : start + len(group)])  # (len(group), d)
            start += len(group)
        return out

    def _embed_missing(self, texts: list[str], progress: Progress) -> np.ndarray:
        """(len(texts), d) vectors: longest first in whole-batch slices, scattered back."""
        if not texts:
            return np.zeros((0, 1), np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # (m,) longest first
        vectors = np.zeros((0, 1), np.float32)
        for start in range(0, len(texts), self.slice_texts):
            rows = order[start : start + self.slice_texts]  # (slice,)
            part = np.asarray(self.inner.embed([texts[i] for i in rows]), np.float32)
            if not start:
                vectors = np.empty((len(texts), part.shape[1]), np.float32)  # (m, d)
            vectors[rows] = part  # scattered back to the caller's order
            self.calls += 1
            progress("embed", min(start + self.slice_texts, len(texts)), len(texts))
        self.texts_embedded += len(texts)
        return vectors
