"""Facets of a statement: what supersession and the current-facts ranking compare.

A statement's facet is its :class:`~qortex_core.memory.statements.Statement` and three unit
vectors of texts derived from it: the predicate (the subject replaced by "someone"), the
predicate with its values masked ("someone works at X": the attribute alone) and the values
("Acme Robotics": what kind of value it is). The vectors are pure functions of the text and the
model, so they are kept in the store's embedding cache (an own write adds them, any other
process finds them there, or embeds them once when they are missing) and in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_core.memory.statements import Statement, parse
from qortex_core.storage import ids

MASK = "X"


@dataclass(frozen=True)
class Facet:
    """A statement and its (d,) predicate, masked-predicate and values vectors."""

    statement: Statement
    predicate: np.ndarray
    masked: np.ndarray
    values: np.ndarray | None  # None: the statement names no value


def masked_predicate(statement: Statement) -> str:
    """The predicate with each value word (and number) replaced by one ``X``."""
    out: list[str] = []
    for word in statement.predicate.split(" "):
        base = word[:-2] if word.endswith(("'s", "’s")) else word
        if base.lower() in statement.values or base[:1].isdigit():
            if out[-1:] != [MASK]:
                out.append(MASK)
        else:
            out.append(word)
    return " ".join(out)


def derived_texts(statement: Statement) -> list[str]:
    """The texts a facet embeds: predicate, masked predicate and (when any) the values."""
    texts = [statement.predicate, masked_predicate(statement)]
    return texts + ([" ".join(sorted(statement.values))] if statement.values else [])


class FacetStore:
    """Facets by text: this process's, else the embedding cache's, else embedded now."""

    def __init__(self, store, embedder) -> None:
        """``embedder``: an embedder, or a callable returning one (loaded when first needed)."""
        self.store, self._embedder = store, embedder
        self._vectors: dict[str, np.ndarray] = {}  # derived text -> (d,) vector
        self._cache = None

    @property
    def embedder(self):
        if callable(self._embedder) and not hasattr(self._embedder, "embed"):
            self._embedder = self._embedder()
        return self._embedder

    def _cached(self):
        if self._cache is None:
            from qortex_core.ingest.embed_cache import LanceVectorCache

            self._cache = LanceVectorCache(self.store)
        return self._cache

    def facets(self, texts: Sequence[str], persist: bool = True) -> list[Facet]:
        """The facet of each text (one embedding batch for whatever nobody embedded yet).

        ``persist``: add newly embedded vectors to the store's embedding cache.
        """
        statements = [parse(t) for t in texts]
        wanted = sorted({d for s in statements for d in derived_texts(s)} - set(self._vectors))
        if wanted:
            self._load(wanted, persist)
        return [self._facet(s) for s in statements]

    def _load(self, wanted: list[str], persist: bool) -> None:
        model = self.embedder.name
        keys = [ids.embedding_key(model, t) for t in wanted]
        hit, found = self._lookup(keys)
        missing = [i for i, h in enumerate(hit) if not h]
        for i in np.flatnonzero(hit).tolist():
            self._vectors[wanted[i]] = found[i]
        if missing:
            vectors = self.embedder.embed([wanted[i] for i in missing])  # (m, d)
            for i, vector in zip(missing, vectors):
                self._vectors[wanted[i]] = vector
            if persist:
                self._remember([keys[i] for i in missing], vectors)

    def _lookup(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._cached().find(keys)
        except (OSError, RuntimeError, ValueError):  # a read-only or damaged cache: embed
            return np.zeros(len(keys), bool), np.zeros((len(keys), 1), np.float32)

    def _remember(self, keys: list[str], vectors: np.ndarray) -> None:
        try:
            self._cached().add(keys, np.asarray(vectors, np.float32))
        except (OSError, RuntimeError, ValueError):  # derived data: the next reader embeds it
            pass

    def _facet(self, statement: Statement) -> Facet:
        texts = derived_texts(statement)
        values = self._vectors[texts[2]] if len(texts) > 2 else None
        return Facet(statement, self._vectors[texts[0]], self._vectors[texts[1]], values)
