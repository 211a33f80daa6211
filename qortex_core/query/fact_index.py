"""The snapshot's fact index: facts stored cell by cell (:mod:`qortex_core.ingest.cells`) so a
query scores the facts of its nearest cells instead of every fact.

Fact linking ranks facts by query cosine plus ``fact_context`` x the best dense score of their
source passages; a cell search only sees the first term, so the facts of the best dense
passages are scored as well. Both kinds of candidates get exact scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from qortex_core.query.scoring import FactSources, cosine, link_scores, top_indices


@dataclass(frozen=True)
class FactIndex:
    """Cells of the snapshot's facts and each passage's facts.

    Attributes:
        centroids: (cells, d) unit centroids.
        bounds: (cells + 1,) cell ``c`` holds facts ``bounds[c]:bounds[c + 1]``.
        passage_facts: (n_passages, n_facts) CSR: the facts extracted from each passage.
    """

    centroids: np.ndarray
    bounds: np.ndarray
    passage_facts: sp.csr_matrix

    @classmethod
    def of(
        cls, centroids: np.ndarray, bounds: np.ndarray, fact_passages: tuple, n_passages: int
    ) -> "FactIndex":
        """From the snapshot's cells and its (fact -> passages) CSR arrays."""
        indptr, indices = fact_passages
        n_facts = int(indptr.shape[0]) - 1
        sources = sp.csr_matrix(
            (np.ones(indices.shape[0], np.int8), indices, indptr), shape=(n_facts, n_passages)
        )
        return cls(np.asarray(centroids), np.asarray(bounds, np.int64), sources.T.tocsr())

    def cells_near(self, vector: np.ndarray, probes: int) -> list[tuple[int, int]]:
        """(start, stop) fact ranges of the ``probes`` cells nearest ``vector``."""
        near = top_indices(cosine(self.centroids, vector), probes)  # (probes,)
        return [(int(self.bounds[c]), int(self.bounds[c + 1])) for c in near.tolist()]

    def facts_of(self, passages: np.ndarray) -> np.ndarray:
        """Sorted distinct facts extracted from ``passages``."""
        rows = self.passage_facts[passages]  # (p, n_facts)
        return np.unique(rows.indices)


def outside(values: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """The entries of ``values`` in none of the ``[start, stop)`` ranges, in their order (for
    sorted distinct ``values``, what ``np.setdiff1d`` with the ranges' concatenation gives,
    without sorting that concatenation)."""
    keep = np.ones(values.shape[0], bool)  # (v,)
    for start, stop in ranges:
        keep &= (values < start) | (values >= stop)
    return values[keep]


def cell_scores(
    index: FactIndex,
    fact_vectors: np.ndarray,
    sources: FactSources,
    vector: np.ndarray,
    dense: np.ndarray,
    probes: int,
    context_weight: float,
    context_passages: int = 16,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidates,) fact indices with their query cosine and linking score: the facts of the
    ``probes`` nearest cells and of the ``context_passages`` best dense passages."""
    ranges = index.cells_near(vector, probes)
    at = np.concatenate([np.arange(start, stop) for start, stop in ranges] or [np.zeros(0, int)])
    scores = [cosine(fact_vectors[start:stop], vector) for start, stop in ranges]  # (size,) each
    if context_weight > 0 and dense.shape[0]:
        extra = outside(index.facts_of(top_indices(dense, context_passages)), ranges)
        scores.append(cosine(fact_vectors[extra], vector))  # (extra, d) @ (d,)
        at = np.concatenate([at, extra])
    cos = np.concatenate(scores) if scores else np.zeros(0, np.float32)  # (candidates,)
    context = sources.context_at(dense, at) if context_weight > 0 else cos  # (candidates,)
    link = link_scores(cos, context, context_weight)
    return at.astype(np.int64), cos, link
