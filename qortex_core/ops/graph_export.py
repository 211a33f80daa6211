"""The whole graph of a snapshot as a file (GraphML or JSON), and a neighbourhood as a picture.

``qortex graph export`` and ``qortex graph show``. The edge list is read from the snapshot's
CSR adjacency with numpy (each undirected edge once); networkx builds the GraphML document and
the picture's layout, matplotlib draws it. Passages forgotten since the snapshot was built are
left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qortex_core.errors import ConfigError
from qortex_core.query.explore import Explorer
from qortex_core.query.explore_types import Neighborhood

if TYPE_CHECKING:
    import networkx as nx

FORMATS = ("graphml", "json")
PICTURES = (".png", ".svg")


@dataclass(frozen=True)
class EdgeList:
    """Each undirected edge of the graph once: (e,) arrays, ``a < b`` node indices."""

    a: np.ndarray
    b: np.ndarray
    weight: np.ndarray
    kind: list[str]  # fact, synonym, mentions, sequence
    relation: list[str]  # predicates of a fact edge, else the kind


def edge_list(explorer: Explorer, hidden: np.ndarray | None = None) -> EdgeList:
    """The snapshot's edges without those of hidden passages (``hidden``: (n_passages,))."""
    coo = explorer.view.adjacency.tocoo()
    upper = coo.row < coo.col
    a, b = coo.row[upper].astype(np.int64), coo.col[upper].astype(np.int64)
    weight = coo.data[upper].astype(np.float64)
    n = explorer.n
    if hidden is not None and hidden.any():
        gone = np.zeros(explorer.n_nodes, bool)
        gone[n:] = hidden
        keep = ~(gone[a] | gone[b])
        a, b, weight = a[keep], b[keep], weight[keep]
    concepts = (a < n) & (b < n)
    relation = np.array(["mentions"] * a.size, dtype=object)
    relation[(a >= n) & (b >= n)] = "sequence"
    if concepts.any():
        relation[concepts] = explorer.relations(a[concepts], b[concepts])
    kind = [r if r in ("mentions", "sequence", "synonym") else "fact" for r in relation]
    return EdgeList(a, b, weight, kind, [str(r) for r in relation])


def _nodes(explorer: Explorer, hidden: np.ndarray | None) -> list[dict]:
    """Node records: id, kind, name (concepts) or title, time and domain (passages)."""
    view, n = explorer.view, explorer.n
    out: list[dict[str, Any]] = [
        {"id": i, "kind": "concept", "name": name}
        for i, name in zip(view.node_ids[:n], view.node_names[:n])
    ]
    for p in range(view.n_passages):
        if hidden is None or not hidden[p]:
            ref = explorer.passage(p)
            out.append(
                {"id": ref.id, "kind": "passage", "name": ref.title, "time": ref.time or "",
                 "domain": ref.domain, "text": ref.text}
            )  # fmt: skip
    return out


def graph_json(explorer: Explorer, hidden: np.ndarray | None = None) -> dict:
    """The graph as one JSON-ready dict: ``nodes`` and ``edges`` (source and target ids)."""
    edges, ids = edge_list(explorer, hidden), explorer.view.node_ids
    return {
        "snapshot": explorer.view.name,
        "nodes": _nodes(explorer, hidden),
        "edges": [
            {"source": ids[a], "target": ids[b], "weight": round(w, 6), "kind": k, "relation": r}
            for a, b, w, k, r in zip(
                edges.a.tolist(),
                edges.b.tolist(),
                edges.weight.tolist(),
                edges.kind,
                edges.relation,
            )
        ],  # fmt: skip
    }


def to_networkx(document: dict) -> nx.Graph:
    """A :func:`graph_json` document as a networkx graph (node and edge attributes kept)."""
    import networkx as nx

    graph = nx.Graph(snapshot=document["snapshot"])
    graph.add_nodes_from(
        (n["id"], {k: v for k, v in n.items() if k != "id"}) for n in document["nodes"]
    )
    graph.add_edges_from(
        (e["source"], e["target"], {k: v for k, v in e.items() if k not in ("source", "target")})
        for e in document["edges"]
    )
    return graph


def write_graph(
    explorer: Explorer, fmt: str, out: Path | None, hidden: np.ndarray | None = None
) -> str:
    """Write the graph as ``fmt`` to ``out`` (written whole, then renamed into place), or
    return it as text when ``out`` is None.

    Raises:
        ConfigError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown graph format {fmt!r}: use {' or '.join(FORMATS)}")
    document = graph_json(explorer, hidden)
    if fmt == "json":
        text = json.dumps(document, ensure_ascii=False)
    else:
        try:
            import networkx as nx
        except ImportError:
            raise ConfigError("GraphML needs networkx: pip install 'qortex[graph]'") from None
        text = "\n".join(nx.generate_graphml(to_networkx(document)))
    if out is not None:
        staged = out.with_name(out.name + ".partial")
        staged.write_text(text + "\n")
        staged.replace(out)
    return text


def draw_neighborhood(explorer: Explorer, found: Neighborhood, out: Path) -> int:
    """Draw a neighbourhood (the resolved concept in the middle, rings by depth, every edge
    among the shown concepts, fact predicates on the edges) to a PNG or SVG file.

    Returns:
        the number of concepts drawn.

    Raises:
        ConfigError: ``out`` is not .png or .svg, or matplotlib is not installed.
    """
    if out.suffix.lower() not in PICTURES:
        raise ConfigError(f"the picture must be a .png or .svg file, got {out.name}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "qortex graph show needs matplotlib: pip install 'qortex[graph]'"
        ) from None
    from qortex_core.ops.graph_picture import layout_picture

    figure = layout_picture(explorer, found, plt)
    staged = out.with_name(out.name + ".partial" + out.suffix)
    figure.savefig(staged, dpi=150, bbox_inches="tight", format=out.suffix[1:].lower())
    plt.close(figure)
    staged.replace(out)
    return 1 + len(found.neighbors)
