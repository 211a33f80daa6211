"""The knowledge graph: phrase nodes, passage nodes and three kinds of weighted edges."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class GraphConfig:
    """Edge weights by kind.

    Attributes:
        fact_weight: weight added per (passage, fact) occurrence between subject and object.
        passage_weight: weight of a passage-contains-phrase edge.
        synonym_scale: synonym edge weight = cosine x this.
    """

    fact_weight: float = 1.0
    passage_weight: float = 1.0
    synonym_scale: float = 1.0


@dataclass(frozen=True)
class GraphInput:
    """Index arrays that describe a graph; nodes are phrases [0, n_phrases) then passages.

    Attributes:
        n_phrases, n_passages: node counts.
        fact_pairs: (m, 2) phrase indices of each fact occurrence (duplicates count).
        contains: (c, 2) (passage index, phrase index) pairs.
        synonyms: rows, cols, weights of synonym pairs between phrases.
    """

    n_phrases: int
    n_passages: int
    fact_pairs: np.ndarray
    contains: np.ndarray
    synonyms: tuple[np.ndarray, np.ndarray, np.ndarray]


def build_adjacency(graph: GraphInput, config: GraphConfig = GraphConfig()) -> sp.csr_matrix:
    """Symmetric float32 CSR adjacency with relation, containment and synonym edges.

    Duplicate relation edges add up (weighted by count); self-loops are dropped.
    """
    n = graph.n_phrases + graph.n_passages
    fp = graph.fact_pairs.reshape(-1, 2).astype(np.int64)
    fp = fp[fp[:, 0] != fp[:, 1]]
    ct = graph.contains.reshape(-1, 2).astype(np.int64)
    ct = np.unique(ct, axis=0) if len(ct) else ct  # a phrase twice in one passage is one edge
    sr, sc, sw = graph.synonyms
    rows = np.concatenate([fp[:, 0], ct[:, 0] + graph.n_phrases, sr])
    cols = np.concatenate([fp[:, 1], ct[:, 1], sc])
    weights = np.concatenate([
        np.full(len(fp), config.fact_weight, np.float32),
        np.full(len(ct), config.passage_weight, np.float32),
        np.asarray(sw, np.float32) * config.synonym_scale,
    ])
    upper = sp.coo_matrix((weights, (rows, cols)), shape=(n, n), dtype=np.float32).tocsr()
    upper.sum_duplicates()
    return sp.csr_matrix(upper + upper.T, dtype=np.float32)


def phrase_passage_counts(contains: np.ndarray, n_phrases: int) -> np.ndarray:
    """Number of distinct passages that contain each phrase (node specificity's denominator)."""
    ct = np.unique(contains.reshape(-1, 2), axis=0) if len(contains) else contains.reshape(-1, 2)
    return np.bincount(ct[:, 1], minlength=n_phrases).astype(np.float32)
