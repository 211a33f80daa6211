"""Graph exploration over a loaded snapshot: a concept's neighbours, the path between two, and
the facts about one with their source passages.

A name resolves the way query seeds do: the exact (normalised) concept name first, else the
concept whose embedding is nearest to the name's; every answer says which concept that was.
Traversal is a breadth-first search over the snapshot's CSR adjacency, one vectorised frontier
expansion per hop (rows gathered by scipy, parents picked with numpy); no networkx.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from qortex_core.errors import QueryError
from qortex_core.query.explore_types import (
    EntityInfo,
    FactRef,
    GraphPath,
    Neighbor,
    Neighborhood,
    PassageRef,
    PathStep,
    Resolved,
)
from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage.arrow_access import ArrowRows, ArrowStrings
from qortex_core.storage.phrase_keys import phrase_key

MAX_DEPTH = 4
MAX_LIMIT = 1000
MAX_PATH = 8
MAX_NAME = 500


def _bounded(value: object, what: str, low: int, high: int) -> int:
    """``value`` as an int in [low, high].

    Raises:
        QueryError: not an integer in that range.
    """
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise QueryError(f"{what} must be an integer from {low} to {high}, got {value!r}")
    return value


def pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """(k,) int64 key of each unordered concept pair (a[i], b[i]) among ``n`` concepts."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    return np.minimum(a, b) * n + np.maximum(a, b)


class Explorer:
    """Neighbours, paths and entities of one snapshot.

    Args:
        view: the snapshot's view (a retriever's ``view``).
        synonym_pairs: (s, 2) phrase index pairs of the snapshot's synonym edges.
        embed: name -> (d,) unit vector, by the snapshot's embedding model (for nearest names).
    """

    def __init__(
        self,
        view: SnapshotView,
        synonym_pairs: np.ndarray,
        embed: Callable[[str], np.ndarray],
    ) -> None:
        self.view, self.embed = view, embed
        self.n, self.n_nodes = view.n_phrases, view.adjacency.shape[0]
        nodes = np.asarray(view.fact_nodes, np.int64).reshape(-1, 2)  # (f, 2)
        keys = pair_keys(nodes[:, 0], nodes[:, 1], max(self.n, 1))  # (f,)
        self._fact_order = np.argsort(keys, kind="stable")  # (f,) facts by pair key
        self._fact_keys = keys[self._fact_order]
        pairs = np.asarray(synonym_pairs, np.int64).reshape(-1, 2)
        self._synonyms = np.sort(pair_keys(pairs[:, 0], pairs[:, 1], max(self.n, 1)))

    # -- names ------------------------------------------------------------------------------
    def resolve(self, name: str) -> Resolved:
        """The concept ``name`` stands for: exact normalised name, else the nearest embedding.

        Raises:
            QueryError: an empty or over-long name, or a snapshot without concepts.
        """
        return self._find(name)[0]

    def _find(self, name: str) -> tuple[Resolved, int]:
        """:meth:`resolve`, with the concept's node index."""
        if not isinstance(name, str) or not name.strip():
            raise QueryError("a concept name must be a non-empty string")
        if len(name) > MAX_NAME:
            raise QueryError(f"a concept name is at most {MAX_NAME} characters")
        if self.n == 0:
            raise QueryError(f"the snapshot {self.view.name} has no concepts")
        key = phrase_key(name)
        hit = self.view.phrase_index.get(key) if key is not None else None
        if hit is not None:
            return self._resolved(name, int(hit), "exact", 1.0), int(hit)
        vectors = self.view.phrase_vectors
        if vectors.shape[0] != self.n:
            raise QueryError(
                f"no concept is named {name!r}, and snapshot {self.view.name} has no concept "
                "vectors to find the nearest"
            )
        scores = vectors @ self.embed(name.strip())  # (n_phrases,)
        best = int(np.argmax(scores))
        return self._resolved(name, best, "nearest", float(scores[best])), best

    def _resolved(self, query: str, node: int, how: str, score: float) -> Resolved:
        view = self.view
        return Resolved(query, view.node_names[node], view.node_ids[node], how, round(score, 6))

    # -- traversal --------------------------------------------------------------------------
    def _expand(
        self, frontier: np.ndarray, visited: np.ndarray, blocked: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One BFS hop: (new nodes, the frontier node that reached each over its strongest
        edge, that edge's weight), each (m,); nodes in ``visited`` or ``blocked`` are skipped."""
        rows = self.view.adjacency[frontier]  # (len(frontier), n_nodes) CSR
        source = np.repeat(frontier, np.diff(rows.indptr))  # (e,)
        target, weight = rows.indices.astype(np.int64), rows.data  # (e,) each
        keep = ~visited[target] if blocked is None else ~(visited[target] | blocked[target])
        source, target, weight = source[keep], target[keep], weight[keep]
        order = np.lexsort((source, -weight, target))  # by target, strongest edge first
        first = np.unique(target[order], return_index=True)[1]
        picked = order[first]
        return target[picked], source[picked], weight[picked]

    def neighbors(
        self,
        name: str,
        depth: int = 1,
        limit: int = 30,
    ) -> Neighborhood:
        """Concepts within ``depth`` hops of ``name``'s concept over fact and synonym edges,
        nearest first, then by edge weight; at most ``limit``.

        Raises:
            QueryError: a bad name, depth (1..4) or limit (1..1000).
        """
        depth = _bounded(depth, "depth", 1, MAX_DEPTH)
        limit = _bounded(limit, "limit", 1, MAX_LIMIT)
        resolved, start = self._find(name)
        blocked = np.zeros(self.n_nodes, bool)
        blocked[self.n :] = True  # concepts only: passages are not neighbours
        visited = np.zeros(self.n_nodes, bool)
        visited[start] = True
        found: list[tuple[np.ndarray, ...]] = []
        frontier = np.array([start], np.int64)
        for hop in range(1, depth + 1):
            nodes, parents, weights = self._expand(frontier, visited, blocked)
            if nodes.size == 0:
                break
            visited[nodes] = True
            found.append((nodes, parents, weights, np.full(nodes.size, hop)))
            frontier = nodes
        return self._neighborhood(resolved, found, limit)

    def _neighborhood(
        self, resolved: Resolved, found: list[tuple[np.ndarray, ...]], limit: int
    ) -> Neighborhood:
        if not found:
            return Neighborhood(resolved, [], self.view.name)
        nodes, parents, weights, hops = (np.concatenate(parts) for parts in zip(*found))
        order = np.lexsort((nodes, -weights, hops))[:limit]
        labels = self.relations(parents[order], nodes[order])
        names, ids = self.view.node_names, self.view.node_ids
        out = [
            Neighbor(names[v], ids[v], int(h), names[u], label, round(float(w), 6))
            for v, u, w, h, label in zip(
                nodes[order].tolist(), parents[order].tolist(), weights[order].tolist(),
                hops[order].tolist(), labels,
            )
        ]  # fmt: skip
        return Neighborhood(resolved, out, self.view.name, truncated=nodes.size > limit)

    def relations(self, a: np.ndarray, b: np.ndarray) -> list[str]:
        """The label of each concept-concept edge (a[i], b[i]): its facts' predicates, else
        ``synonym`` or ``related``."""
        keys = pair_keys(a, b, max(self.n, 1))  # (k,)
        lo = np.searchsorted(self._fact_keys, keys, "left")
        hi = np.searchsorted(self._fact_keys, keys, "right")
        synonym = np.isin(keys, self._synonyms)  # (k,)
        predicates = ArrowStrings(self.view.facts.column("predicate"))  # chunked: by row
        labels = []
        for start, stop, syn in zip(lo.tolist(), hi.tolist(), synonym.tolist()):
            facts = self._fact_order[start:stop]
            said = dict.fromkeys(predicates.take(facts)) if facts.size else {}
            labels.append("; ".join(said) if said else ("synonym" if syn else "related"))
        return labels

    def path(
        self, source: str, target: str, max_len: int = 4, hidden: np.ndarray | None = None
    ) -> GraphPath:
        """A shortest path (fewest edges, strongest edges on ties) between two names'
        concepts through concepts and passages, of at most ``max_len`` edges.

        Args:
            hidden: (n_passages,) True for passages that must not be crossed (forgotten).

        Raises:
            QueryError: a bad name or max_len (1..8).
        """
        max_len = _bounded(max_len, "max_len", 1, MAX_PATH)
        (a, s), (b, t) = self._find(source), self._find(target)
        blocked = np.zeros(self.n_nodes, bool)
        if hidden is not None:
            blocked[self.n :] = hidden
        parent = np.full(self.n_nodes, -1, np.int64)
        visited = np.zeros(self.n_nodes, bool)
        visited[s] = True
        frontier = np.array([s], np.int64)
        for _ in range(max_len):
            if visited[t]:
                break
            nodes, parents, _w = self._expand(frontier, visited, blocked)
            if nodes.size == 0:
                break
            visited[nodes], parent[nodes] = True, parents
            frontier = nodes
        if not visited[t]:
            return GraphPath(a, b, False, [], self.view.name, max_len)
        chain = [t]
        while chain[-1] != s:
            chain.append(int(parent[chain[-1]]))
        return GraphPath(a, b, True, self._steps(chain[::-1]), self.view.name, max_len)

    def _steps(self, chain: list[int]) -> list[PathStep]:
        """Path nodes as steps, each with the label of the edge from the one before."""
        steps: list[PathStep] = []
        for at, node in enumerate(chain):
            before = chain[at - 1] if at else -1
            if node < self.n:
                name, node_id, passage = self.view.node_names[node], self.view.node_ids[node], None
            else:
                passage = self.passage(node - self.n)
                name, node_id = passage.title or passage.text[:60], passage.id
            steps.append(
                PathStep(name, node_id, "concept" if node < self.n else "passage",
                         self._edge(before, node), passage)
            )  # fmt: skip
        return steps

    def _edge(self, before: int, node: int) -> str:
        if before < 0:
            return ""
        if before < self.n and node < self.n:
            return self.relations(np.array([before]), np.array([node]))[0]
        if before >= self.n and node >= self.n:
            return "next in source"
        return "mentioned in" if node >= self.n else "mentions"

    # -- entities ---------------------------------------------------------------------------
    def passage(self, index: int) -> PassageRef:
        """The snapshot passage at ``index`` (a passage index, not a node index)."""
        row = self.view.passages[index]
        return PassageRef(
            row["id"], row.get("title") or "", row["text"], row.get("time"),
            row.get("domain") or "default",
        )  # fmt: skip

    def entity(self, name: str, limit: int = 20, hidden: np.ndarray | None = None) -> EntityInfo:
        """The facts about ``name``'s concept (subject or object) with the passages that state
        them, and the passages that mention it: at most ``limit`` of each.

        Args:
            hidden: (n_passages,) True for passages to leave out (forgotten); a fact stated
                only in hidden passages is left out too.

        Raises:
            QueryError: a bad name or limit (1..1000).
        """
        limit = _bounded(limit, "limit", 1, MAX_LIMIT)
        resolved, c = self._find(name)
        ends = np.asarray(self.view.fact_nodes).reshape(-1, 2)
        facts = np.flatnonzero((ends[:, 0] == c) | (ends[:, 1] == c))  # (m,)
        indptr, indices = self.view.fact_passages
        visible = np.ones(self.view.n_passages, bool) if hidden is None else ~hidden
        sources = [indices[indptr[f] : indptr[f + 1]] for f in facts.tolist()]
        sources = [s[visible[s]] for s in sources]
        counts = np.array([s.size for s in sources], np.int64)
        order = [i for i in np.lexsort((facts, -counts)).tolist() if counts[i]][:limit]
        table = ArrowRows(self.view.facts).take(facts[order]) if order else []
        refs = [
            FactRef(row["id"], row["subject"], row["predicate"], row["object"],
                    [self.passage(int(p)) for p in sources[i][:5]])
            for i, row in zip(order, table)
        ]  # fmt: skip
        row = self.view.adjacency[c]
        passages = row.indices[row.indices >= self.n] - self.n  # (p,)
        passages = passages[visible[passages]]
        times = np.nan_to_num(self.view.passage_times[passages], nan=-np.inf)
        newest = passages[np.lexsort((passages, -times))][:limit]
        degree = int(np.count_nonzero((row.indices < self.n) & (row.indices != c)))
        return EntityInfo(
            resolved, refs, [self.passage(int(p)) for p in newest], degree, self.view.name
        )
