"""Graph exploration on :class:`~qortex_core.agent.api.Memory`: ``mem.neighbors(name)``,
``mem.path(a, b)`` and ``mem.entity(name)`` over the latest snapshot.

A mixin, so the memory API stays one class; the work is :class:`~qortex_core.query.explore.
Explorer`'s. Passages forgotten since the snapshot was built are neither crossed by a path nor
cited by an entity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from qortex_core.errors import SnapshotError
from qortex_core.query.explore_types import EntityInfo, GraphPath, Neighborhood

if TYPE_CHECKING:
    from qortex_core.query.explore import Explorer
    from qortex_core.query.retriever import Retriever


def explorer_of(retriever: Retriever) -> Explorer:
    """An :class:`Explorer` over a retriever's snapshot, resolving names with its embedder."""
    from qortex_core.query.explore import Explorer  # numba-compiled lookups: loaded on first use

    pairs = retriever.snapshot.arrays.get("synonym_pairs", np.zeros((0, 2), np.int32))
    return Explorer(retriever.view, pairs, lambda text: retriever.embedder.embed([text])[0])


class GraphMethods:
    """The graph methods of a memory (needs the host's ``retriever()``)."""

    _explorer: tuple[object, Explorer] | None = None

    def retriever(self) -> Retriever | None:  # provided by Memory
        raise NotImplementedError

    def graph_explorer(self) -> tuple[Explorer, np.ndarray | None]:
        """The explorer of the latest snapshot and its hidden passages (forgotten since).

        Raises:
            SnapshotError: no snapshot yet.
        """
        retriever = self.retriever()
        if retriever is None:
            raise SnapshotError("the graph needs a snapshot: run `qortex consolidate` first")
        if self._explorer is None or self._explorer[0] is not retriever:
            self._explorer = (retriever, explorer_of(retriever))
        allowed = retriever.fresh.visible(None) if retriever.fresh is not None else None
        return self._explorer[1], None if allowed is None else ~allowed

    def neighbors(self, name: str, depth: int = 1, limit: int = 30) -> Neighborhood:
        """Concepts within ``depth`` hops of the concept ``name`` resolves to (exact name, else
        the nearest by embedding: ``resolved`` says which), nearest and strongest first.

        Raises:
            QueryError: a bad name, depth (1..4) or limit (1..1000); SnapshotError: no snapshot.
        """
        return self.graph_explorer()[0].neighbors(name, depth, limit)

    def path(self, source: str, target: str, max_len: int = 4) -> GraphPath:
        """A shortest path (at most ``max_len`` edges) between two names' concepts, through
        concepts and passages; ``found`` is False when there is none that short.

        Raises:
            QueryError: a bad name or max_len (1..8); SnapshotError: no snapshot.
        """
        explorer, hidden = self.graph_explorer()
        return explorer.path(source, target, max_len, hidden)

    def entity(self, name: str, limit: int = 20) -> EntityInfo:
        """The facts about the concept ``name`` resolves to, with their source passages and
        event times, and the passages that mention it (at most ``limit`` of each).

        Raises:
            QueryError: a bad name or limit (1..1000); SnapshotError: no snapshot.
        """
        explorer, hidden = self.graph_explorer()
        return explorer.entity(name, limit, hidden)
