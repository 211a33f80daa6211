"""Query-path steps: small array functions from query scores to a teleport vector and a ranking.

Each step is pure; :class:`qortex_core.query.retriever.Retriever` chains them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_core.query.ppr.cg import thread_pool
from qortex_core.query.ppr.solve import query_threads

_SPLIT_FLOATS = 1 << 23  # a product reading this many floats is split over the query threads


def cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine scores of unit rows against a unit query.

    A large float32 product (1M passages x 64 dimensions) is split into row blocks computed
    side by side on :func:`~qortex_core.query.ppr.solve.query_threads` threads (30 -> 17 ms on 2
    cores); blocks start at multiples of 64 rows, where a one-thread BLAS product (a query's,
    see ``Retriever.search``) sums each row as it would unsplit, so the scores are the same.
    """
    if matrix.shape[0] == 0:
        return np.zeros(0, np.float32)
    large = matrix.size >= _SPLIT_FLOATS and matrix.ndim == 2  # most products are small
    threads = query_threads() if large else 1
    if threads > 1 and matrix.dtype == np.float32 and np.asarray(query).dtype == np.float32:
        out = np.empty(matrix.shape[0], np.float32)  # (n,)
        step = -(-matrix.shape[0] // (threads * 64)) * 64  # whole groups of the BLAS kernel's rows

        def block(start: int) -> None:  # (step, d) @ (d,) -> (step,)
            np.matmul(matrix[start : start + step], query, out=out[start : start + step])

        list(thread_pool(threads).map(block, range(0, matrix.shape[0], step)))
        return out
    return np.asarray(matrix @ query, dtype=np.float32)  # (n, d) @ (d,) -> (n,)


_GATHER_ROWS = 4096  # rows gathered into one reused block (a multiple of 64: see cosine)


def cosine_at(matrix: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(len(rows),) ``cosine(matrix[rows], query)`` with the same bits, gathered a block of
    rows at a time into one reused buffer: a fresh 68 MB copy of 267k memory-mapped rows
    (every concept a rule links, at 1M passages) cost 39 ms of a 51 ms product."""
    if not isinstance(matrix, np.ndarray):  # rows of segments (storage/segmented_rows.py)
        return cosine(matrix[rows], query)
    m = np.asarray(matrix)  # a memmap's ndarray view, no copy
    if (
        m.ndim != 2
        or m.dtype != np.float32
        or np.asarray(query).dtype != np.float32
        or m.shape[1:] != np.shape(query)
        or rows.shape[0] <= _GATHER_ROWS
    ):
        return cosine(m[rows], query)  # (and a query of another width raises there)
    out = np.empty(rows.shape[0], np.float32)  # (rows,)
    block = np.empty((_GATHER_ROWS, m.shape[1]), np.float32)  # (4096, d) reused
    for s in range(0, rows.shape[0], _GATHER_ROWS):
        at = rows[s : s + _GATHER_ROWS]
        np.take(m, at, axis=0, out=block[: at.size])
        np.matmul(block[: at.size], query, out=out[s : s + at.size])  # (b, d) @ (d,)
    return out


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector becomes all ones."""
    if scores.size == 0:
        return scores
    return scaled(scores, float(scores.min()), float(scores.max()))


def scaled(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``values`` mapped from [lo, hi] onto [0, 1] as a new array; all ones when the span is
    empty (:func:`min_max` with bounds taken over a larger vector)."""
    if hi - lo < 1e-12:
        return np.ones_like(values)
    out = np.subtract(values, lo)  # one new array, scaled in place: a second temporary of a
    out /= hi - lo  # 1M-passage vector costs page faults on every query
    return out


def blend_text(dense: np.ndarray, bm25: np.ndarray | None, weight: float) -> np.ndarray:
    """(n_passages,) (1 - weight) x min-max dense + weight x min-max BM25; ``dense`` itself when
    BM25 is absent, matches nothing or has no weight."""
    if bm25 is None or bm25.max() <= 0 or weight <= 0:
        return dense
    return (1.0 - weight) * min_max(dense) + weight * min_max(bm25)


_SAMPLE_STRIDE = 64  # a long score vector is first cut at the k-th best of every 64th score


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first (ties in no set order).

    Over a long vector the k-th largest of a strided sample bounds the k-th largest of the
    whole from below, so only the scores at or above it (about 64 k of them) are ranked.
    """
    k = min(k, scores.size)
    if k <= 0:
        return np.zeros(0, np.int64)
    at = None  # (c,) the candidates; None: every score
    if scores.size >= (1 << 16) and k * _SAMPLE_STRIDE * 16 <= scores.size:
        sample = scores[::_SAMPLE_STRIDE]  # (size / 64,)
        floor = sample[np.argpartition(-sample, k - 1)[k - 1]]
        if floor == floor:  # not NaN
            at = np.flatnonzero(scores >= floor)  # (>= k,) every score the top k can hold
    pool = scores if at is None else scores[at]
    part = np.argpartition(-pool, k - 1)[:k]
    part = part if at is None else at[part]
    return part[np.argsort(-scores[part], kind="stable")]


def phrase_seed_weights(
    fact_rank: np.ndarray,
    fact_weight: np.ndarray,
    fact_nodes: np.ndarray,
    passage_count: np.ndarray,
    specificity: bool,
) -> np.ndarray:
    """Mean linked-fact score per phrase, divided by its passage count when ``specificity``.

    Args:
        fact_rank: (t,) indices of the linked facts.
        fact_weight: (t,) their min-max scores.
        fact_nodes: (n_facts, 2) subject/object phrase index per fact.
        passage_count: (n_phrases,) passages containing each phrase.
    """
    n = passage_count.shape[0]
    ends = fact_nodes[fact_rank].reshape(-1)  # (t, 2) -> (2t,)
    nodes, at = np.unique(ends, return_inverse=True)  # (m,) seeded phrases
    total = np.bincount(at, weights=np.repeat(fact_weight, 2), minlength=nodes.size)  # (m,)
    mean = total / np.bincount(at, minlength=nodes.size)
    if specificity:
        count = passage_count[nodes]
        mean = np.divide(mean, count, out=mean, where=count > 0)
    weights = np.zeros(n, np.float32)
    weights[nodes] = mean
    return weights


def lexical_seeds(
    matches: Sequence[int],
    passage_count: np.ndarray,
    weight: float,
    max_passages: int,
    specificity: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Seeds for verbatim matches: (k,) distinct phrase indices and (k,) float32 weights,
    ``weight`` (/ passage count when ``specificity``); phrases in more than ``max_passages``
    passages dropped as too common."""
    idx = np.unique(
        np.array([m for m in matches if passage_count[m] <= max_passages], dtype=np.int64)
    )
    if not idx.size:
        return idx, np.zeros(0, np.float32)
    values = (
        weight / np.maximum(passage_count[idx], 1.0) if specificity else np.full(idx.size, weight)
    )
    return idx, np.asarray(values, np.float32)


@dataclass(frozen=True)
class FactSources:
    """The passages each fact was extracted from, laid out for a per-query max by gathers.

    Almost every fact has one source passage, so its context is one gather ``dense[first]``;
    the few further sources are folded in with ``np.maximum.at`` (a CSR ``reduceat`` over every
    fact costs a boolean mask, a compaction and a scatter per query: 25 ms against 4 ms for
    1.45M facts).

    Attributes:
        first: (n_facts,) int32 first source passage of each fact (0 for a fact without one).
        rest_facts: (m,) fact of every further source (its second, third, ... passage).
        rest_passages: (m,) that passage.
        empty: (e,) facts without a source passage (context 0).
    """

    first: np.ndarray
    rest_facts: np.ndarray
    rest_passages: np.ndarray
    empty: np.ndarray

    @classmethod
    def of(cls, indptr: np.ndarray, indices: np.ndarray) -> "FactSources":
        """From the CSR (n_facts, n_passages) of fact sources; ``indices`` is used as ``first``
        without a copy when every fact has exactly one source (a memory-mapped snapshot stays
        shared)."""
        n_facts = int(indptr.shape[0]) - 1
        counts = np.diff(indptr)  # (n_facts,)
        if indices.shape[0] == n_facts and bool((counts == 1).all()):
            none = np.zeros(0, np.int64)
            return cls(indices, none, none.astype(indices.dtype), none)
        empty = np.flatnonzero(counts == 0)
        first = np.zeros(n_facts, np.int32)  # (n_facts,) 0 for a fact without a source
        if indices.shape[0]:
            at = np.minimum(indptr[:-1], indices.shape[0] - 1)  # (n_facts,) each row's start
            first = np.where(counts > 0, indices[at], 0).astype(np.int32)
        further = np.ones(indices.shape[0], bool)  # (nnz,) every source but each fact's first
        further[indptr[:-1][counts > 0]] = False
        rest_facts = np.repeat(np.arange(n_facts), counts)[further]
        return cls(first, rest_facts, indices[further], empty)

    def context(self, dense: np.ndarray) -> np.ndarray:
        """(n_facts,) best dense score among each fact's source passages (0 for none).

        Args:
            dense: (n_passages,) query-to-passage cosine.
        """
        if dense.shape[0] == 0:
            return np.zeros(self.first.shape[0], np.float32)
        out = np.asarray(dense, np.float32)[self.first]  # (n_facts,) gather of first sources
        if self.rest_facts.size:  # (m,) further sources, max-folded in place
            np.maximum.at(out, self.rest_facts, dense[self.rest_passages])
        out[self.empty] = 0.0
        return out

    def context_at(self, dense: np.ndarray, facts: np.ndarray) -> np.ndarray:
        """(len(facts),) :meth:`context` of the given facts only (a fact index's candidates)."""
        if dense.shape[0] == 0 or not facts.size:
            return np.zeros(facts.shape[0], np.float32)
        out = np.asarray(dense, np.float32)[self.first[facts]]  # (f,) gather of first sources
        if self.rest_facts.size:  # rest_facts is sorted: each fact's further sources are a run
            lo = np.searchsorted(self.rest_facts, facts, side="left")  # (f,)
            runs = np.searchsorted(self.rest_facts, facts, side="right") - lo  # (f,)
            owner = np.repeat(np.arange(facts.size), runs)  # (m',) position in ``facts``
            entry = np.arange(owner.size) - np.repeat(np.cumsum(runs) - runs, runs) + lo[owner]
            np.maximum.at(out, owner, dense[self.rest_passages[entry]])
        if self.empty.size:
            out[np.isin(facts, self.empty)] = 0.0
        return out


def passage_context(
    dense: np.ndarray, fact_passage_indptr: np.ndarray, fact_passage_indices: np.ndarray
) -> np.ndarray:
    """Best dense score among the passages each fact was extracted from (0 for a fact with none).

    The retriever keeps the :class:`FactSources` of its snapshot and calls its ``context``.

    Args:
        dense: (n_passages,) query-to-passage cosine.
        fact_passage_indptr, fact_passage_indices: CSR (n_facts, n_passages) of fact sources.
    """
    return FactSources.of(fact_passage_indptr, fact_passage_indices).context(dense)


def link_scores(fact_scores: np.ndarray, context: np.ndarray, weight: float) -> np.ndarray:
    """Fact linking score.

    Query-to-fact cosine + ``weight`` x the best cosine of the fact's passages.
    """
    if weight <= 0 or context.shape != fact_scores.shape:
        return fact_scores
    out = np.multiply(context, np.float32(weight), dtype=np.float32)  # (n_facts,)
    out += fact_scores
    return out


def add_dense_term(ppr_scores: np.ndarray, dense: np.ndarray, dense_weight: float) -> np.ndarray:
    """Final passage score: min-max PPR mass plus ``dense_weight`` x min-max dense score."""
    if dense_weight <= 0:
        return ppr_scores
    return min_max(ppr_scores) + dense_weight * min_max(dense)


def dense_first(
    final: np.ndarray,
    dense: np.ndarray,
    allowed: np.ndarray | None = None,
    vetoed: np.ndarray | None = None,
) -> np.ndarray:
    """``final`` with the best dense passage (among ``allowed``) lifted just above every other
    score.

    The walk then orders the rest: recall@1 is dense retrieval's, and the graph adds from rank 2.
    When that passage is ``vetoed`` (judged down by feedback) nothing is lifted: the walk ranks all.
    """
    candidates = dense if allowed is None else np.where(allowed, dense, -np.inf)  # (n_passages,)
    if candidates.size == 0 or not np.isfinite(candidates).any():
        return final
    best = int(np.argmax(candidates))
    if vetoed is not None and vetoed[best]:
        return final
    out = np.array(final, dtype=np.float32, copy=True)
    out[best] = np.float32(out.max()) + np.float32(1e-4)
    return out


def teleport_vector(
    phrase_weights: np.ndarray,
    passage_dense: np.ndarray,
    passage_node_weight: float,
    passage_seeds: int = 0,
    seeded: np.ndarray | None = None,
) -> np.ndarray:
    """Restart vector over [phrases | passages]: phrase seeds plus min-max dense x weight, on
    the ``passage_seeds`` most similar passages only (0: on every passage).

    ``seeded``: indices outside which ``phrase_weights`` is zero; only those are copied (a
    query's few seeds, instead of every phrase).
    """
    n_phrases, n_passages = phrase_weights.size, passage_dense.size
    weight = np.float32(passage_node_weight)
    if not 0 < passage_seeds < n_passages:
        passages = min_max(passage_dense) * weight  # (n_passages,)
        keep = None
    else:  # the same min-max, computed on the kept passages only
        keep = top_indices(passage_dense, passage_seeds)  # (passage_seeds,)
        lo, hi = float(passage_dense.min()), float(passage_dense.max())
        passages = scaled(passage_dense[keep], lo, hi) * weight  # (passage_seeds,)
    out = np.zeros(n_phrases + n_passages, np.float32)  # (n_nodes,)
    if seeded is None:
        out[:n_phrases] = phrase_weights
    else:
        out[seeded] = phrase_weights[seeded]
    if keep is None:
        out[n_phrases:] = passages
    else:
        out[n_phrases + keep] = passages
    return out
