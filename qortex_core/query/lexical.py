"""The lexical channel: BM25 over the snapshot's passages (LanceDB full-text index).

The index lives in the store (:mod:`qortex_core.storage.fulltext`); the snapshot pins its
version, and :class:`LexicalIndex` searches that version and maps hits onto the
snapshot's passage order. Modes read the scores through the query context.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage import fulltext
from qortex_core.storage.arrow_access import ArrowStrings, HashLookup

_log = logging.getLogger(__name__)


def _pin(manifest: dict) -> int:
    """The ``passage_text`` version a manifest pins (0: none)."""
    versions = manifest.get("table_versions") if isinstance(manifest, dict) else None
    pin = versions.get(fulltext.PASSAGE_TEXT, 0) if isinstance(versions, dict) else 0
    return pin if isinstance(pin, int) and not isinstance(pin, bool) else 0


class LexicalIndex:
    """BM25 scores per snapshot passage for a query text.

    Attributes:
        exact: True when the snapshot's pinned index version is searched (False: it was
            pruned and the latest version is searched, keeping only the snapshot's ids).
    """

    def __init__(
        self, table, view: SnapshotView, exact: bool, db=None, manifest_path: Path | None = None
    ) -> None:
        self.table, self.exact = table, exact
        self.row_of = HashLookup.build(ArrowStrings(view.passages.table["id"]))  # id -> row
        self.n = view.n_passages
        self._db, self._manifest_path = db, manifest_path

    @classmethod
    def open(
        cls, db, view: SnapshotView, manifest: dict, manifest_path: Path | None = None
    ) -> "LexicalIndex | None":
        """The index a snapshot pinned (``table_versions``), or None when it has none.

        ``manifest_path``: where the pin is re-read when the pinned version's files are gone
        (``qortex purge`` rewrites the table, re-pins the snapshot and cleans old versions).
        """
        version = _pin(manifest)
        if db is None or not version:
            return None
        table, exact = fulltext.open_pinned(db, version)
        return cls(table, view, exact, db, manifest_path) if table is not None else None

    def _reopen(self) -> None:
        """Check out the snapshot's pin as it stands on disk now (else the newest version)."""
        manifest: dict = {}
        if self._manifest_path is not None:
            try:
                manifest = json.loads(self._manifest_path.read_text())
            except (OSError, ValueError):
                manifest = {}
        pin = _pin(manifest)
        table, exact = (
            fulltext.open_pinned(self._db, pin) if pin else (fulltext.open_latest(self._db), False)
        )
        if table is None:
            raise LookupError("the full-text index is gone")
        self.table, self.exact = table, exact

    def _search(self, text: str, limit: int) -> tuple[list[str], np.ndarray]:
        try:
            return fulltext.search(self.table, text, limit)
        except (OSError, RuntimeError) as exc:  # the version's files were cleaned by a purge
            if self._db is None:
                raise
            _log.info("passage_text unreadable (%s): reopening it", exc)
            self._reopen()
            return fulltext.search(self.table, text, limit)

    def scores(self, text: str, limit: int) -> np.ndarray:
        """(n_passages,) BM25 score of the best ``limit`` matches; 0 for every other passage."""
        out = np.zeros(self.n, np.float32)
        ids, scores = self._search(text, limit)
        for pid, score in zip(ids, scores.tolist()):
            row = self.row_of.get(pid)
            if row is not None:
                out[row] = score
        return out
