"""A vector array kept as segments and a row map reads as the plain array it stands for: every
kind of index a reader uses, products, and the scores of the query path, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_core.query.scoring import cosine, cosine_at
from qortex_core.storage.segmented_rows import SegmentedRows


def _split(seed: int, n: int = 3000, d: int = 16) -> tuple[SegmentedRows, np.ndarray]:
    """A base segment with unused rows, a delta, and a row map mixing them: runs in order
    (as a fact cell keeps), moved rows and delta rows between them."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, d)).astype(np.float32)
    delta = rng.standard_normal((n // 10, d)).astype(np.float32)
    kept = np.sort(rng.choice(n, size=n - n // 5, replace=False))  # a fifth of the base gone
    kept[100:140] = rng.permutation(kept[100:140])  # some moved
    rows = np.insert(kept, rng.integers(0, len(kept), len(delta)), n + np.arange(len(delta)))
    plain = np.concatenate([base, delta])[rows]
    return SegmentedRows([base, delta], rows.astype(np.int32), ["a-1", "a-2"]), plain


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_index_reads_the_plain_arrays_rows(seed):
    split, plain = _split(seed)
    rng = np.random.default_rng(seed + 10)
    assert split.shape == plain.shape and len(split) == len(plain) and split.dtype == plain.dtype
    assert np.array_equal(np.asarray(split), plain)
    for _ in range(200):
        a, b = sorted(rng.integers(0, len(plain) + 5, 2).tolist())
        assert np.array_equal(split[a:b], plain[a:b])
    assert np.array_equal(split[5:900:7], plain[5:900:7])
    assert np.array_equal(split[::-1], plain[::-1])
    at = rng.integers(-len(plain), len(plain), 500)
    assert np.array_equal(split[at], plain[at])
    assert np.array_equal(split[at.reshape(20, 25)], plain[at.reshape(20, 25)])
    mask = rng.random(len(plain)) < 0.3
    assert np.array_equal(split[mask], plain[mask])
    assert np.array_equal(split[7], plain[7]) and np.array_equal(split[-1], plain[-1])
    assert np.array_equal(split[at, 3], plain[at, 3])
    assert np.array_equal(split[11, 2:5], plain[11, 2:5])
    with pytest.raises(IndexError):
        split[len(plain)]


def test_a_run_one_segment_holds_in_order_is_a_view_of_it():
    split, plain = _split(3)
    ordered = np.flatnonzero(np.diff(split.rows) == 1)  # row i and i + 1 in order in a segment
    start = int(ordered[len(ordered) // 2])
    run = split[start : start + 2]
    assert np.shares_memory(run, split.segments[0])
    assert np.array_equal(run, plain[start : start + 2])
    moved = split[100:140]  # permuted: gathered
    assert not np.shares_memory(moved, split.segments[0])
    assert np.array_equal(moved, plain[100:140])


def test_products_and_query_scores_are_the_plain_arrays_bits():
    rng = np.random.default_rng(4)
    split, plain = _split(4, n=200_000, d=8)  # large enough to be split over threads
    query = rng.standard_normal(8).astype(np.float32)
    assert np.array_equal(split @ query, plain @ query)
    assert np.array_equal(cosine(split, query), cosine(plain, query))
    at = rng.integers(0, len(plain), 9000)  # past one gather block
    assert np.array_equal(cosine_at(split, at, query), cosine_at(plain, at, query))


def test_a_row_map_that_does_not_fit_its_segments_is_refused():
    base = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="past its segments"):
        SegmentedRows([base], np.array([0, 4]), ["a"])
    with pytest.raises(ValueError, match="one width"):
        SegmentedRows([base, np.zeros((2, 3), np.float32)], np.array([0]), ["a", "b"])
    with pytest.raises(ValueError, match="integer"):
        SegmentedRows([base], np.array([0.0]), ["a"])
