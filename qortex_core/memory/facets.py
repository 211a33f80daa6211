"""Facets of a statement: what supersession and the current-facts ranking compare.

A statement's facet is its :class:`~qortex_core.memory.statements.Statement` and three unit
vectors of texts derived from it: the predicate (the subject replaced by "someone"), the
predicate with its values masked ("someone works at X": the attribute alone) and the values
("Acme Robotics": what kind of value it is). The vectors are pure functions of the text and the
model, so each process embeds a derived text once and keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_core.memory.statements import Statement, parse

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
    """Facets by text, memoised in this process (the vectors are pure functions of the text and
    the model). Nothing is written to the store: a memory write never touches a table that
    ingestion or purge rewrites."""

    def __init__(self, embedder) -> None:
        """``embedder``: an embedder, or a callable returning one (loaded when first needed)."""
        self._embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}  # derived text -> (d,) vector

    @property
    def embedder(self):
        if callable(self._embedder) and not hasattr(self._embedder, "embed"):
            self._embedder = self._embedder()
        return self._embedder

    def facets(self, texts: Sequence[str]) -> list[Facet]:
        """The facet of each text (one embedding batch for whatever this process lacks)."""
        statements = [parse(t) for t in texts]
        wanted = sorted({d for s in statements for d in derived_texts(s)} - set(self._vectors))
        if wanted:
            vectors = self.embedder.embed(wanted)  # (m, d)
            self._vectors.update(zip(wanted, vectors))
        return [self._facet(s) for s in statements]

    def _facet(self, statement: Statement) -> Facet:
        texts = derived_texts(statement)
        values = self._vectors[texts[2]] if len(texts) > 2 else None
        return Facet(statement, self._vectors[texts[0]], self._vectors[texts[1]], values)
