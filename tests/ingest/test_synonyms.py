"""Synonym kNN: the exact pass equals the all-pairs top-k it replaced, bit for bit; the cell
search (used above ``exact_max``) finds the exact pass's edges."""

from __future__ import annotations

import re

import numpy as np
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.synonym_layout import name_keys
from qortex_core.ingest.synonyms import SynonymConfig, eligible_mask, synonym_pairs

_ALNUM = re.compile(r"[^A-Za-z0-9]")


def _all_pairs_reference(vectors, names, config):
    """The all-pairs top-k, a row at a time: each row's k most similar above the threshold, the
    smaller key (id hash) first among equal cosines."""
    eligible = np.array([len(_ALNUM.sub("", s)) >= config.min_chars for s in names], dtype=bool)
    idx = np.flatnonzero(eligible)
    v = np.ascontiguousarray(vectors[idx], dtype=np.float32)
    keys = name_keys(names)[idx]
    k = config.top_k + 1
    rows, cols, weights = [], [], []
    for start in range(0, idx.size, config.block):
        sims = v[start : start + config.block] @ v.T
        np.fill_diagonal(sims[:, start : start + config.block], -1.0)
        for i, line in enumerate(sims):
            cand = np.flatnonzero(line >= config.threshold)
            top = cand[np.lexsort((keys[cand], -line[cand]))][:k]
            rows.append(np.full(top.size, start + i))
            cols.append(top)
            weights.append(line[top])
    r, c, w = np.concatenate(rows), np.concatenate(cols), np.concatenate(weights)
    lo, hi = np.minimum(r, c), np.maximum(r, c)
    _, first = np.unique(lo.astype(np.int64) * idx.size + hi, return_index=True)
    return idx[lo[first]].astype(np.int32), idx[hi[first]].astype(np.int32), w[first]


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors in tight clusters (many pairs above 0.8) with exact duplicates (ties)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n // 20, dim))
    v = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.25, size=(n, dim))
    dup = np.arange(0, n - 1, 7)
    v[dup] = v[dup + 1]  # duplicated rows: cosine ties of 1.0
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_exact_pass_equals_the_all_pairs_reference_bit_for_bit():
    # duplicated vectors tie at the k-th neighbour: the smaller key is kept, whatever the order
    vectors = _clustered(3000, 32, seed=1)
    names = [f"concept {i}" if i % 11 else "ab" for i in range(len(vectors))]  # some too short
    config = SynonymConfig(top_k=5, block=512)  # top-k binds on many rows, across blocks
    got = synonym_pairs(vectors, names, config)
    want = _all_pairs_reference(vectors, names, config)
    assert len(want[0]) > 1000
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert not eligible_mask(["ab", "a-b", "abc"], 3)[:2].any()


def _recall(exact, found) -> tuple[float, int]:
    e = set(zip(exact[0].tolist(), exact[1].tolist()))
    f = set(zip(found[0].tolist(), found[1].tolist()))
    return len(e & f) / len(e), len(f - e)


def test_cell_search_finds_the_exact_edges_of_hash_embedded_concepts():
    passages = SynthCorpus(SynthConfig(passages=500, seed=2)).passages()
    names = sorted({c.name for ex in OfflineExtractor().extract(passages) for c in ex.concepts})
    # near-duplicates as a real corpus has them ("Anan Dunbermis" / "Anan Dunbermis river"):
    # hash-embedded distinct words are nearly orthogonal, so only shared words make a synonym
    suffixes = ("river", "company", "street", "festival")
    names += [f"{n} {suffixes[i % 4]}" for i, n in enumerate(names[::2])]
    vectors = HashEmbedder(HashEmbedderConfig(64)).embed(names)
    every = SynonymConfig(top_k=10**6)  # every pair above the threshold: no top-k ties
    exact = synonym_pairs(vectors, names, every)
    # distinct hash-embedded words are random directions: no cluster structure, the worst case
    # for cells (a real model's vectors reach 0.99 with 2 probes, test_synonyms_minilm.py);
    # names that make the same id are one centroid
    cells = SynonymConfig(top_k=10**6, exact_max=0, cell_size=256, probes=8)
    found = synonym_pairs(vectors, names, cells)
    recall, extra = _recall(exact, found)
    assert len(names) > 2000 and len(exact[0]) > 100
    assert recall >= 0.95 and extra == 0  # a cell pair is a real pair: never an invented edge
    # weights are the same cosines where both find an edge
    at = {(a, b): w for a, b, w in zip(*exact)}
    assert all(abs(at[(a, b)] - w) < 1e-6 for a, b, w in zip(*found) if (a, b) in at)


def test_crowded_cells_are_searched_in_bands_with_the_same_edges(monkeypatch):
    from qortex_core.ingest import synonyms

    vectors = _clustered(1500, 16, seed=4)
    names = [f"concept {i}" for i in range(len(vectors))]
    config = SynonymConfig(top_k=10**6, exact_max=0, cell_size=300)
    whole = synonym_pairs(vectors, names, config)
    monkeypatch.setattr(synonyms, "_BAND_FLOATS", 7 * 300)  # a few rows per band
    banded = synonym_pairs(vectors, names, config)
    assert len(whole[0]) > 1000
    assert np.array_equal(whole[0], banded[0]) and np.array_equal(whole[1], banded[1])
    np.testing.assert_allclose(whole[2], banded[2], atol=1e-6)  # other product shapes
    # every cell pair is a pair of the exact pass with its cosine, and few are missed
    exact = synonym_pairs(vectors, names, SynonymConfig(top_k=10**6))
    at = {(a, b): w for a, b, w in zip(*exact)}
    assert all(abs(at[(a, b)] - w) < 1e-6 for a, b, w in zip(*whole))
    assert len(whole[0]) >= 0.99 * len(exact[0])


def test_pairs_held_past_the_pool_are_cut_to_the_same_top_k(monkeypatch):
    from qortex_core.ingest import synonyms

    rng = np.random.default_rng(6)
    vectors = _clustered(1500, 16, seed=5) + rng.normal(scale=1e-3, size=(1500, 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    names = [f"concept {i}" for i in range(len(vectors))]
    config = SynonymConfig(top_k=3, exact_max=0, cell_size=300)  # top-k binds on most rows
    held = synonym_pairs(vectors, names, config)
    monkeypatch.setattr(synonyms, "_BAND_FLOATS", 7 * 300)
    monkeypatch.setattr(synonyms, "_POOL_PAIRS", 50)  # cut after almost every band
    cut = synonym_pairs(vectors, names, config)
    assert len(held[0]) > 1000
    assert np.array_equal(held[0], cut[0]) and np.array_equal(held[1], cut[1])
    np.testing.assert_allclose(held[2], cut[2], atol=1e-6)  # other product shapes round apart
    every = synonym_pairs(vectors, names, SynonymConfig(top_k=10**6, exact_max=0, cell_size=300))
    assert len(held[0]) < 0.5 * len(every[0])  # the cut did bind


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_a_threshold_that_is_no_cosine_is_refused(threshold):
    with pytest.raises(ValueError, match="not a cosine"):
        SynonymConfig(threshold=threshold)


def _comparisons(monkeypatch, m: int) -> int:
    """Vector-centroid comparisons of the cell search's assignments over m random vectors."""
    from qortex_core.ingest import synonym_layout

    seen = []
    real = synonym_layout.nearest_cells

    def counting(v, centroids, probes):
        seen.append(v.shape[0] * centroids.shape[0])
        return real(v, centroids, probes)

    monkeypatch.setattr(synonym_layout, "nearest_cells", counting)
    rng = np.random.default_rng(m)
    v = rng.normal(size=(m, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    config = SynonymConfig(exact_max=0, cell_size=64, probes=4, flat_max=100, group_rate=8)
    synonym_pairs(v, [f"concept {i}" for i in range(m)], config)
    return sum(seen)


def test_cell_assignment_grows_as_m_to_the_1_5_not_m_squared(monkeypatch):
    # one level compares every vector with each of the m / 16 centroids (4x the vectors: 16x
    # the comparisons); with groups (one centroid in 8) it meets the groups and the centroids
    # listed in its 3 nearest: ~sqrt(m) of them
    small, large = _comparisons(monkeypatch, 4000), _comparisons(monkeypatch, 16000)
    assert large / small < 10
    assert large < 16000 * (16000 / 16) / 2  # under half of one level's comparisons


def test_the_members_of_a_few_cells_are_those_of_every_cell():
    from qortex_core.ingest.synonym_layout import (
        NO_CELL,
        cell_members,
        layout_of,
        some_cell_members,
    )

    v = _clustered(3000, 16, seed=5)
    keys = np.random.default_rng(5).integers(0, 2**62, len(v))
    layout = layout_of(v, keys, SynonymConfig(exact_max=100, cell_size=16, probes=3))
    cells = layout.assign(v)
    cells[::11, -1] = NO_CELL  # padding, as a concept with fewer cells has
    every = cell_members(cells, layout)
    assert len(every) > 50 and sum(m.size for m in every) == (cells != NO_CELL).sum()
    wanted = np.sort(np.random.default_rng(6).choice(len(every), 40, replace=False))
    some = some_cell_members(cells, layout, wanted)
    assert len(some) == 40
    for cell, members in zip(wanted.tolist(), some):
        assert np.array_equal(members, every[cell])


def test_concept_keys_read_from_arrow_bytes_equal_the_python_rule():
    import pyarrow as pa

    from qortex_core.ingest.synonym_layout import concept_keys
    from qortex_core.storage import ids

    names = [ids.concept_id(f"concept {i}") for i in range(500)]
    want = np.array([int(v[2:], 16) >> 1 for v in names], np.int64)  # the id's own digest
    chunked = pa.chunked_array([pa.array(names[:200]), pa.array(names[200:])])
    assert np.array_equal(concept_keys(chunked), want)
    assert np.array_equal(concept_keys(pa.array(names).slice(100, 300)), want[100:400])
    other = [*names[:3], "c_not-a-hex-id", "x"]  # one id of another form: every key digested
    digested = np.array([int(ids.digest(v), 16) >> 1 for v in other], np.int64)
    assert np.array_equal(concept_keys(pa.array(other)), digested)
    assert np.array_equal(concept_keys(other), digested)


def test_eligible_names_count_ascii_letters_and_digits_as_the_regex_does():
    import pyarrow as pa

    names = ["ab", "abc", "a-b-c", "é€ab", "xéééy1", None, "12", "", "Ωmega", "  x y z "]
    reference = [len(_ALNUM.sub("", s or "")) >= 3 for s in names]
    assert eligible_mask(names, 3).tolist() == reference
    assert eligible_mask(pa.array(names, pa.large_string()).slice(2), 3).tolist() == reference[2:]
    chunked = pa.chunked_array([pa.array(names[:4]), pa.array(names[4:])])
    assert eligible_mask(chunked, 3).tolist() == reference
