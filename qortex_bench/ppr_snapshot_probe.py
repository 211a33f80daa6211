"""Resident memory of a loaded snapshot: publish a synthetic graph, load it in a fresh process,
query it.

The probe process loads the snapshot exactly as the retriever does (``snapshot.load``,
arrays memory-mapped), wraps the adjacency in a :class:`SymmetricWalk` without
copying it (from its stored degrees, as the snapshot stage writes them), runs the teleports
through PPR and reports its resident set size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from qortex_bench.bench_graphs import SyntheticGraph
from qortex_core.storage import snapshot as snap
from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotCounts, SnapshotTables
from qortex_core.storage.symmetry import weighted_degree


def publish_synthetic(home: str | Path, graph: SyntheticGraph, dim: int = 384) -> Path:
    """Publish ``graph`` as a snapshot: its graph arrays and node table, every other array and
    table of the schema empty (no vectors, facts, rules or passage text)."""
    adj = graph.adjacency
    n, n_phr = graph.n_nodes, graph.n_phrases
    index_dtype = np.int32 if adj.nnz < np.iinfo(np.int32).max else np.int64
    passage_count = np.bincount(adj[n_phr:, :n_phr].tocoo().col, minlength=n_phr).astype(np.float32)
    no_vectors = np.zeros((0, dim), np.float32)
    arrays = SnapshotArrays(
        adj_indptr=adj.indptr.astype(index_dtype),
        adj_indices=adj.indices.astype(np.int32),
        adj_data=adj.data.astype(np.float32),
        adj_degree=weighted_degree(adj),  # as the snapshot stage stores it
        passage_vectors=no_vectors,
        fact_vectors=no_vectors,
        fact_nodes=np.zeros((0, 2), np.int32),
        phrase_vectors=no_vectors,
        phrase_passage_count=passage_count,
        phrase_text_frequency=passage_count,
        fact_passage_indptr=np.zeros(1, np.int64),
        fact_passage_indices=np.zeros(0, np.int32),
        synonym_pairs=np.zeros((0, 2), np.int32),
        synonym_weights=np.zeros(0, np.float32),
    )
    kinds = ["phrase"] * n_phr + ["passage"] * (n - n_phr)
    strings = pa.array([], pa.string())
    tables = SnapshotTables(
        nodes=pa.table(
            {
                "id": [f"n{i}" for i in range(n)],
                "kind": kinds,
                "name": [f"node {i}" for i in range(n)],
            }
        ),
        passages=pa.table({k: strings for k in ("id", "doc_id", "title", "text", "domain")}),
        facts=pa.table({k: strings for k in ("id", "subject", "predicate", "object")}),
        rules=pa.table({"id": strings, "text": strings}),
    )
    counts = SnapshotCounts(
        phrases=n_phr,
        passages=n - n_phr,
        facts=0,
        rules=0,
        nodes=n,
        edges=graph.n_edges,
        synonym_edges=0,
        contains=int(adj[n_phr:, :n_phr].nnz),
    )
    manifest = {"counts": counts.as_dict(), "embedding_model": "none", "synthetic": True}
    return snap.publish(
        home,
        snap.Snapshot(arrays=arrays.as_dict(), tables=tables.as_dict(), manifest=manifest),
    )


def _status() -> dict[str, float]:
    """VmRSS, VmHWM, RssAnon and RssFile of this process in MB."""
    out = {}
    for line in open("/proc/self/status"):
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


def probe(home: str, teleports_path: str, scores_path: str, tol: float, threads: int = 1) -> dict:
    """In this process: load the latest snapshot under ``home``, run PPR per teleport column, report
    RSS.

    The teleports and the score buffer are allocated before the baseline is taken, so
    ``snapshot_rss_mb`` is what loading the snapshot, wrapping its graph and querying it add
    to an interpreter that has imported qortex. Scores are saved to ``scores_path`` (n, q).
    """
    from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank, symmetric_walk

    teleports = np.load(teleports_path)
    scores = np.ones_like(teleports)  # touched now, so its pages are in the baseline
    before = _status()
    t0 = time.perf_counter()
    loaded = snap.load(home, verify=False)
    after_load = _status()
    arrays = SnapshotArrays.of(loaded)
    background = np.zeros(len(arrays.adj_indptr) - 1, np.float32)
    background[loaded.n_phrases :] = 1.0
    stored = arrays.adj_degree if arrays.adj_degree.size else None  # as the retriever opens
    walk = symmetric_walk(loaded.adjacency, background=background, degree=stored)
    copied = not np.shares_memory(walk.adjacency.indices, arrays.adj_indices)
    config = PPRConfig(tol=tol, threads=threads)
    personalized_pagerank(walk, background, config)
    load_s = time.perf_counter() - t0
    per = []
    for j in range(teleports.shape[1]):
        t = time.perf_counter()
        scores[:, j] = personalized_pagerank(walk, teleports[:, j], config)
        per.append(time.perf_counter() - t)
    after = _status()
    np.save(scores_path, scores)
    return {
        "rss_baseline_mb": before["VmRSS"],
        "rss_after_load_mb": after_load["VmRSS"],
        "rss_after_queries_mb": after["VmRSS"],
        "peak_rss_mb": after["VmHWM"],
        "rss_anon_mb": after["RssAnon"],
        "rss_file_mb": after["RssFile"],
        "tables_anon_mb": round(after_load["RssAnon"] - before["RssAnon"], 1),
        "snapshot_rss_mb": round(after["VmRSS"] - before["VmRSS"], 1),
        "graph_rss_mb": round(after["VmRSS"] - after_load["VmRSS"], 1),
        "adjacency_copied": copied,
        "load_and_prepare_s": round(load_s, 3),
        "p50_ms": round(float(np.percentile(per, 50)) * 1000, 3),
        "p95_ms": round(float(np.percentile(per, 95)) * 1000, 3),
    }


def run_probe(
    home: str | Path, teleports: np.ndarray, tol: float, threads: int = 1
) -> tuple[dict, np.ndarray]:
    """Run :func:`probe` in a fresh Python process; returns its report and its scores."""
    with tempfile.TemporaryDirectory() as tmp:
        tpath, spath = str(Path(tmp) / "teleports.npy"), str(Path(tmp) / "scores.npy")
        np.save(tpath, teleports)
        code = (
            "import json, sys; from qortex_bench.ppr_snapshot_probe import probe; "
            "print(json.dumps(probe(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), "
            "int(sys.argv[5]))))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(home), tpath, spath, repr(tol), str(threads)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"snapshot probe failed: {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout.strip().splitlines()[-1]), np.load(spath)
