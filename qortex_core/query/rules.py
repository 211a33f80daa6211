"""Rules in results: each rule scored by the highest PPR score among its concepts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np
import pyarrow as pa

from qortex_core.query.seeding import cosine_at, top_indices


@dataclass(frozen=True)
class RuleHit:
    """A rule, its score, and the concepts that activated it (highest scoring first)."""

    id: str
    text: str
    category: str
    confidence: float
    score: float
    concepts: tuple[str, ...] = ()
    concept_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleIndex:
    """The snapshot's rules as flat arrays: rule r owns ``nodes[offsets[r]:offsets[r + 1]]``."""

    table: pa.Table
    offsets: np.ndarray  # (n_rules + 1,) int64
    nodes: np.ndarray  # (total links,) int64 phrase indices
    domains: list[list[str]]
    confidence: np.ndarray  # (n_rules,) float32
    linked: np.ndarray  # (m,) the distinct phrase indices any rule links, ascending

    @classmethod
    def from_table(cls, table: pa.Table | None) -> "RuleIndex":
        if table is None or table.num_rows == 0 or "concept_nodes" not in table.column_names:
            none = np.zeros(0, np.int64)
            return cls(pa.table({}), np.zeros(1, np.int64), none, [], np.zeros(0, np.float32), none)
        column = table["concept_nodes"].combine_chunks()
        offsets = np.asarray(column.offsets.to_numpy(), dtype=np.int64)
        offsets = offsets - offsets[0]
        nodes = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
        domains = (
            table["domains"].to_pylist()
            if "domains" in table.column_names
            else [[] for _ in range(table.num_rows)]
        )
        confidence = np.asarray(
            table["confidence"].to_numpy(zero_copy_only=False), dtype=np.float32
        )
        return cls(table, offsets, nodes, domains, confidence, np.unique(nodes))

    def __len__(self) -> int:
        return len(self.offsets) - 1


def rule_cosine(
    index: RuleIndex, phrase_vectors: np.ndarray, n_phrases: int, vector: np.ndarray
) -> np.ndarray:
    """(n_phrases,) query cosine of the concepts rules link, zero elsewhere (and everywhere
    when the snapshot has no concept vectors): all :func:`rank_rules` reads of a dense query."""
    out = np.zeros(n_phrases, np.float32)
    if phrase_vectors.shape[0] == n_phrases and index.linked.size:
        out[index.linked] = cosine_at(phrase_vectors, index.linked, vector)  # (m,)
    return out


@numba.njit(nogil=True, cache=True)
def _rule_maxima(offsets, nodes, phrase_scores, out):  # pragma: no cover - compiled
    """``out[r]`` = the max of ``phrase_scores`` over rule r's nodes (rules without a node
    keep their value): one pass over the rules, each a short run of gathers."""
    for r in range(offsets.size - 1):
        lo, hi = offsets[r], offsets[r + 1]
        if hi > lo:
            best = phrase_scores[nodes[lo]]
            for k in range(lo + 1, hi):
                v = phrase_scores[nodes[k]]
                if v > best or v != v:  # a NaN wins, as np.maximum's
                    best = v
            out[r] = best


def rule_scores(index: RuleIndex, phrase_scores: np.ndarray) -> np.ndarray:
    """Max phrase score per rule; ``-inf`` for rules linked to no concept."""
    n = len(index)
    out = np.full(n, -np.inf, np.float32)  # (n_rules,)
    if n == 0 or index.nodes.size == 0:
        return out
    scores = np.ascontiguousarray(phrase_scores, dtype=np.float32)  # (n_phrases,)
    if index.linked[0] < 0 or index.linked[-1] >= scores.size:  # the kernel reads unchecked
        raise IndexError(
            f"rules link concept {int(index.linked[-1])} of {scores.size} (or a negative one)"
        )
    _rule_maxima(index.offsets, index.nodes, scores, out)
    return out


def rank_rules(
    index: RuleIndex,
    phrase_scores: np.ndarray,
    node_ids: Sequence[str],
    node_names: Sequence[str],
    top_k: int,
    domains: Sequence[str] | None = None,
    min_relative: float = 0.01,
) -> list[RuleHit]:
    """The ``top_k`` rules by their best concept's score (ties by confidence), domain-filtered.

    Rules whose concepts all scored zero, or below ``min_relative`` x the best rule's score,
    are left out: the walk barely reached them.
    """
    if len(index) == 0:
        return []
    scores = rule_scores(index, phrase_scores)
    keep = np.flatnonzero(scores > 0)  # (kept,)
    if domains:
        allowed = set(domains)
        keep = keep[[bool(allowed.intersection(index.domains[i])) for i in keep.tolist()]]
    if keep.size:
        keep = keep[scores[keep] >= min_relative * float(scores[keep].max())]
    if keep.size > top_k > 0:  # every rule tied with the k-th best score stays a candidate
        kth = scores[keep[top_indices(scores[keep], top_k)[-1]]]
        keep = keep[scores[keep] >= kth]
    order = keep[np.lexsort((-index.confidence[keep], -scores[keep]))][:top_k].tolist()
    out = []
    for r in order:
        row = index.table.slice(r, 1).to_pylist()[0]
        linked = index.nodes[index.offsets[r] : index.offsets[r + 1]]
        active = linked[np.argsort(-phrase_scores[linked], kind="stable")]
        active = active[phrase_scores[active] > 0]
        out.append(
            RuleHit(
                row["id"],
                row["text"],
                row["category"],
                float(row["confidence"]),
                float(scores[r]),
                tuple(node_names[j] for j in active),
                tuple(node_ids[j] for j in active),
            )
        )
    return out
