"""End-to-end query latency over a real snapshot, split into steps, and recall of fast vs exact PPR.

Timing lives here, outside retrieval: the end-to-end figure is ``Retriever.query``
itself, and the split calls the retriever's step functions (``cosine``,
``top_indices``, ``phrase_seed_weights``, ``teleport_vector``,
``personalized_pagerank``) from outside in the order ``search`` does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from qortex_core.evaluate import Question, recall_at_k
from qortex_core.ppr import personalized_pagerank
from qortex_core.ppr_bench import exact_pagerank
from qortex_core.retrieve import Retriever, cosine, min_max, phrase_seed_weights, teleport_vector, top_indices

STEPS = ("embed_ms", "seed_ms", "ppr_ms", "assembly_ms", "end_to_end_ms")


@dataclass(frozen=True)
class Teleport:
    """What seeding produced for one query: the dense scores and, when the walk runs, its teleport."""

    dense: np.ndarray
    teleport: np.ndarray | None


def seed(retriever: Retriever, vector: np.ndarray) -> Teleport:
    """HippoRAG 2 seeding with the retriever's step functions (``teleport`` None -> dense fallback)."""
    cfg = retriever.config
    dense = cosine(retriever.passage_vectors, vector)
    if retriever.fact_vectors.shape[0] == 0:
        return Teleport(dense, None)
    fact_scores = cosine(retriever.fact_vectors, vector)
    linked = top_indices(fact_scores, cfg.fact_top_k)
    linked = linked[fact_scores[linked] >= cfg.fact_threshold]
    if linked.size == 0:
        return Teleport(dense, None)
    phrase_w = phrase_seed_weights(linked, min_max(fact_scores)[linked], retriever.fact_nodes,
                                   retriever.passage_count, cfg.specificity)
    return Teleport(dense, teleport_vector(phrase_w, dense, cfg.passage_node_weight))


def ranking(retriever: Retriever, seeded: Teleport, scores: np.ndarray | None, top_k: int) -> list[str]:
    """Passage ids ranked by PPR scores (dense scores when the walk did not run)."""
    passage_scores = seeded.dense if scores is None else scores[retriever.n_phrases:]
    return [retriever.passages[i]["id"] for i in top_indices(passage_scores, top_k).tolist()]


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
        seeded = seed(retriever, vector)
    seed_ms = _ms(t)
    ppr = 0.0
    if seeded is not None and seeded.teleport is not None:
        t = time.perf_counter()
        personalized_pagerank(retriever.walk, seeded.teleport, retriever.config.ppr)
        ppr = _ms(t)
    return {"embed_ms": embed, "seed_ms": seed_ms, "ppr_ms": ppr,
            "assembly_ms": max(0.0, e2e - embed - seed_ms - ppr), "end_to_end_ms": e2e}


def latency(retriever: Retriever, texts: Sequence[str], modes: Sequence[str], top_k: int = 10,
            warmup: int = 2) -> dict[str, dict[str, float]]:
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


def recall_fast_vs_exact(retriever: Retriever, questions: Sequence[Question], ks: Sequence[int] = (2, 5),
                         exact_tol: float = 1e-10) -> dict:
    """Recall@k of hipporag rankings with the retriever's PPR and with exact (float64, ``exact_tol``) PPR.

    Also reports how often this module's ranking with the fast PPR equals ``Retriever.search``'s
    own (a check that the mirror of the search path is faithful).
    """
    vectors = retriever.embedder.embed([q.text for q in questions])
    top = max(ks)
    solvers: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "fast": lambda t: personalized_pagerank(retriever.walk, t, retriever.config.ppr),
        "exact": lambda t: exact_pagerank(retriever.adjacency, t[:, None], retriever.config.ppr.damping,
                                          tol=exact_tol)[:, 0],
    }
    rankings: dict[str, list[list[str]]] = {name: [] for name in solvers}
    same, l1 = 0, []
    for q, v in zip(questions, vectors):
        seeded = seed(retriever, v)
        scores = {name: None if seeded.teleport is None else solve(seeded.teleport) for name, solve in solvers.items()}
        for name in solvers:
            rankings[name].append(ranking(retriever, seeded, scores[name], top))
        if seeded.teleport is not None:
            l1.append(float(np.abs(scores["fast"] - scores["exact"]).sum()))
        same += rankings["fast"][-1] == [h.id for h in retriever.search(q.text, v, top_k=top).passages]
    out = {name: {f"recall@{k}": round(100 * float(np.mean([recall_at_k(r, q.gold, k) for r, q in zip(rank, questions)])), 2)
                  for k in ks} for name, rank in rankings.items()}
    out["delta_points"] = {f"recall@{k}": round(out["fast"][f"recall@{k}"] - out["exact"][f"recall@{k}"], 2) for k in ks}
    out["ppr_l1_error_max"] = max(l1, default=0.0)
    out["mirror_matches_retriever"] = same / max(len(questions), 1)
    return out
