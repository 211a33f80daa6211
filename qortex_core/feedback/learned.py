"""What a retriever learns from feedback: factors over phrase nodes, the query log, judgements.

:class:`LearnedFeedback` is what a :class:`~qortex_core.query.retriever.Retriever` keeps beside
its snapshot: it turns the ``teleportation_factors`` table into a vector over
phrase nodes (re-read when the table changes, so no restart is needed),
remembers which concepts each result came through, and records judgements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from qortex_core.errors import QueryError
from qortex_core.feedback.events import (
    FeedbackConfig,
    FeedbackEvent,
    QueryLog,
    ResultTrace,
    record_feedback,
)
from qortex_core.feedback.factors import FactorCache, FactorConfig, FoldReport, update_factors
from qortex_core.storage.store import LanceStore


@dataclass(frozen=True)
class LearnedFeedbackConfig:
    """Attributes:
    factor_refresh_s: the factors table's version is checked at most this often.
    feedback: query-log settings.
    factors: judgement steps used by :meth:`LearnedFeedback.update_factors`.
    """

    factor_refresh_s: float = 1.0
    feedback: FeedbackConfig = FeedbackConfig()
    factors: FactorConfig = FactorConfig()


def _id_column(phrase_ids: Sequence[str]) -> pa.Array | pa.ChunkedArray:
    """The phrase ids as an Arrow string column (the snapshot's own when it is one)."""
    column = getattr(phrase_ids, "column", None)  # an ArrowStrings over the nodes table
    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        return column
    return pa.array(list(phrase_ids), pa.string())


def factor_vector(phrase_ids: pa.Array | pa.ChunkedArray, factors: dict[str, float]) -> np.ndarray:
    """(n_phrases,) float32 factor per phrase: ``factors[id]``, 1.0 for a phrase without one
    (factors of concepts the snapshot lacks are ignored)."""
    vector = np.ones(len(phrase_ids), np.float32)
    if factors:
        at = pc.index_in(pa.array(list(factors), pa.string()), value_set=phrase_ids)
        rows = pc.fill_null(at, -1).to_numpy(zero_copy_only=False)  # (n_factors,)
        values = np.fromiter(factors.values(), np.float32, len(factors))  # (n_factors,)
        vector[rows[rows >= 0]] = values[rows >= 0]
    return vector


class LearnedFeedback:
    """Factors, query log and feedback of one tenant over one snapshot's phrase nodes."""

    def __init__(
        self,
        store: LanceStore | None,
        phrase_ids: Sequence[str],
        passage_phrases: sp.csr_matrix,
        tenant: str = "default",
        config: LearnedFeedbackConfig = LearnedFeedbackConfig(),
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.config = config
        self.phrase_ids = _id_column(phrase_ids)  # an Arrow column, no dict of every concept
        self.passage_phrases = (
            passage_phrases  # (n_passages, n_phrases) CSR, non-zero where a passage has a phrase
        )
        self.salience = salience(passage_phrases)
        self.cache = FactorCache(store, config.factor_refresh_s) if store is not None else None
        self.log = QueryLog(store, config.feedback, tenant) if store is not None else None
        self._factors = np.ones(len(self.phrase_ids), np.float32)
        self._preference: np.ndarray | None = None
        self._version = 0

    def phrase_factors(self) -> np.ndarray:
        """(n_phrases,) learned teleportation factor per phrase node (1.0 where none)."""
        if self.cache is None:
            return self._factors
        factors, version = self.cache.get()
        if version != self._version:
            vector = factor_vector(self.phrase_ids, factors)
            self._factors, self._preference, self._version = vector, None, version
        return self._factors

    @property
    def factors_version(self) -> int:
        """Version of the factors table the current vector came from (0: none)."""
        return self._version

    def preference(self) -> np.ndarray:
        """(n_passages,) preference component from the current factors."""
        factors = self.phrase_factors()
        if self._preference is None:
            self._preference = preference(self.passage_phrases, factors, self.config.factors.upper)
        return self._preference

    def record(self, query_id: str, snapshot: str, traces: Sequence[ResultTrace]) -> None:
        """Remember which concepts each result of ``query_id`` came through."""
        if self.log is not None:
            self.log.record(query_id, snapshot, traces)

    def flush(self) -> None:
        """Write pending query-log traces now (a one-shot CLI process does this before exiting)."""
        if self.log is not None:
            self.log.flush()

    @property
    def log_problem(self) -> str | None:
        """Why query-log rows were skipped (read-only home, disk full), or None."""
        return self.log.problem if self.log is not None else None

    def feedback(
        self,
        query_id: str,
        accepted: Sequence[str] = (),
        rejected: Sequence[str] = (),
        partial: Sequence[str] = (),
    ) -> list[FeedbackEvent]:
        """Append one event per judged result of ``query_id``.

        Raises:
            QueryError: no store, unknown query id, unknown result id, or nothing judged.
        """
        if self.store is None or self.log is None:
            raise QueryError(
                "feedback needs a data home: open the retriever with Retriever.open(home)"
            )
        return record_feedback(self.store, self.log, query_id, accepted, rejected, partial)

    def update_factors(self, force: bool = False) -> FoldReport:
        """Fold every feedback event into the factors table.

        The result is used from the next query.
        """
        if self.store is None:
            raise QueryError(
                "factors need a data home: open the retriever with Retriever.open(home)"
            )
        report = update_factors(self.store, self.config.factors, force=force)
        if self.cache is not None:
            self.cache.checked = float("-inf")
        return report


def salience(passage_phrases: sp.csr_matrix) -> np.ndarray:
    """log-scaled number of concepts in each passage, in [0, 1]."""
    degree = np.asarray(passage_phrases.getnnz(axis=1), dtype=np.float64)  # (n_passages,)
    top = float(degree.max()) if degree.size else 0.0
    return (
        (np.log1p(degree) / math.log1p(top)).astype(np.float32)
        if top > 0
        else np.zeros(degree.size, np.float32)
    )


def preference(
    passage_phrases: sp.csr_matrix, phrase_factors: np.ndarray, upper: float = 10.0
) -> np.ndarray:
    """Mean log learned factor of each passage's concepts mapped to [0, 1]; 0.5 is neutral."""
    logs = np.log(np.maximum(np.asarray(phrase_factors, dtype=np.float64), 1e-12))  # (n_phrases,)
    binary = passage_phrases.astype(bool).astype(np.float64)
    count = np.asarray(binary.sum(axis=1)).ravel()
    mean = np.divide(binary @ logs, count, out=np.zeros(count.size), where=count > 0)
    return np.clip(0.5 + mean / (2 * math.log(upper)), 0.0, 1.0).astype(np.float32)
