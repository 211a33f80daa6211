"""The scale ladder's tools: the hashing embedder, the synthetic corpus, the ladder itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from qortex_bench import scale_bench
from qortex_bench.box_speed import WORKLOADS, box_factor, calibrate
from qortex_bench.scale_bench import STAGES, ScaleConfig, requery, run_ladder, synonym_recall
from qortex_bench.scale_report import growth, markdown, n_log_n_exponent
from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig, make_embedder
from qortex_core.errors import ConfigError
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import CONCEPTS, SYNONYMS, LanceStore, vectors_to_arrow

REPO = Path(__file__).resolve().parents[2]


def test_hash_embedder_is_deterministic_unit_and_word_sensitive():
    emb = make_embedder("hash:32")
    assert isinstance(emb, HashEmbedder) and emb.dim == 32 and emb.name == "hash3-32"
    texts = ["Orion Pump service", "orion pump SERVICE", "lunar basalt quarry", ""]
    a = emb.embed(texts)
    b = HashEmbedder(HashEmbedderConfig(32)).embed(texts)  # a fresh instance: same vectors
    assert a.shape == (4, 32) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(a, b)
    assert a[0] @ a[1] == pytest.approx(1.0)  # same words up to case
    assert a[0] @ emb.embed(["Orion Pump"])[0] > 0.5 > a[0] @ a[2]


def test_hash_embedder_gives_distinct_words_nearly_orthogonal_directions():
    # the first version gave each word one of 2 * dim signed columns: 3,000 one-word names
    # fell into 128 vectors, cliques of identical vectors that became synonym edges
    words = [f"{a}{b}{c}" for a in "bdgkmprstv" for b in "aeiou" for c in range(60)]
    v = HashEmbedder(HashEmbedderConfig(64)).embed(words)  # (3000, 64)
    sims = v @ v.T
    np.fill_diagonal(sims, 0.0)
    assert len(words) == 3000 and int((sims >= 0.8).sum()) <= 2  # a rare full collision
    assert float(np.abs(sims).mean()) < 0.15
    two, three = HashEmbedder(HashEmbedderConfig(64)).embed(
        ["Anan Dunbermis", "Anan Dunbermis Trust"]
    )
    assert 0.6 < float(two @ three) < 0.95  # two of three words shared: close, not identical


@pytest.mark.parametrize("spec", ["hash:x", "hash:1", "hash:100000"])
def test_hash_embedder_bad_spec(spec):
    with pytest.raises(ConfigError):
        make_embedder(spec)


def test_synthetic_corpus_is_deterministic_and_sliceable():
    corpus = SynthCorpus(SynthConfig(passages=300, seed=3))
    whole = corpus.passages()
    assert len(whole) == 300 and len({p.id for p in whole}) == 300
    assert corpus.passages(100, 110) == whole[100:110]
    assert SynthCorpus(SynthConfig(passages=300, seed=3)).passage(7) == whole[7]
    assert SynthCorpus(SynthConfig(passages=300, seed=4)).passage(7) != whole[7]
    with pytest.raises(ConfigError):
        SynthConfig(passages=0)


def test_synthetic_corpus_has_zipf_words_and_shared_entities():
    corpus = SynthCorpus(SynthConfig(passages=1500))
    passages = corpus.passages()
    words = [w for p in passages for w in p.text.lower().replace(".", "").split()]
    _, counts = np.unique(words, return_counts=True)
    counts = np.sort(counts)[::-1]
    assert counts[0] > 20 * np.median(counts)  # a heavy head and a long tail
    extractions = OfflineExtractor().extract(passages)
    assert sum(len(e.rules) for e in extractions) > 0
    names = sorted({c.name for e in extractions for c in e.concepts})
    at = {n: i for i, n in enumerate(names)}
    rows, cols = [], []
    for p_index, e in enumerate(extractions):  # bipartite passage-concept graph
        for c in e.concepts:
            rows.append(p_index)
            cols.append(len(passages) + at[c.name])
    n = len(passages) + len(names)
    graph = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    giant = np.bincount(labels[: len(passages)]).max()
    assert giant > 0.9 * len(passages)  # shared entities connect the passages
    per_concept = np.bincount(cols, minlength=n)[len(passages) :]
    assert per_concept.max() > 50 and np.median(per_concept) <= 2  # hubs and a long tail


def test_synthetic_entities_have_qualified_second_names():
    corpus = SynthCorpus(SynthConfig(passages=400))
    names = {c.name for e in OfflineExtractor().extract(corpus.passages()) for c in e.concepts}
    qualified = {n for n in names if n.rsplit(" ", 1)[-1] in ("Company", "River", "Trust", "Park")}
    assert len(qualified) > 0.02 * len(names)
    assert sum(n.rsplit(" ", 1)[0] in names for n in qualified) > 0.5 * len(qualified)
    plain = SynthCorpus(SynthConfig(passages=400, variant_rate=0.0)).passages()
    assert not any(f" {q}" in p.text for p in plain for q in ("Company", "River", "Trust", "Park"))


def test_synthetic_queries_name_entities_of_the_corpus():
    corpus = SynthCorpus(SynthConfig(passages=200))
    titles = {p.title for p in corpus.passages()}
    queries = corpus.queries(5)
    assert len(queries) == 5 and queries == corpus.queries(5)
    assert any(any(t in q for t in titles) for q in queries)


def _row(n, seconds, rss, p50, factor=None):
    stage = {"seconds": seconds, "peak_rss_mb": 100 + rss, "rss_before_mb": 100}
    if factor is not None:
        stage["box"] = {"factor": factor, "calibrated_seconds": seconds / factor}
    modes = {m: {"p50_ms": p50, "p95_ms": p50} for m in ("hipporag", "hipporag_exact", "dense")}
    retr = {"rss_before_open_mb": 50, "rss_after_open_mb": 50 + rss, **modes}
    return {
        "passages": n, "stages": {s: dict(stage) for s in STAGES}, "retriever": retr,
        "snapshot_mb": 1.0,
    }  # fmt: skip


def test_growth_exponents_from_rows():
    (g,) = growth([_row(1000, 1.0, 10, 2.0), _row(10000, 100.0, 100, 2.0)])
    assert g["seconds"]["embeddings"] == 2.0 and g["rss_growth"]["chunks"] == 1.0
    assert g["retriever_rss"] == 1.0 and g["hipporag_p50"] == 0.0
    assert g["calibrated_seconds"]["embeddings"] is None  # no calibration: no calibrated figure


def test_calibrated_exponents_take_out_the_machine_slowing_down():
    # 10x the passages took 12.6x the seconds, but the machine ran 1.26x slower at the larger
    # size: the code's own growth is linear
    rows = [_row(100_000, 10.0, 10, 2.0, factor=1.0), _row(1_000_000, 126.0, 100, 2.0, 1.26)]
    (g,) = growth(rows)
    assert g["seconds"]["extractions"] == 1.1 and g["calibrated_seconds"]["extractions"] == 1.0
    assert g["n_log_n"] == n_log_n_exponent(100_000, 1_000_000) == 1.079
    table = markdown({"sizes": rows, "growth": [g]})
    assert "| 100000 -> 1000000 | 1.079 | 1.1 (1.0) |" in table
    assert "- 1000000: 1.26, 1.26" in table  # the factor of each stage


def test_box_factor_is_the_geometric_mean_of_the_workloads_slowdown():
    ref = {w: 0.1 for w in WORKLOADS}
    assert box_factor(ref, ref) == 1.0
    assert box_factor(ref, {w: 0.2 for w in WORKLOADS}) == 2.0
    one_slow = dict(ref, gemm_s=0.8)  # 8x on one of three workloads: 2x overall
    assert box_factor(ref, one_slow) == 2.0
    assert box_factor(ref, ref, {w: 0.4 for w in WORKLOADS}) == 2.0  # before and after a stage


def _burn(seconds):
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_calibration_reads_a_busy_machine_as_slower():
    import multiprocessing

    idle = calibrate()
    assert set(idle) == set(WORKLOADS) and all(v > 0 for v in idle.values())
    ctx = multiprocessing.get_context("spawn")
    cores = max(os.cpu_count() or 2, 2)  # 4 spinning processes a core: a fifth of a core left
    hogs = [ctx.Process(target=_burn, args=(20.0,)) for _ in range(4 * cores)]
    for h in hogs:
        h.start()
    try:
        import time

        time.sleep(1.0)  # the hogs are running
        busy = calibrate()
    finally:
        for h in hogs:
            h.terminate()
            h.join()
    assert box_factor(idle, busy) > 1.3  # two hogs a core read 1.14 once: too close to call


def test_synonym_recall_counts_the_missing_edges(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(40, 16))
    v = centres[rng.integers(0, 40, 600)] + rng.normal(scale=0.2, size=(600, 16))
    v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    names = [f"concept {i}" for i in range(600)]
    ids_ = [f"c_{i:04d}" for i in range(600)]
    store = LanceStore.open(tmp_path)
    store.replace(CONCEPTS, pa.table({"id": ids_, "name": names, "vector": vectors_to_arrow(v)}))
    a, b, w = synonym_pairs(v, names, SynonymConfig(top_k=10**6))
    keep = np.arange(len(a)) % 2 == 0  # store every other edge
    store.replace(
        SYNONYMS,
        pa.table(
            {"a": [ids_[i] for i in a[keep]], "b": [ids_[i] for i in b[keep]], "weight": w[keep]}
        ),
    )
    check = synonym_recall(store, sample=200)
    assert check["sampled"] == 200 and check["exact_edges"] > 100
    assert 0.35 < check["recall"] < 0.65


def test_cold_ladder_without_root_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(scale_bench, "DROP_CACHES", tmp_path / "no" / "drop_caches")
    with pytest.raises(ConfigError, match="--cold needs root: cannot write .*drop_caches"):
        scale_bench.drop_page_cache()


@pytest.mark.slow
def test_ladder_runs_every_stage_in_its_own_process(tmp_path, monkeypatch):
    drop = tmp_path / "drop_caches"  # the real file needs root; the ladder must write it
    monkeypatch.setattr(scale_bench, "DROP_CACHES", drop)
    config = ScaleConfig(sizes=(150,), workdir=tmp_path, dim=16, queries=3, cold=True)
    report = run_ladder(config)
    assert drop.read_text() == "1\n" and report["cold"] is True
    assert all(s["page_cache_mb_at_start"] > 0 for s in report["sizes"][0]["stages"].values())
    assert "Page cache dropped" in markdown(report)
    (row,) = report["sizes"]
    assert set(row["stages"]) == set(STAGES)
    assert row["stages"]["chunks"]["rows"] == 150 and row["stages"]["chunks"]["generate_s"] > 0
    assert row["stages"]["embeddings"]["passages"] == 150
    loaded, _ = snap.load_latest_good(tmp_path / "n150")
    assert loaded.manifest["embedding_model"] == "hash3-16"
    assert row["counts"]["passages"] == 150 and row["counts"]["phrases"] > 0
    assert all(s["peak_rss_mb"] >= s["rss_before_mb"] > 0 for s in row["stages"].values())
    r = row["retriever"]
    assert r["rss_after_open_mb"] > r["rss_before_open_mb"]
    assert r["hipporag"]["p95_ms"] >= r["hipporag"]["p50_ms"] > 0
    # no fact index at this size: the default and the every-fact scan rank alike
    assert r["fact_index"] is False and r["hipporag_top10_same_as_exact"] == 1.0
    assert row["disk"]["bytes_per_passage_at_384_float32"] > row["disk"]["bytes_per_passage"]
    check = row["stages"]["synonym_edges"]["edge_recall"]
    assert check["sampled"] > 0 and check["recall"] in (None, 1.0)  # exact pass at this size
    assert report["growth"] == [] and "| 150 |" in markdown(report)
    assert set(report["calibration"]) == set(WORKLOADS)
    for figures in row["stages"].values():  # the machine timed between stages
        box = figures["box"]
        assert box["factor"] > 0 and set(box["before"]) == set(box["after"]) == set(WORKLOADS)
        expect = pytest.approx(figures["seconds"] / box["factor"], rel=1e-2, abs=1e-3)
        assert box["calibrated_seconds"] == expect
    timeline = row["stages"]["extractions"]["timeline"]  # [label, done, total, seconds]
    assert timeline[-1][:3] == ["extract", 150, 150]
    assert [t[3] for t in timeline] == sorted(t[3] for t in timeline)
    assert timeline[-1][3] <= row["stages"]["extractions"]["seconds"]
    with pytest.raises(ConfigError):  # the data home of a size must be fresh
        run_ladder(ScaleConfig(sizes=(150,), workdir=tmp_path, dim=16, queries=3))
    again = requery(report, queries=2)  # the retriever timed anew, the stages kept
    (row2,) = again["sizes"]
    assert row2["stages"] == row["stages"] and again["queries_per_mode"] == 2
    assert row2["retriever"]["hipporag"]["p50_ms"] > 0
    assert row2["retriever"]["open_s"] != r["open_s"]  # measured in a new process
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(report | {"workdir": str(tmp_path / "gone")}))
    proc = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "bench", "scale", "--requery", report_file],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and "has no snapshot" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [["--passages", "100,50"], ["--passages", "x"], ["--dim", "1"]])
def test_cli_rejects_bad_ladder_arguments(tmp_path, argv):
    proc = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "bench", "scale", "--workdir", tmp_path, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("qortex: error:") and "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())
