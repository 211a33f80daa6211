"""Query-path steps: small array functions from query scores to a teleport vector and a ranking.

Each step is pure; :class:`qortex_core.query.retriever.Retriever` chains them.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from qortex_core.storage import ids


def cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine scores of unit rows against a unit query."""
    if matrix.shape[0] == 0:
        return np.zeros(0, np.float32)
    return np.asarray(matrix @ query, dtype=np.float32)  # (n, d) @ (d,) -> (n,)


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector becomes all ones."""
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    return np.ones_like(scores) if hi - lo < 1e-12 else (scores - lo) / (hi - lo)


def blend_text(dense: np.ndarray, bm25: np.ndarray | None, weight: float) -> np.ndarray:
    """(n_passages,) (1 - weight) x min-max dense + weight x min-max BM25; ``dense`` itself when
    BM25 is absent, matches nothing or has no weight."""
    if bm25 is None or bm25.max() <= 0 or weight <= 0:
        return dense
    return (1.0 - weight) * min_max(dense) + weight * min_max(bm25)


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first."""
    k = min(k, scores.size)
    if k <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
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
    w = np.repeat(fact_weight, 2)
    total = np.bincount(ends, weights=w, minlength=n)  # (n_phrases,)
    hits = np.bincount(ends, minlength=n)
    weights = np.divide(total, hits, out=np.zeros(n), where=hits > 0)
    if specificity:
        weights = np.divide(weights, passage_count, out=weights, where=passage_count > 0)
    return weights.astype(np.float32)


_STOP = frozenset(
    """a an the of in on at to for from by with and or is was were are be been who what which
when where why how whose whom that this these those it its he she they his her their as do does
did than then there here not no yes one two first second new old other same""".split()
)


class Lookup(Protocol):
    """Normalised concept name -> phrase index (a dict, or a hashed index over the snapshot)."""

    def get(self, key: str, /) -> int | None: ...


def phrase_key(name: str, max_words: int = 6) -> str | None:
    """The normalised form of a concept name worth matching verbatim in a query, or None
    (too long, shorter than 3 letters, or only stop words)."""
    key = ids.normalize_phrase(name)
    words = key.split()
    if (
        0 < len(words) <= max_words
        and len(key.replace(" ", "")) >= 3
        and not all(w in _STOP for w in words)
    ):
        return key
    return None


def phrase_lookup(names: Sequence[str], max_words: int = 6) -> dict[str, int]:
    """Normalised concept name -> phrase index, for names worth matching in a query (the first
    phrase of a name wins)."""
    out: dict[str, int] = {}
    for i, name in enumerate(names):
        key = phrase_key(name, max_words)
        if key is not None:
            out.setdefault(key, i)
    return out


def lexical_matches(text: str, lookup: Lookup, max_words: int = 6) -> list[int]:
    """Phrase indices whose names occur as whole word n-grams in ``text``; longest matches win."""
    words = ids.normalize_phrase(text).split()
    covered = [False] * len(words)
    found: list[int] = []
    for n in range(min(max_words, len(words)), 0, -1):
        for start in range(len(words) - n + 1):
            if all(covered[start : start + n]):
                continue
            hit = lookup.get(" ".join(words[start : start + n]))
            if hit is not None:
                found.append(hit)
                covered[start : start + n] = [True] * n
    return found


def lexical_seed_weights(
    matches: Sequence[int],
    passage_count: np.ndarray,
    weight: float,
    max_passages: int,
    specificity: bool,
) -> np.ndarray:
    """Seed weight per phrase for verbatim matches.

    ``weight`` (/ passage count), common phrases dropped.
    """
    out = np.zeros(passage_count.shape[0], np.float32)
    idx = np.array([m for m in matches if passage_count[m] <= max_passages], dtype=np.int64)
    if idx.size:
        out[idx] = weight / np.maximum(passage_count[idx], 1.0) if specificity else weight
    return out


def passage_context(
    dense: np.ndarray, fact_passage_indptr: np.ndarray, fact_passage_indices: np.ndarray
) -> np.ndarray:
    """Best dense score among the passages each fact was extracted from (0 for a fact with none).

    Args:
        dense: (n_passages,) query-to-passage cosine.
        fact_passage_indptr, fact_passage_indices: CSR (n_facts, n_passages) of fact sources.
    """
    n_facts = fact_passage_indptr.shape[0] - 1
    out = np.zeros(n_facts, np.float32)
    starts, ends = fact_passage_indptr[:-1], fact_passage_indptr[1:]
    nonempty = ends > starts
    if fact_passage_indices.size and nonempty.any():
        # segments of the non-empty rows tile the indices array, so reduceat splits it exactly
        out[nonempty] = np.maximum.reduceat(
            dense[fact_passage_indices], starts[nonempty]
        )  # (nnz,) -> (n_facts,)
    return out


def link_scores(fact_scores: np.ndarray, context: np.ndarray, weight: float) -> np.ndarray:
    """Fact linking score.

    Query-to-fact cosine + ``weight`` x the best cosine of the fact's passages.
    """
    if weight <= 0 or context.shape != fact_scores.shape:
        return fact_scores
    return (fact_scores + weight * context).astype(np.float32)  # (n_facts,)


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
    phrase_weights: np.ndarray, passage_dense: np.ndarray, passage_node_weight: float
) -> np.ndarray:
    """Restart vector over [phrases | passages]: phrase seeds plus min-max dense x weight."""
    return np.concatenate([phrase_weights, min_max(passage_dense) * passage_node_weight]).astype(
        np.float32
    )
