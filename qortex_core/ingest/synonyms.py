"""Synonym edges: top-k nearest neighbours over concept vectors above a cosine threshold.

Two ways to find the pairs, both vectorised (one matrix product per block, no per-pair Python):

- exact (up to ``SynonymConfig.exact_max`` eligible concepts): blocked all-pairs products,
  thresholded before any top-k selection, so a block costs one product and one comparison;
- cells (above it): an inverted-file search in numpy. The cells are a function of the concept
  set (:mod:`.synonym_layout`): about one eligible concept in ``rate`` is a centroid, chosen by
  the hash of its id, and each concept joins its ``probes`` most similar centroids (through a
  second, sparser sample of groups above ``flat_max`` centroids: ``m^1.5``). Pairs are
  searched exactly inside each cell. So the incremental stage, which recomputes only the
  cells a change touched, gets the edges a full build gets. The recall of edges against the
  exact search is measured in tests/ingest/test_synonyms*.py and by ``qortex bench scale``.

Each row keeps its ``top_k + 1`` most similar neighbours; among equal cosines the smaller key
(id hash) wins, so the edges do not depend on the row order either.

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

from qortex_core.ingest.synonym_layout import NO_CELL, Layout, cell_members, layout_of, name_keys
from qortex_core.storage.arrow_access import utf8_buffers

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
        cell_size: target members of a cell (``probes`` cells each concept: one concept in
            ``cell_size / probes`` is a centroid).
        probes: cells each concept joins.
        flat_max: up to this many centroids a concept is compared with every one; above,
            with the centroids listed in its nearest groups.
        group_rate: one centroid in this many is also a group.
        group_lists: groups each centroid is listed in.
        group_probes: groups a concept searches.
    """

    threshold: float = 0.8
    top_k: int = 100
    block: int = 2048
    min_chars: int = 3
    exact_max: int = 20_000
    cell_size: int = 512
    probes: int = 8
    flat_max: int = 4096
    group_rate: int = 64
    group_lists: int = 4
    group_probes: int = 3

    @property
    def rate(self) -> int:
        """One eligible concept in ``rate`` (by the hash of its id) is a centroid."""
        return max(1, self.cell_size // max(self.probes, 1))

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:  # a negative cosine would be a negative edge weight
            raise ValueError(f"synonym threshold {self.threshold} is not a cosine in [0, 1]")


def eligible_mask(names: Sequence[str] | pa.Array | pa.ChunkedArray, min_chars: int) -> np.ndarray:
    """(n,) bool: names with at least ``min_chars`` ASCII letters or digits (counted on the
    UTF-8 bytes: a byte of another character is never one)."""
    arr = (
        pa.array(names, pa.string())
        if not isinstance(names, (pa.Array, pa.ChunkedArray))
        else names
    )
    from qortex_core.ingest.pair_kernels import count_listed

    raw, at = utf8_buffers(arr)
    counts = np.empty(len(at) - 1, np.int64)  # (n,) alphanumeric bytes of each name
    count_listed(raw, at, _ALNUM, counts)  # one pass over the bytes, no per-byte array
    return (counts >= min_chars) & pc.is_valid(arr).to_numpy(zero_copy_only=False)


_ALNUM = np.zeros(256, bool)  # the bytes of ASCII letters and digits
_ALNUM[
    np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
] = True


def _block_pairs(
    v: np.ndarray, start: int, rows: int, k: int, threshold: float, keys: np.ndarray
) -> _Pairs:
    """Directed pairs (i, j, cosine) for rows ``start:start+rows`` of ``v`` against all of it:
    cosine >= threshold, j among i's k most similar (self excluded; ties: smaller key),
    grouped by row."""
    from qortex_core.ingest.pair_kernels import above

    sims = v[start : start + rows] @ v.T  # (rows, d) @ (d, m) -> (rows, m)
    np.fill_diagonal(sims[:, start : start + rows], -1.0)
    r, c, w = above(sims, threshold)  # (hits,), row-major: grouped by row
    r, c, w = top_k_per_row(r, c, w, k, keys)
    return r + start, c, w


def top_k_per_row(
    r: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, keys: np.ndarray | None = None
) -> _Pairs:
    """The pairs whose weight ranks among the ``k`` largest of their row ``r`` (equal weights:
    the smaller ``keys[c]`` first, or the earlier pair without keys), grouped by row."""
    counts = np.bincount(r) if len(r) else np.zeros(0, np.int64)
    if len(r) == 0 or counts.max() <= k:
        return r, c, w
    tie = np.arange(len(r)) if keys is None else keys[c]
    order = np.lexsort((tie, -w, r))  # by row, then by weight descending, then by key
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


def _exact_pairs(v: np.ndarray, config: SynonymConfig, keys: np.ndarray) -> _Pairs:
    """Blocked all-pairs search over ``v`` (m, d); directed pairs."""
    m = v.shape[0]
    k = config.top_k + 1
    rows = max(1, min(config.block, (1 << 26) // max(m, 1)))  # <= 256 MB of similarities
    parts = [_block_pairs(v, s, rows, k, config.threshold, keys) for s in range(0, m, rows)]
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


def _distinct_top_k(parts: list[_Pairs], m: int, k: int, keys: np.ndarray) -> _Pairs:
    """Directed pairs of ``parts`` once each (a pair found in several shared cells), cut to
    each row's top ``k``; ``k`` of the union is ``k`` of the parts' own top-``k`` unions."""
    r, c, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
    key = r.astype(np.int64) * m + c
    _, first = np.unique(key, return_index=True)
    return top_k_per_row(r[first], c[first], w[first], k, keys)


def _cell_pairs(
    v: np.ndarray, config: SynonymConfig, keys: np.ndarray, members: list[np.ndarray]
) -> _Pairs:
    """Inverted-file search: exact pairs inside each cell; directed pairs, top-k per row."""
    m = v.shape[0]
    k = config.top_k + 1
    parts: list[_Pairs] = []
    held = 0
    for ix in members:  # (size,) members of one cell
        if ix.size < 2:
            continue
        for r, c, w in _cell_band_pairs(v[ix], config.threshold):  # (hits,) each, r < c
            if r.size == 0:  # most bands: nothing to hold or concatenate later
                continue
            a, b = ix[r], ix[c]  # both directions: each row's top-k is cut below
            parts.append((np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([w, w])))
            held += 2 * len(r)
            if held > _POOL_PAIRS:  # crowded cells (near-duplicate names): bound what is held
                parts = [_distinct_top_k(parts, m, k, keys)]
                held = len(parts[0][0])
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
    return _distinct_top_k(parts, m, k, keys)


@dataclass(frozen=True)
class SynonymSearch:
    """What a full search found.

    Attributes:
        rows, cols, weights: the pairs (i < j, int32) and their cosines (float32), each once.
        cells: (n, probes) keys of each concept's cells (``NO_CELL``: none, or an exact search).
        layout: the cells' centroids (kind ``exact`` below ``exact_max``).
    """

    rows: np.ndarray
    cols: np.ndarray
    weights: np.ndarray
    cells: np.ndarray
    layout: Layout


def synonym_search(
    vectors: np.ndarray,
    names: Sequence[str] | pa.Array | pa.ChunkedArray,
    config: SynonymConfig,
    keys: np.ndarray,
) -> SynonymSearch:
    """The synonym pairs of every concept, and each concept's cells.

    Args:
        vectors: (n, d) unit vectors, one per concept.
        names: the n concept names (short ones are skipped).
        config: threshold, top-k, and when to search by cells rather than exactly.
        keys: (n,) the concepts' keys (``synonym_layout.concept_keys`` of their ids).
    """
    n = vectors.shape[0]
    idx = np.flatnonzero(eligible_mask(names, config.min_chars)) if n else np.zeros(0, np.int64)
    v = np.ascontiguousarray(vectors[idx], dtype=np.float32)  # (m, d)
    layout = layout_of(v, keys[idx], config)
    cells = np.full((n, layout.probes), NO_CELL, np.int64)
    none = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))
    if idx.size < 2 or config.top_k <= 0:
        return SynonymSearch(*none, cells, layout)
    if not layout.keys.size:
        pairs = _exact_pairs(v, config, keys[idx])
    else:
        from threadpoolctl import threadpool_limits

        cells[idx] = layout.assign(v)
        # a cell's bands are small products: BLAS threads spin more than they help there
        # (53k concepts on 2 busy cores: 0.9-2.1 s with one thread, 14-17 s with two)
        with threadpool_limits(limits=1, user_api="blas"):
            pairs = _cell_pairs(v, config, keys[idx], cell_members(cells[idx], layout))
    lo, hi, w = _undirected(*pairs, idx.size)
    return SynonymSearch(idx[lo].astype(np.int32), idx[hi].astype(np.int32), w, cells, layout)


def synonym_pairs(
    vectors: np.ndarray,
    names: Sequence[str] | pa.Array | pa.ChunkedArray,
    config: SynonymConfig = SynonymConfig(),
    keys: np.ndarray | None = None,
) -> _Pairs:
    """Pairs (i, j, cosine) with i < j, cosine >= threshold, j among i's top-k.

    Args:
        vectors: (n, d) unit vectors, one per concept.
        names: the n concept names (short ones are skipped).
        config: threshold, top-k, and when to search by cells rather than exactly.
        keys: (n,) the concepts' keys; by default those of the ids the names make.

    Returns:
        rows, cols (int32) and weights (float32), each pair once.
    """
    found = synonym_search(vectors, names, config, name_keys(names) if keys is None else keys)
    return found.rows, found.cols, found.weights
