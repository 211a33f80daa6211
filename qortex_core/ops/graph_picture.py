"""The picture of a neighbourhood (``qortex graph show``): a radial layout, one ring per depth.

The resolved concept sits in the middle; each ring holds the concepts that many hops away,
ordered by the angle of the concept that reached them, so a branch stays together and labels do
not pile up (readable at 30 concepts). Every edge among the shown concepts is drawn; fact edges
carry their predicate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.query.explore import Explorer
from qortex_core.query.explore_types import Neighborhood

COLORS = ("#c0392b", "#2e86c1", "#85c1e9", "#d6eaf8", "#eef6fc")
SIZES = (2600, 1500, 1000, 800, 700)
LABEL_CHARS = 28


def _indices(explorer: Explorer, concept_ids: list[str]) -> np.ndarray:
    """Node indices of concept ids (every id is a concept of the snapshot)."""
    column = explorer.view.node_ids[: explorer.n]
    values = getattr(column, "column", None)
    if values is None:
        values = pa.array(list(column), pa.string())
    found = pc.index_in(pa.array(concept_ids, pa.string()), value_set=values)
    return np.asarray(found.to_numpy(zero_copy_only=False), np.int64)


def radial_positions(found: Neighborhood) -> dict[str, tuple[float, float]]:
    """Concept id -> (x, y): the resolved concept at the origin, depth ``d`` on the circle of
    radius ``d``, ordered by the angle of the concept one hop nearer."""
    angle = {found.resolved.name: 0.0}
    where = {found.resolved.concept_id: (0.0, 0.0)}
    depths = sorted({n.depth for n in found.neighbors})
    for depth in depths:
        ring = [n for n in found.neighbors if n.depth == depth]
        ring.sort(key=lambda n: (angle.get(n.via, 0.0), n.name))
        offset = 0.0 if depth == 1 else np.pi / max(len(ring), 1)
        for k, n in enumerate(ring):
            theta = offset + 2 * np.pi * k / len(ring)
            angle[n.name] = theta
            where[n.concept_id] = (depth * np.cos(theta), depth * np.sin(theta))
    return where


def settled(
    where: dict[str, tuple[float, float]], ids: list[str], a: np.ndarray, b: np.ndarray
) -> dict[str, tuple[float, float]]:
    """The radial positions relaxed by a Kamada-Kawai layout (networkx) started from them, so
    linked concepts sit closer and fewer edges cross; the resolved concept stays in the middle."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((ids[i], ids[j]) for i, j in zip(a.tolist(), b.tolist()))
    if graph.number_of_nodes() < 3:
        return where
    pos = nx.kamada_kawai_layout(
        graph, pos=dict(where), scale=max(np.hypot(*p) for p in where.values())
    )
    centre = np.asarray(pos[ids[0]])
    return {k: (float(x - centre[0]), float(y - centre[1])) for k, (x, y) in pos.items()}


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def layout_picture(explorer: Explorer, found: Neighborhood, plt: Any) -> Any:
    """A matplotlib figure of ``found`` (``plt``: ``matplotlib.pyplot``)."""
    where = radial_positions(found)
    ids = [found.resolved.concept_id] + [n.concept_id for n in found.neighbors]
    names = [found.resolved.name] + [n.name for n in found.neighbors]
    depth = [0] + [n.depth for n in found.neighbors]
    nodes = _indices(explorer, ids)  # (k,)
    block = explorer.view.adjacency[nodes][:, nodes].tocoo()  # edges among the shown concepts
    upper = block.row < block.col
    a, b = block.row[upper], block.col[upper]
    labels = explorer.relations(nodes[a], nodes[b])
    where = settled(where, ids, a, b)
    figure, axes = plt.subplots(figsize=(15, 12))
    for i, j, label in zip(a.tolist(), b.tolist(), labels):
        (x0, y0), (x1, y1) = where[ids[i]], where[ids[j]]
        tree = depth[i] != depth[j]
        style = {"color": "#7f8c8d", "lw": 1.4} if tree else {"color": "#d5d8dc", "lw": 0.8}
        axes.plot([x0, x1], [y0, y1], zorder=1, **style)
        if tree:  # the edge that reached the outer concept: labelled nearer to it
            box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}
            t = 0.6 if depth[j] > depth[i] else 0.4
            mid = (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
            axes.text(*mid, _short(label), fontsize=7, color="#515a5a", ha="center", va="center",
                      zorder=2, bbox=box)  # fmt: skip
    for k, concept in enumerate(ids):
        x, y = where[concept]
        level = min(depth[k], len(COLORS) - 1)
        axes.scatter([x], [y], s=SIZES[level], color=COLORS[level], edgecolors="#1b2631", zorder=3)
        box = {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.75}
        font = {"fontsize": 11, "weight": "bold"} if k == 0 else {"fontsize": 9}
        axes.text(x, y, _short(names[k]), ha="center", va="center", zorder=4, bbox=box, **font)
    r = found.resolved
    how = "exact name" if r.how == "exact" else f"nearest to {r.query!r}, cosine {r.score:.2f}"
    more = " (more within reach)" if found.truncated else ""
    axes.set_title(
        f"{r.name} ({how}): {len(found.neighbors)} neighbours within {max(depth)} hops{more}; "
        f"snapshot {found.snapshot}",
        fontsize=12,
    )
    axes.set_aspect("equal")
    axes.axis("off")
    figure.tight_layout()
    return figure
