"""Synonym edges: top-k nearest neighbours over concept vectors above a cosine threshold.

Two ways to find the pairs, both vectorised (one matrix product per block, no per-pair Python):

- exact (up to ``SynonymConfig.exact_max`` eligible concepts): blocked all-pairs products,
  thresholded before any top-k selection, so a block costs one product and one comparison;
- cells (above it): an inverted-file search in numpy, on two levels. Spherical k-means puts the
  vectors into about ``sqrt(m / (cell_size * group_probes))`` groups, each vector joining its
  ``group_probes`` most similar; k-means inside each group makes cells of about ``cell_size``,
  each member joining its ``probes`` most similar; pairs are searched exactly inside each cell.
  A vector meets ~``sqrt(m)`` centroids, where one level of fixed-size cells would meet
  ``m / cell_size`` of them: the assignment is ``m^1.5``, not quadratic in the corpus.
  Two close vectors (cosine >= 0.8) usually share a cell; the recall of edges against the exact
  search is measured in tests/ingest/test_synonyms*.py and by ``qortex bench scale``.

The pairs are found here rather than by LanceDB's ANN index used as a kNN join (one batched
multi-vector search per block of concepts), because that join was slower than the exact blocked
pass on a 10k-passage corpus's concepts. Why the cells have two levels, and the recall they keep
on the scale ladder's hash vectors and on language-model vectors: docs/scale.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.cells import members_of, nearest_cells, spherical_kmeans

_Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]
_BAND_FLOATS = 1 << 18  # similarities of one band of rows inside a cell (1 MB: in cache)
_POOL_PAIRS = 1 << 24  # directed pairs held before they are cut to each row's top-k


@dataclass(frozen=True)
class SynonymConfig:
    """Synonym edges join concepts whose cosine is at least ``threshold``.

    Attributes:
        threshold: minimum cosine similarity (HippoRAG 2: 0.8).
        top_k: at most this many neighbours per concept.
        block: rows per matrix block (bounds memory to block x n floats).
        min_chars: concepts with fewer alphanumeric characters get no synonyms.
        exact_max: up to this many eligible concepts the search is exact; above, by cells.
        cell_size: target vectors whose home is one cell of the two-level cell search.
        group_probes: groups each vector joins (more: better recall, more work).
        probes: cells each vector joins inside each of its groups.
        seed: k-means sample and initialisation seed.
    """

    threshold: float = 0.8
    top_k: int = 100
    block: int = 2048
    min_chars: int = 3
    exact_max: int = 20_000
    cell_size: int = 256
    group_probes: int = 3
    probes: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:  # a negative cosine would be a negative edge weight
            raise ValueError(f"synonym threshold {self.threshold} is not a cosine in [0, 1]")


def eligible_mask(names: Sequence[str] | pa.Array | pa.ChunkedArray, min_chars: int) -> np.ndarray:
    """(n,) bool: names with at least ``min_chars`` ASCII letters or digits."""
    arr = (
        pa.array(names, pa.string())
        if not isinstance(names, (pa.Array, pa.ChunkedArray))
        else names
    )
    alnum = pc.replace_substring_regex(arr, pattern="[^A-Za-z0-9]", replacement="")
    return pc.greater_equal(pc.utf8_length(alnum), min_chars).to_numpy(zero_copy_only=False)


def _block_pairs(v: np.ndarray, start: int, rows: int, k: int, threshold: float) -> _Pairs:
    """Directed pairs (i, j, cosine) for rows ``start:start+rows`` of ``v`` against all of it:
    cosine >= threshold, j among i's k most similar (self excluded), grouped by row.

    Rows with more than k candidates take the same ``argpartition`` pick as a full top-k pass
    (ties at the k-th value included), so the result equals it bit for bit."""
    from qortex_core.ingest.pair_kernels import above

    sims = v[start : start + rows] @ v.T  # (rows, d) @ (d, m) -> (rows, m)
    np.fill_diagonal(sims[:, start : start + rows], -1.0)
    r, c, w = above(sims, threshold)  # (hits,), row-major: grouped by row
    counts = np.bincount(r, minlength=sims.shape[0])  # (rows,)
    over = np.flatnonzero(counts > k)
    if over.size == 0:
        return r + start, c, w
    top = np.argpartition(-sims[over], k - 1, axis=1)[:, :k]  # (over, k)
    top_sims = np.take_along_axis(sims[over], top, axis=1)
    orr, occ = np.nonzero(top_sims >= threshold)
    keep = ~np.isin(r, over)
    r = np.concatenate([r[keep], over[orr]])
    c = np.concatenate([c[keep], top[orr, occ]])
    order = np.argsort(r, kind="stable")  # grouped by row again
    r, c = r[order], c[order]
    return r + start, c, sims[r, c]


def top_k_per_row(r: np.ndarray, c: np.ndarray, w: np.ndarray, k: int) -> _Pairs:
    """The pairs whose weight ranks among the ``k`` largest of their row ``r``."""
    counts = np.bincount(r) if len(r) else np.zeros(0, np.int64)
    if len(r) == 0 or counts.max() <= k:
        return r, c, w
    order = np.lexsort((-w, r))  # by row, then by weight descending
    r, c, w = r[order], c[order], w[order]
    first = np.searchsorted(r, r, side="left")  # (hits,) index of the row's first pair
    keep = (np.arange(len(r)) - first) < k
    return r[keep], c[keep], w[keep]


def _undirected(r: np.ndarray, c: np.ndarray, w: np.ndarray, m: int) -> _Pairs:
    """Each directed pair once as (lo, hi): the first occurrence's weight."""
    lo, hi = np.minimum(r, c), np.maximum(r, c)
    key = lo.astype(np.int64) * m + hi
    _, first = np.unique(key, return_index=True)
    return lo[first], hi[first], w[first].astype(np.float32)


def _exact_pairs(v: np.ndarray, config: SynonymConfig) -> _Pairs:
    """Blocked all-pairs search over ``v`` (m, d); directed pairs."""
    m = v.shape[0]
    k = min(config.top_k + 1, m)
    rows = max(1, min(config.block, (1 << 26) // max(m, 1)))  # <= 256 MB of similarities
    parts = [_block_pairs(v, s, rows, k, config.threshold) for s in range(0, m, rows)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]


def _cell_band_pairs(members: np.ndarray, threshold: float) -> Iterator[_Pairs]:
    """Pairs (i < j) of one cell's (size, d) member vectors with cosine >= threshold, a band of
    rows at a time.

    Bands of rows meet only the columns from their own first row on, so each pair is computed
    once (half the products of the full square) and a band's similarities stay in cache for the
    scan. The columns are a transposed copy: ``members @ members.T`` takes numpy's symmetric
    (syrk) path, 6x slower here (20.3 vs 3.3 ms a 2,048-vector cell)."""
    from qortex_core.ingest.pair_kernels import above

    size = members.shape[0]
    cols = np.ascontiguousarray(members.T)  # (d, size)
    band = max(1, min(size, _BAND_FLOATS // max(size, 1)))
    for s in range(0, size - 1, band):
        sims = members[s : s + band] @ cols[:, s:]  # (band, d) @ (d, size - s)
        r, c, w = above(sims, threshold, upper=True)  # (hits,) each: c > r, row-major
        yield r + s, c + s, w


def _distinct_top_k(parts: list[_Pairs], m: int, k: int) -> _Pairs:
    """Directed pairs of ``parts`` once each (a pair found in several shared cells), cut to
    each row's top ``k``; ``k`` of the union is ``k`` of the parts' own top-``k`` unions."""
    r, c, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
    key = r.astype(np.int64) * m + c
    _, first = np.unique(key, return_index=True)
    return top_k_per_row(r[first], c[first], w[first], k)


def _cells(v: np.ndarray, config: SynonymConfig) -> Iterator[np.ndarray]:
    """The members of each cell of the two-level search, as rows of ``v``.

    About ``sqrt(m / (cell_size * group_probes))`` groups by spherical k-means, each vector in
    its ``group_probes`` most similar; inside each group, cells of about ``cell_size`` members'
    homes by k-means over the group, each member in its ``probes`` most similar. Comparisons:
    ``m`` x groups, and each group's members x its cells: both ``m^1.5``, where one level of
    cells of a fixed size (the search before) compared every vector with ``m / cell_size``
    centroids."""
    m = v.shape[0]
    groups = max(1, int(np.ceil(np.sqrt(m / (config.cell_size * config.group_probes)))))
    coarse = spherical_kmeans(v, groups, config.seed, exact=True)  # (groups, d)
    near = nearest_cells(v, coarse, min(config.group_probes, groups))  # (m, group_probes)
    for g, rows in enumerate(members_of(near, groups)):
        if rows.size < 2:
            continue
        sub = v[rows]  # (size, d)
        fine = max(1, rows.size // config.cell_size)
        centroids = spherical_kmeans(sub, fine, config.seed + 1 + g, exact=True)  # (fine, d)
        for ix in members_of(nearest_cells(sub, centroids, min(config.probes, fine)), fine):
            yield rows[ix]


def _cell_pairs(v: np.ndarray, config: SynonymConfig) -> _Pairs:
    """Inverted-file search: exact pairs inside each cell; directed pairs, top-k per row."""
    m = v.shape[0]
    k = min(config.top_k + 1, m)
    parts: list[_Pairs] = []
    held = 0
    for ix in _cells(v, config):  # (size,) members of one cell
        for r, c, w in _cell_band_pairs(v[ix], config.threshold):  # (hits,) each, r < c
            if r.size == 0:  # most bands: nothing to hold or concatenate later
                continue
            a, b = ix[r], ix[c]  # both directions: each row's top-k is cut below
            parts.append((np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([w, w])))
            held += 2 * len(r)
            if held > _POOL_PAIRS:  # crowded cells (near-duplicate names): bound what is held
                parts = [_distinct_top_k(parts, m, k)]
                held = len(parts[0][0])
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
    return _distinct_top_k(parts, m, k)


def synonym_pairs(
    vectors: np.ndarray,
    names: Sequence[str] | pa.Array | pa.ChunkedArray,
    config: SynonymConfig = SynonymConfig(),
) -> _Pairs:
    """Pairs (i, j, cosine) with i < j, cosine >= threshold, j among i's top-k.

    Args:
        vectors: (n, d) unit vectors, one per concept.
        names: the n concept names (short ones are skipped).
        config: threshold, top-k, and when to search by cells rather than exactly.

    Returns:
        rows, cols (int32) and weights (float32), each pair once.
    """
    n = vectors.shape[0]
    empty = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))
    if n < 2 or config.top_k <= 0:
        return empty
    idx = np.flatnonzero(eligible_mask(names, config.min_chars))
    if idx.size < 2:
        return empty
    v = np.ascontiguousarray(vectors[idx], dtype=np.float32)  # (m, d)
    search = _exact_pairs if idx.size <= config.exact_max else _cell_pairs
    lo, hi, w = _undirected(*search(v, config), idx.size)
    return idx[lo].astype(np.int32), idx[hi].astype(np.int32), w
