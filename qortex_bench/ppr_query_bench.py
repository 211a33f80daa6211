"""End-to-end query latency over a real snapshot, split into steps, and recall of fast vs exact PPR.

Timing lives here, outside retrieval: the end-to-end figure is ``Retriever.query``
itself, and the split calls the retriever's steps (``cosine``, ``Retriever.seed``,
``personalized_pagerank``) from outside in the order ``search`` does.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_bench.datasets import Question, recall_at_k
from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank, walk_matrix
from qortex_core.query.retriever import Retriever
from qortex_core.query.scoring import cosine, top_indices

STEPS = ("embed_ms", "seed_ms", "ppr_ms", "assembly_ms", "end_to_end_ms")


@dataclass(frozen=True)
class Teleport:
    """What seeding produced for one query: the dense scores and, when the walk runs, its
    teleport."""

    dense: np.ndarray
    teleport: np.ndarray | None


def seed(retriever: Retriever, text: str, vector: np.ndarray) -> Teleport:
    """The retriever's own seeding (``Retriever.seed``); ``teleport`` None -> dense fallback."""
    dense = cosine(retriever.passage_vectors, vector)
    if retriever.fact_vectors.shape[0] == 0:
        return Teleport(dense, None)
    return Teleport(dense, retriever.seed(text, vector, dense).teleport)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def time_query(retriever: Retriever, text: str, mode: str, top_k: int) -> dict[str, float]:
    """One query: end to end through ``Retriever.query``, then each step timed on its own."""
    t = time.perf_counter()
    retriever.query(text, top_k=top_k, mode=mode)
    e2e = _ms(t)
    t = time.perf_counter()
    vector = retriever.embedder.embed([text])[0]
    embed = _ms(t)
    t = time.perf_counter()
    if mode == "dense":
        top_indices(cosine(retriever.passage_vectors, vector), top_k)
        seeded = None
    else:
        seeded = seed(retriever, text, vector)
    seed_ms = _ms(t)
    ppr = 0.0
    if seeded is not None and seeded.teleport is not None:
        t = time.perf_counter()
        personalized_pagerank(retriever.walk, seeded.teleport, retriever.config.ppr)
        ppr = _ms(t)
    return {
        "embed_ms": embed,
        "seed_ms": seed_ms,
        "ppr_ms": ppr,
        "assembly_ms": max(0.0, e2e - embed - seed_ms - ppr),
        "end_to_end_ms": e2e,
    }


def latency(
    retriever: Retriever,
    texts: Sequence[str],
    modes: Sequence[str],
    top_k: int = 10,
    warmup: int = 2,
) -> dict[str, dict[str, float]]:
    """p50/p95 of every step per mode over ``texts``."""
    out: dict[str, dict[str, float]] = {}
    for mode in modes:
        for text in texts[:warmup]:
            retriever.query(text, top_k=top_k, mode=mode)
        rows = [time_query(retriever, text, mode, top_k) for text in texts]
        stats: dict[str, float] = {"queries": len(rows)}
        for step in STEPS:
            values = np.array([r[step] for r in rows])
            stats[step.replace("_ms", "_p50_ms")] = round(float(np.percentile(values, 50)), 3)
            stats[step.replace("_ms", "_p95_ms")] = round(float(np.percentile(values, 95)), 3)
        out[mode] = stats
    return out


def exact_retriever(retriever: Retriever, tol: float = 1e-10) -> Retriever:
    """A copy of ``retriever`` whose PPR is float64 power iteration to an L1 change of ``tol``."""
    exact = copy.copy(retriever)
    exact.walk = walk_matrix(retriever.adjacency).astype(
        np.float64
    )  # float64 walk -> float64 iterates
    exact.config = dataclasses.replace(
        retriever.config, ppr=PPRConfig(retriever.config.ppr.damping, tol, 10_000)
    )
    return exact


def recall_fast_vs_exact(
    retriever: Retriever,
    questions: Sequence[Question],
    ks: Sequence[int] = (2, 5),
    exact_tol: float = 1e-10,
) -> dict:
    """Recall@k of ``Retriever.search`` (hipporag) with its own PPR and with exact PPR
    (``exact_tol``).

    Also the largest L1 distance between the two PPR vectors over the questions' teleports.
    """
    vectors = retriever.embedder.embed([q.text for q in questions])
    exact = exact_retriever(retriever, exact_tol)
    top = max(ks)
    rankings: dict[str, list[list[str]]] = {"fast": [], "exact": []}
    l1 = []
    for q, v in zip(questions, vectors):
        for name, r in (("fast", retriever), ("exact", exact)):
            rankings[name].append(
                [h.id for h in r.search(q.text, v, top_k=top, mode="hipporag").passages]
            )
        seeded = seed(retriever, q.text, v)
        if seeded.teleport is not None:
            fast = personalized_pagerank(retriever.walk, seeded.teleport, retriever.config.ppr)
            slow = personalized_pagerank(exact.walk, seeded.teleport, exact.config.ppr)
            l1.append(float(np.abs(fast - slow).sum()))
    out: dict = {
        name: {
            f"recall@{k}": round(
                100 * float(np.mean([recall_at_k(r, q.gold, k) for r, q in zip(rank, questions)])),
                2,
            )
            for k in ks
        }
        for name, rank in rankings.items()
    }
    out["delta_points"] = {
        f"recall@{k}": round(out["fast"][f"recall@{k}"] - out["exact"][f"recall@{k}"], 2)
        for k in ks
    }
    out["ppr_l1_error_max"] = max(l1, default=0.0)
    out["same_top5"] = float(
        np.mean([a[:5] == b[:5] for a, b in zip(rankings["fast"], rankings["exact"])])
    )
    return out
