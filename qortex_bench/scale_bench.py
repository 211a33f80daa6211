"""The scale ladder: every ingestion stage and the retriever on synthetic corpora of growing size.

For each size the stages of ``qortex_core/ingest/stages.py`` run one by one, each in a fresh
spawned process so its peak RSS (``ru_maxrss``) is its own: sync chunks (the synthetic passages
are generated in that process before its clock starts: ``generate_s``), extract
(offline extractor), embed (``HashEmbedder``: a benchmark tool, so model time does not hide the
pipeline), synonyms, snapshot. Then a fresh process opens the retriever (RSS before and after)
and times queries in ``hipporag`` and ``dense`` mode. Between stages the parent times a fixed
workload (:mod:`.box_speed`), so each stage also carries seconds calibrated for the machine's
drift; growth exponents (:mod:`.scale_report`) are given on both. The extraction and embedding
stages also record when each tenth of their work was done (``timeline``): a linear stage's
rate stays flat through the run.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.compute as pc

from qortex_bench.box_speed import box_factor, calibrate
from qortex_bench.scale_report import MODES, growth
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest.stages import STAGE_NAMES

STAGES = STAGE_NAMES[1:]  # the synthetic passages are the input: no documents to read


@dataclass(frozen=True)
class ScaleConfig:
    """One ladder run.

    Attributes:
        sizes: passage counts, ascending.
        workdir: a data home per size is made under it (``n<size>``).
        dim: width of the hashing embedder.
        queries: timed queries per mode (after one warm-up query).
        seed: corpus seed.
        cold: before each ingestion stage, write dirty pages back and drop the clean page
            cache (root only, :func:`drop_page_cache`), so a stage neither finds its inputs
            cached by the one before it nor spends its time reclaiming the cache they filled.
    """

    sizes: tuple[int, ...]
    workdir: Path
    dim: int = 64
    queries: int = 50
    seed: int = 0
    cold: bool = False


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_page_cache() -> float:
    """Sync, then drop the clean page cache (``echo 1 > /proc/sys/vm/drop_caches``); returns
    the page cache left, in MB (``Cached`` of ``/proc/meminfo``).

    Raises:
        ConfigError: the file cannot be written (not root, or no such file).
    """
    from qortex_core.errors import ConfigError

    os.sync()
    try:
        DROP_CACHES.write_text("1\n")
    except OSError as exc:
        why = f"cannot write {DROP_CACHES} ({exc.strerror})"
        raise ConfigError(f"--cold needs root: {why}") from None
    return round(_proc_mb("/proc/meminfo", "Cached") or 0.0, 1)


def _proc_mb(path: str, field: str) -> float | None:
    """A ``field:  N kB`` line of a /proc file in MB; None when the file has no such line."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return None


def _rss_mb(field: str = "VmRSS") -> float:
    """Current (``VmRSS``) or peak (``VmHWM``) resident set of this process in MB."""
    mb = _proc_mb("/proc/self/status", field)
    if mb is None:  # pragma: no cover
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return mb


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


_shown: dict[str, int] = {}  # stage -> last tenth reported (one stage per child process)
_timeline: list[list] = []  # [label, done, total, seconds into the stage] at each tenth
_clock = {"start": 0.0}


def _progress(stage: str, done: int, total: int) -> None:
    tenth = 10 * done // total if total else 10
    if _shown.get(stage) != tenth:
        _shown[stage] = tenth
        _timeline.append([stage, done, total, round(time.perf_counter() - _clock["start"], 3)])
        _say(f"    {stage}: {done}/{total}")


def _stage_fields(report: object) -> dict:
    """What the benchmark keeps of a stage's report (rows, or the embedding report's fields)."""
    from qortex_core.ingest import stages as st

    if isinstance(report, st.EmbedReport):
        return asdict(report)
    if isinstance(report, st.SnapshotReport):
        return {"snapshot_mb": round(_du(report.path) / 2**20, 2)}
    if isinstance(report, st.ExtractReport):
        return {"rows": report.extracted}
    if isinstance(report, st.SynonymReport):
        return {"rows": report.edges}
    assert isinstance(report, st.ChunkReport)
    return {"rows": report.total}


def _run_stage(stage: str, home: str, passages: int, dim: int, seed: int) -> dict:
    """Run one stage (:func:`qortex_core.ingest.stages.run_stage`) on ``home`` in this (fresh)
    process; seconds and memory of the stage."""
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
    from qortex_core.embed import HashEmbedder, HashEmbedderConfig
    from qortex_core.ingest import stages as st
    from qortex_core.ingest.extract import OfflineExtractor
    from qortex_core.storage.store import LanceStore

    store = LanceStore.open(home)
    before = _rss_mb("VmHWM")
    extra: dict = {}
    docs = []
    if stage == "chunks":  # the corpus is the benchmark's input, not the stage: made off the clock
        made = time.perf_counter()
        docs = SynthCorpus(SynthConfig(passages=passages, seed=seed)).passages()
        extra["generate_s"] = round(time.perf_counter() - made, 3)
    embedder = HashEmbedder(HashEmbedderConfig(dim))
    run = st.IngestRun(store, home, OfflineExtractor(), embedder, docs, _progress, 512)
    start = _clock["start"] = time.perf_counter()
    extra.update(_stage_fields(st.run_stage(stage, run)))
    out = {
        "seconds": round(time.perf_counter() - start, 3),
        "peak_rss_mb": round(_rss_mb("VmHWM"), 1),
        "rss_before_mb": round(before, 1),
        **extra,
    }
    if _timeline:
        out["timeline"] = list(_timeline)
    if stage == "synonym_edges":  # after the stage's time and memory are taken
        out["edge_recall"] = synonym_recall(store)
    return out


def synonym_recall(store, sample: int = 500, seed: int = 0) -> dict:
    """How many of the exact synonym edges of ``sample`` random eligible concepts the stored
    edges hold (exact neighbours by a full product of the sampled rows; rows whose exact
    neighbours exceed top-k are skipped, their pick among ties is arbitrary)."""
    from qortex_core.ingest.synonyms import SynonymConfig, eligible_mask
    from qortex_core.storage.store import CONCEPTS, SYNONYMS, arrow_to_vectors

    config = SynonymConfig()
    concepts = store.read(CONCEPTS).select(["id", "name", "vector"])
    concepts = concepts.take(pc.sort_indices(concepts["id"]))  # the same sample in any row order
    vectors = arrow_to_vectors(concepts["vector"], concepts.schema.field("vector").type.list_size)
    idx = np.flatnonzero(eligible_mask(concepts["name"], config.min_chars))  # (m,)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(idx, min(sample, idx.size), replace=False))  # (s,) concept rows
    edges = store.read(SYNONYMS)
    at = {cid: i for i, cid in enumerate(concepts["id"].to_pylist())}
    stored: set[tuple[int, int]] = set()
    for a, b in zip(edges["a"].to_pylist(), edges["b"].to_pylist()):
        stored.update(((at[a], at[b]), (at[b], at[a])))
    found = total = skipped = 0
    step = max(1, (1 << 25) // max(idx.size, 1))
    for s in range(0, rows.size, step):
        sims = vectors[rows[s : s + step]] @ vectors[idx].T  # (step, m)
        for r, line in zip(rows[s : s + step], sims):
            near = {int(j) for j in idx[line >= config.threshold] if j != r}
            if len(near) > config.top_k:
                skipped += 1
                continue
            total += len(near)
            found += sum((int(r), j) in stored for j in near)
    recall = round(found / total, 4) if total else None
    return {"sampled": int(rows.size), "exact_edges": total, "recall": recall, "skipped": skipped}


def _percentiles(ms: list[float]) -> dict:
    arr = np.asarray(ms, np.float64)  # (queries,)
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 2),
        "p95_ms": round(float(np.percentile(arr, 95)), 2),
    }


def _run_queries(home: str, passages: int, dim: int, seed: int, count: int) -> dict:
    """Open the retriever in this (fresh) process; its RSS and query latency per mode."""
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
    from qortex_core.embed import HashEmbedder, HashEmbedderConfig
    from qortex_core.query.retriever import Retriever

    queries = SynthCorpus(SynthConfig(passages=passages, seed=seed)).queries(count + 1)
    before = _rss_mb()
    start = time.perf_counter()
    retriever = Retriever.open(home, embedder=HashEmbedder(HashEmbedderConfig(dim)))
    out: dict = {
        "open_s": round(time.perf_counter() - start, 3),
        "rss_before_open_mb": round(before, 1),
        "rss_after_open_mb": round(_rss_mb(), 1),
    }
    default = retriever.config
    top: dict[str, list] = {}
    for label in MODES:
        mode = label.removesuffix("_exact")
        retriever.config = replace(default, fact_probes=0) if label != mode else default
        retriever.query(queries[0], top_k=10, mode=mode)  # warm-up
        ms, top[label] = [], []
        for text in queries[1:]:
            t = time.perf_counter()
            hits = retriever.query(text, top_k=10, mode=mode).passages
            ms.append((time.perf_counter() - t) * 1000)
            top[label].append([h.id for h in hits])
        out[label] = _percentiles(ms)
    out["fact_index"] = retriever.view.fact_index is not None
    same = sum(a == b for a, b in zip(top["hipporag"], top["hipporag_exact"]))
    out["hipporag_top10_same_as_exact"] = round(same / max(len(queries) - 1, 1), 3)
    out["peak_rss_mb"] = round(_rss_mb("VmHWM"), 1)
    return out


def _in_child(fn: Callable, *args) -> dict:
    """``fn(*args)`` in a fresh spawned process (its own peak RSS, no state carried over)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(fn, *args).result()


def _du(path: Path) -> int:
    """Bytes of the files under ``path``."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _disk(home: Path, passages: int, dim: int, counts: dict) -> dict:
    """Bytes on disk, per passage, and what 384-dim float32 / float16 vectors would take."""
    lance, snaps = _du(home / "lancedb"), _du(home / "snapshots")
    vectors = sum(counts.get(k, 0) for k in ("passages", "phrases", "facts", "rules"))
    per_vector_copies = 3  # embedding cache, the LanceDB tables, the snapshot arrays
    measured = (lance + snaps) / passages
    extra_384 = vectors / passages * (384 - dim) * 4 * per_vector_copies
    vec_384 = vectors / passages * 384 * 4 * per_vector_copies
    return {
        "lancedb_mb": round(lance / 2**20, 1),
        "snapshots_mb": round(snaps / 2**20, 1),
        "bytes_per_passage": round(measured),
        "vectors_per_passage": round(vectors / passages, 2),
        "bytes_per_passage_at_384_float32": round(measured + extra_384),
        "bytes_per_passage_at_384_float16": round(measured + extra_384 - vec_384 / 2),
    }


def run_size(config: ScaleConfig, n: int, reference: dict[str, float]) -> dict:
    """Every stage and the retriever for one corpus size; progress on stderr.

    ``reference``: the ladder's first calibration, against which each stage's box factor is
    taken (:func:`.box_speed.box_factor`)."""
    from qortex_core.storage import snapshot as snap

    home = config.workdir / f"n{n}"
    if home.exists() and any(home.iterdir()):
        from qortex_core.errors import ConfigError

        raise ConfigError(f"{home} is not empty: give a fresh --workdir")
    home.mkdir(parents=True, exist_ok=True)
    stages = {}
    box = calibrate()
    for stage in STAGES:
        _say(f"  n={n}: {stage} ...")
        cached = drop_page_cache() if config.cold else None
        stages[stage] = _in_child(_run_stage, stage, str(home), n, config.dim, config.seed)
        if cached is not None:
            stages[stage]["page_cache_mb_at_start"] = cached
        after = calibrate()
        factor = box_factor(reference, box, after)
        stages[stage]["box"] = {
            "before": box,
            "after": after,
            "factor": factor,
            "calibrated_seconds": round(stages[stage]["seconds"] / factor, 3),
        }
        box = after
        _say(
            f"  n={n}: {stage} {stages[stage]['seconds']} s, {stages[stage]['peak_rss_mb']} MB"
            f" (machine x{factor:.2f})"
        )
    _say(f"  n={n}: retriever open + {config.queries} queries x {len(MODES)} modes ...")
    retriever = _in_child(_run_queries, str(home), n, config.dim, config.seed, config.queries)
    counts = snap.load_latest_good(home, verify=False)[0].manifest["counts"]
    return {
        "passages": n,
        "stages": stages,
        "ingest_seconds": round(sum(s["seconds"] for s in stages.values()), 2),
        "ingest_peak_rss_mb": max(s["peak_rss_mb"] for s in stages.values()),
        "snapshot_mb": stages["graph_snapshot"]["snapshot_mb"],
        "counts": counts,
        "disk": _disk(home, n, config.dim, counts),
        "retriever": retriever,
    }


def run_ladder(config: ScaleConfig) -> dict:
    """The whole ladder: a row per size, growth exponents between sizes."""
    rows = []
    reference = calibrate()
    for n in config.sizes:
        _say(f"bench scale: {n} passages")
        start = time.perf_counter()
        rows.append(run_size(config, n, reference))
        _say(f"bench scale: {n} passages done in {time.perf_counter() - start:.1f} s")
    return {
        "embedder": HashEmbedder(HashEmbedderConfig(config.dim)).name,
        "extractor": "offline",
        "queries_per_mode": config.queries,
        "sizes": rows,
        "growth": growth(rows),
        "workdir": str(config.workdir),
        "seed": config.seed,
        "cold": config.cold,
        "calibration": reference,
    }


def requery(report: dict, queries: int | None = None) -> dict:
    """``report`` (an earlier ladder's) with the retriever timed again on each size's data home:
    new query code on the same corpora and snapshots; the stage figures stay the report's."""
    from qortex_core.errors import ConfigError

    rows, count = [], queries or report["queries_per_mode"]
    dim = int(report["embedder"].rsplit("-", 1)[1])
    for row in report["sizes"]:
        n = row["passages"]
        home = Path(report["workdir"]) / f"n{n}"
        if not (home / "snapshots").is_dir():
            raise ConfigError(f"{home} has no snapshot: the report's data homes are gone")
        _say(f"bench scale: {n} passages, retriever open + {count} queries x {len(MODES)} modes")
        retriever = _in_child(_run_queries, str(home), n, dim, report.get("seed", 0), count)
        rows.append(row | {"retriever": retriever})
    return report | {"queries_per_mode": count, "sizes": rows, "growth": growth(rows)}
