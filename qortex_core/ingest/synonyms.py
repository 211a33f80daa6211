"""Synonym edges: blocked top-k nearest neighbours over concept vectors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_ALNUM = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class SynonymConfig:
    """Synonym edges join concepts whose cosine is at least ``threshold``.

    Attributes:
        threshold: minimum cosine similarity (HippoRAG 2: 0.8).
        top_k: at most this many neighbours per concept.
        block: rows per matrix block (bounds memory to block x n floats).
        min_chars: concepts with fewer alphanumeric characters get no synonyms.
    """

    threshold: float = 0.8
    top_k: int = 100
    block: int = 2048
    min_chars: int = 3


def synonym_pairs(
    vectors: np.ndarray, names: Sequence[str], config: SynonymConfig = SynonymConfig()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i, j, cosine) with i < j, cosine >= threshold, j among i's top-k.

    Args:
        vectors: (n, d) unit vectors, one per concept.
        names: the n concept names (short ones are skipped).

    Returns:
        rows, cols (int32) and weights (float32), each pair once.
    """
    n = vectors.shape[0]
    empty = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))
    if n < 2 or config.top_k <= 0:
        return empty
    eligible = np.array([len(_ALNUM.sub("", s)) >= config.min_chars for s in names], dtype=bool)
    idx = np.flatnonzero(eligible)
    if idx.size < 2:
        return empty
    v = np.ascontiguousarray(vectors[idx], dtype=np.float32)
    k = min(config.top_k + 1, idx.size)
    rows, cols, weights = [], [], []
    for start in range(0, idx.size, config.block):
        sims = v[start : start + config.block] @ v.T  # (block, d) @ (d, m) -> (block, m)
        np.fill_diagonal(sims[:, start : start + config.block], -1.0)
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]  # (block, k)
        top_sims = np.take_along_axis(sims, top, axis=1)
        r, c = np.nonzero(top_sims >= config.threshold)
        rows.append(r + start)
        cols.append(top[r, c])
        weights.append(top_sims[r, c])
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    w = np.concatenate(weights).astype(np.float32)
    lo, hi = np.minimum(r, c), np.maximum(r, c)
    key = lo.astype(np.int64) * idx.size + hi
    _, first = np.unique(key, return_index=True)
    return idx[lo[first]].astype(np.int32), idx[hi[first]].astype(np.int32), w[first]
