"""Rules in results: each rule scored by the highest PPR score among its concepts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numba
import numpy as np
import pyarrow as pa

from qortex_core.jsonable import JsonRecord
from qortex_core.query.ppr.csr_views import rows_listing
from qortex_core.query.scoring import cosine_at, top_indices


class LiveMask(Protocol):
    """What :func:`rank_rules` reads of a :class:`~qortex_core.query.liveness.Liveness` (named
    here: liveness reads the snapshot view, which holds this module's :class:`RuleIndex`)."""

    @property
    def phrases(self) -> np.ndarray: ...

    @property
    def rules(self) -> np.ndarray: ...


@dataclass(frozen=True)
class RuleHit(JsonRecord):
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
    # the passages each rule came from, (offsets, passage indices); None: a snapshot built
    # before rules kept their sources
    sources: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_table(cls, table: pa.Table | None) -> "RuleIndex":
        if table is None or table.num_rows == 0 or "concept_nodes" not in table.column_names:
            none = np.zeros(0, np.int64)
            return cls(pa.table({}), np.zeros(1, np.int64), none, [], np.zeros(0, np.float32), none)
        offsets, nodes = _lists(table["concept_nodes"])
        domains = (
            table["domains"].to_pylist()
            if "domains" in table.column_names
            else [[] for _ in range(table.num_rows)]
        )
        confidence = np.asarray(
            table["confidence"].to_numpy(zero_copy_only=False), dtype=np.float32
        )
        sources = _lists(table["passages"]) if "passages" in table.column_names else None
        return cls(table, offsets, nodes, domains, confidence, np.unique(nodes), sources)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def live(self, passages: np.ndarray, phrases: np.ndarray) -> np.ndarray:
        """(n_rules,) rules a live passage still backs: one of their source ``passages``
        (n_passages,) is live; without recorded sources, one of their concepts is live
        (``phrases``: (n_phrases,)). A rule that lists no source keeps its concept test."""
        by_concept = rows_listing(self.offsets, self.nodes, phrases)  # (n_rules,)
        if self.sources is None:
            return by_concept
        offsets, listed = self.sources
        unsourced = np.diff(offsets) == 0  # (n_rules,)
        return rows_listing(offsets, listed, passages) | (unsourced & by_concept)


def _lists(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A list<int> column as (offsets from 0, int64 values)."""
    flat = column.combine_chunks()
    offsets = np.asarray(flat.offsets.to_numpy(), dtype=np.int64)
    values = np.asarray(flat.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
    return offsets - offsets[0], values


def rule_cosine(
    index: RuleIndex,
    phrase_vectors: np.ndarray,
    n_phrases: int,
    vector: np.ndarray,
    floor: float = 0.0,
) -> np.ndarray:
    """(n_phrases,) query cosine of the concepts rules link, zero elsewhere (and everywhere
    when the snapshot has no concept vectors): all :func:`rank_rules` reads of a dense query.
    A cosine below ``floor`` counts as zero: a concept must be as close to the query as a fact
    must be to seed the walk (``fact_threshold``), or a rule is shown for any question."""
    out = np.zeros(n_phrases, np.float32)
    if phrase_vectors.shape[0] == n_phrases and index.linked.size:
        found = cosine_at(phrase_vectors, index.linked, vector)  # (m,)
        out[index.linked] = np.where(found >= floor, found, np.float32(0.0))
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
    live: LiveMask | None = None,
) -> list[RuleHit]:
    """The ``top_k`` rules by their best concept's score (ties by confidence), domain-filtered.

    Rules whose concepts all scored zero, or below ``min_relative`` x the best concept's score
    (rule-linked or not), are left out: the walk barely reached them. ``live`` (some passages
    forgotten, :mod:`qortex_core.query.liveness`): a rule whose every source passage is forgotten
    is never shown, and a concept no live passage backs neither scores a rule nor is named as
    its reason.
    """
    if len(index) == 0:
        return []
    if live is not None:
        phrase_scores = np.where(live.phrases, phrase_scores, np.float32(0.0))  # (n_phrases,)
    scores = rule_scores(index, phrase_scores)
    reached = scores > 0  # (n_rules,)
    keep = np.flatnonzero(reached if live is None else reached & live.rules)  # (kept,)
    if domains:
        allowed = set(domains)
        keep = keep[[bool(allowed.intersection(index.domains[i])) for i in keep.tolist()]]
    if keep.size:
        best = max(float(scores[keep].max()), float(phrase_scores.max()))
        keep = keep[scores[keep] >= min_relative * best]
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
