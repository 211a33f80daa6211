"""Synthetic graphs and queries shaped like HippoRAG's, for PPR benchmarks and tests.

A HippoRAG graph has phrase nodes and passage nodes. Edges are passage-contains-phrase
(weight 1), relation edges between phrases (weight = occurrence count) and synonym
edges between phrases (weight = cosine, 0.8-1.0). Phrase popularity is heavy-tailed,
so a few phrases have thousands of edges and most have a handful.

A query's teleport vector, as HippoRAG 2 builds it, has a few phrase seeds (the ends
of the linked facts, divided by their passage counts) plus ``0.05 x`` the min-max
dense score on every passage node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class GraphShape:
    """How a synthetic graph is made.

    Attributes:
        passage_fraction: share of nodes that are passages (MuSiQue: ~12%).
        contains_share: share of edges that are passage-contains-phrase.
        synonym_share: share of edges that are phrase-phrase synonyms; the rest are relations.
        zipf: exponent of phrase popularity (rank ** -zipf).
    """

    passage_fraction: float = 0.12
    contains_share: float = 0.3
    synonym_share: float = 0.35
    zipf: float = 0.9


@dataclass(frozen=True)
class SyntheticGraph:
    """A symmetric weighted adjacency over ``[phrases | passages]``."""

    adjacency: sp.csr_matrix
    n_phrases: int

    @property
    def n_nodes(self) -> int:
        return self.adjacency.shape[0]

    @property
    def n_edges(self) -> int:
        """Undirected edges (each stored twice in the symmetric matrix)."""
        return int(self.adjacency.nnz // 2)


def _popularity(n: int, zipf: float, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed sampling probabilities over ``n`` items in random order."""
    p = np.arange(1, n + 1, dtype=np.float64) ** -zipf
    rng.shuffle(p)
    return p / p.sum()


def _candidate_edges(
    n_phrases: int,
    n_passages: int,
    count: int,
    shape: GraphShape,
    pop: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` random (row, col, weight) edges of the three kinds, possibly repeated."""
    n_contains = int(count * shape.contains_share) if n_passages else 0
    n_syn = int(count * shape.synonym_share)
    n_rel = count - n_contains - n_syn
    cr = rng.integers(0, max(n_passages, 1), n_contains) + n_phrases  # passages
    cc = rng.choice(n_phrases, n_contains, p=pop)
    rr, rc = rng.choice(n_phrases, n_rel, p=pop), rng.choice(n_phrases, n_rel, p=pop)
    sr = rng.choice(n_phrases, n_syn, p=pop)
    sc = rng.integers(0, n_phrases, n_syn)  # a popular phrase has many near-duplicates
    rows = np.concatenate([cr, rr, sr])
    cols = np.concatenate([cc, rc, sc])
    weights = np.concatenate([np.ones(n_contains), np.ones(n_rel), rng.uniform(0.8, 1.0, n_syn)])
    return rows, cols, weights


def synthetic_graph(
    n_nodes: int, n_edges: int, seed: int = 0, shape: GraphShape = GraphShape()
) -> SyntheticGraph:
    """A HippoRAG-shaped graph with exactly ``n_nodes`` nodes and ``n_edges`` undirected edges.

    Every phrase is first placed in one passage (so most nodes are connected), then
    edges are drawn by popularity until ``n_edges`` distinct pairs exist. Repeated
    draws of a pair add their weights, as repeated facts do in HippoRAG.

    Raises:
        ValueError: too few nodes, or more edges than distinct node pairs.
    """
    if n_nodes < 3:
        raise ValueError(f"need at least 3 nodes, got {n_nodes}")
    n_passages = max(1, int(round(n_nodes * shape.passage_fraction)))
    n_phrases = n_nodes - n_passages
    if n_edges < 0 or n_edges > n_nodes * (n_nodes - 1) // 2 // 2:
        raise ValueError(
            f"{n_edges} edges do not fit {n_nodes} nodes (at most a quarter of all pairs)"
        )
    rng = np.random.default_rng(seed)
    pop = _popularity(n_phrases, shape.zipf, rng)
    base = min(n_phrases, n_edges)
    rows = [rng.integers(0, n_passages, base) + n_phrases]  # one home passage per phrase
    cols = [rng.permutation(n_phrases)[:base]]
    weights = [np.ones(base)]
    keys = np.zeros(0, np.int64)
    w_unique: np.ndarray = np.zeros(0)
    while True:
        r, c = np.concatenate(rows), np.concatenate(cols)
        keep = r != c
        lo, hi = np.minimum(r, c)[keep].astype(np.int64), np.maximum(r, c)[keep].astype(np.int64)
        all_keys = np.concatenate([keys, lo * n_nodes + hi])
        all_w = np.concatenate([w_unique, np.concatenate(weights)[keep]])
        keys, inverse = np.unique(all_keys, return_inverse=True)
        w_unique = np.bincount(inverse, weights=all_w, minlength=keys.size)
        if keys.size >= n_edges:
            break
        missing = n_edges - keys.size
        r, c, w = _candidate_edges(n_phrases, n_passages, int(missing * 1.3) + 16, shape, pop, rng)
        rows, cols, weights = [r], [c], [w]
    pick = np.sort(rng.permutation(keys.size)[:n_edges])  # base edges are not favoured over others
    keys, w_unique = keys[pick], w_unique[pick].astype(np.float32)
    lo, hi = (keys // n_nodes).astype(np.int32), (keys % n_nodes).astype(np.int32)
    upper = sp.csr_matrix((w_unique, (lo, hi)), shape=(n_nodes, n_nodes), dtype=np.float32)
    adj = sp.csr_matrix(upper + upper.T, dtype=np.float32)
    adj.indices = adj.indices.astype(np.int32)
    if adj.nnz < np.iinfo(np.int32).max:
        adj.indptr = adj.indptr.astype(np.int32)
    return SyntheticGraph(adj, n_phrases)


def synthetic_teleports(
    graph: SyntheticGraph,
    n_queries: int,
    seed: int = 0,
    n_seeds: tuple[int, int] = (2, 8),
    passage_node_weight: float = 0.05,
) -> np.ndarray:
    """(n_nodes, n_queries) float32 teleport vectors shaped like HippoRAG 2 queries.

    Each query gets a few phrase seeds (weight in [0.5, 1] divided by the phrase's
    passage count, HippoRAG's node specificity) and ``passage_node_weight`` x the
    min-max of a noisy dense score on every passage (a few passages score high).
    """
    rng = np.random.default_rng(seed + 1_000_003)
    n, n_phr = graph.n_nodes, graph.n_phrases
    n_pass = n - n_phr
    adj = graph.adjacency
    degree = np.diff(adj.indptr)
    connected = np.flatnonzero(degree[:n_phr] > 0)
    pool = connected if connected.size else np.arange(n_phr)
    passage_count = np.asarray((adj[n_phr:, :n_phr] > 0).sum(axis=0)).ravel()  # (n_phrases,)
    out = np.zeros((n, n_queries), np.float32)
    for q in range(n_queries):
        k = int(rng.integers(n_seeds[0], n_seeds[1] + 1))
        seeds = rng.choice(pool, min(k, pool.size), replace=False)
        out[seeds, q] = rng.uniform(0.5, 1.0, seeds.size) / np.maximum(passage_count[seeds], 1)
        if n_pass:
            dense = rng.normal(0.2, 0.05, n_pass)
            hot = rng.choice(n_pass, min(5, n_pass), replace=False)
            dense[hot] += rng.uniform(0.2, 0.4, hot.size)
            span = dense.max() - dense.min()
            out[n_phr:, q] = passage_node_weight * (
                (dense - dense.min()) / span if span > 0 else 1.0
            )
    return out
