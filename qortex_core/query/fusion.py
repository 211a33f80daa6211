"""Hybrid retrieval: dense and graph passage scores fused.

``auto``'s routing, which reads :class:`FusionConfig`'s threshold, is in :mod:`.modes.auto`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query.scoring import min_max, top_indices


@dataclass(frozen=True)
class FusionConfig:
    """Attributes:
    dense_weight: weight of the min-max dense score (the graph gets 1 - this).
    agreement_k: top-k sets compared for the confidence.
    graph_threshold: ``auto`` walks the graph alone when the best linked fact reaches this cosine.
    """

    dense_weight: float = 0.5
    agreement_k: int = 10
    graph_threshold: float = 0.5


def fuse(
    dense: np.ndarray, graph: np.ndarray, config: FusionConfig = FusionConfig()
) -> tuple[np.ndarray, float]:
    """Normalised-score fusion of (n,) dense and graph scores, and a confidence in [0, 1].

    The confidence is the overlap of the two top-k sets: 1 when dense retrieval and
    the walk agree on the best passages, 0 when they share none.
    """
    dense, graph = np.asarray(dense, dtype=np.float32), np.asarray(graph, dtype=np.float32)
    fused = config.dense_weight * min_max(dense) + (1.0 - config.dense_weight) * min_max(graph)
    k = min(config.agreement_k, dense.size)
    agree = set(top_indices(dense, k).tolist()) & set(top_indices(graph, k).tolist())
    confidence = len(agree) / k if k else 0.0
    return fused.astype(np.float32), float(confidence)
