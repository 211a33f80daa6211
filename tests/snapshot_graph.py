"""The graph a snapshot holds, as plain sets keyed by content ids, for comparing two snapshots
built by different runs (sharded or not, other processes): node order, table versions and
timestamps may differ, the graph must not."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qortex_core.storage import snapshot as snap


def snapshot_graph(home: str | Path) -> dict[str, object]:
    """Node, passage, fact and rule ids and the weighted edges (by node id) of the latest
    snapshot under ``home``; weights rounded to 4 decimals (float32 sums in another order)."""
    s = snap.load(home)
    node_ids = s.tables["nodes"]["id"].to_pylist()
    adj = s.adjacency.tocoo()  # (n_nodes, n_nodes), symmetric
    edges = {
        (node_ids[i], node_ids[j], round(float(w), 4))
        for i, j, w in zip(adj.row.tolist(), adj.col.tolist(), adj.data.tolist())
    }
    return {
        "nodes": sorted(node_ids),
        "passages": sorted(s.tables["passages"]["id"].to_pylist()),
        "facts": sorted(s.tables["facts"]["id"].to_pylist()),
        "rules": sorted(s.tables["rules"]["id"].to_pylist()),
        "edges": edges,
        "edge_count": int(adj.nnz),
        "counts": s.manifest["counts"],
        "weight_sum": round(float(np.sum(s.arrays["adj_data"], dtype=np.float64)), 3),
    }
