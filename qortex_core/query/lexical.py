"""The lexical channel: BM25 over the snapshot's passages (LanceDB full-text index).

The index lives in the store (:mod:`qortex_core.storage.fulltext`); the snapshot pins its
version, and :class:`LexicalIndex` searches that version and maps hits onto the
snapshot's passage order. Modes read the scores through the query context.
"""

from __future__ import annotations

import numpy as np

from qortex_core.query.arrow_access import ArrowStrings, HashLookup
from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage import fulltext


class LexicalIndex:
    """BM25 scores per snapshot passage for a query text.

    Attributes:
        exact: True when the snapshot's pinned index version is searched (False: it was
            pruned and the latest version is searched, keeping only the snapshot's ids).
    """

    def __init__(self, table, view: SnapshotView, exact: bool) -> None:
        self.table, self.exact = table, exact
        self.row_of = HashLookup.build(ArrowStrings(view.passages.table["id"]))  # id -> row
        self.n = view.n_passages

    @classmethod
    def open(cls, db, view: SnapshotView, manifest: dict) -> "LexicalIndex | None":
        """The index a snapshot pinned (``table_versions``), or None when it has none."""
        version = (manifest.get("table_versions") or {}).get(fulltext.PASSAGE_TEXT, 0)
        if db is None or not version:
            return None
        table, exact = fulltext.open_pinned(db, version)
        return cls(table, view, exact) if table is not None else None

    def scores(self, text: str, limit: int) -> np.ndarray:
        """(n_passages,) BM25 score of the best ``limit`` matches; 0 for every other passage."""
        out = np.zeros(self.n, np.float32)
        ids, scores = fulltext.search(self.table, text, limit)
        for pid, score in zip(ids, scores.tolist()):
            row = self.row_of.get(pid)
            if row is not None:
                out[row] = score
        return out
