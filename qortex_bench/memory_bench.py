"""Agent-memory latency: ``remember``, remember-to-searchable across processes, and search with
many fresh (not yet consolidated) memories, all with the bundled embedder on a real home.

1. ``remember`` p50/p95 over ``writes`` single writes (embedding + durable LanceDB append).
2. Remember-to-searchable: a second, spawned process polls ``search`` for each record the first
   writes; the latency runs from the moment ``remember`` returned (wall clock) to the first
   search that returns the record.
3. With ``fresh`` memories written in batches (``remember_many``) and not consolidated:
   ``remember`` p50/p95 again (supersession compares each write with its subject's
   statements), and search p50/p95 end to end (embed the query, fresh tier dense + full-text,
   the snapshot's retrieval), before and after ``optimize()`` folds them into the full-text
   index.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

WORDS = (
    "pump valve bridge harbour crew engine station river tower market bakery lantern "
    "orchard mill forge quarry ferry archive garden signal beacon vault cellar chapel"
).split()


@dataclass(frozen=True)
class MemoryBenchConfig:
    """Attributes:
    home: the data home (made fresh by the caller).
    writes: single ``remember`` calls timed.
    probes: records the second process waits for.
    fresh: memories in the fresh tier for the search timing.
    queries: timed searches.
    batch: ``remember_many`` batch size while filling.
    """

    home: Path
    writes: int = 200
    probes: int = 20
    fresh: int = 10_000
    queries: int = 50
    batch: int = 500


def synthetic_fact(n: int, rng: np.random.Generator) -> str:
    """A short invented fact with a unique token (so each probe has exactly one answer)."""
    a, b, c = rng.choice(WORDS, 3, replace=False)
    return f"Note {n}: the {a} near the {b} was inspected by crew K{n:05d} after the {c} closed."


def percentiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds."""
    ms = np.asarray(seconds) * 1000.0
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def _reader(home: str, inbox, outbox) -> None:
    """The second process: for each (id, query, written wall time), poll until found."""
    import qortex_core

    mem = qortex_core.open(home)
    mem.search("warm up", top_k=1)
    outbox.put("ready")
    for rid, query, written in iter(inbox.get, None):
        while rid not in [h.id for h in mem.search(query, top_k=5).passages]:
            if time.time() - written > 30:
                break
            time.sleep(0.005)
        outbox.put(time.time() - written)


def _time_writes(mem, config: MemoryBenchConfig, rng: np.random.Generator, first: int) -> dict:
    """p50/p95 of ``config.writes`` single ``remember`` calls."""
    spent = []
    for n in range(first, first + config.writes):
        text = synthetic_fact(n, rng)
        start = time.perf_counter()
        mem.remember(text)
        spent.append(time.perf_counter() - start)
    return percentiles(spent)


def time_remember(mem, config: MemoryBenchConfig, rng: np.random.Generator) -> dict:
    """p50/p95 of single ``remember`` calls."""
    mem.remember("warm up: the embedder and the table are ready.")
    spent = _time_writes(mem, config, rng, 0)
    embed = []
    for n in range(config.writes):  # the embedder alone, on the same kind of text
        text = synthetic_fact(50_000 + n, rng)
        start = time.perf_counter()
        mem.embedder.embed([text])
        embed.append(time.perf_counter() - start)
    return spent | {"embed_only_p50_ms": percentiles(embed)["p50_ms"]}


def time_visible(mem, config: MemoryBenchConfig, rng: np.random.Generator) -> dict:
    """Remember-to-searchable from another process, p50/p95."""
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(config.home), inbox, outbox))
    reader.start()
    outbox.get(timeout=600)
    seen = []
    for n in range(config.probes):
        code = f"P{n:04d}X{rng.integers(10**6)}"
        record = mem.remember(f"Probe {code}: the signal tower at dock {n} was repainted.")
        inbox.put((record.id, f"Which tower was repainted, probe {code}?", time.time()))
        seen.append(outbox.get(timeout=60))
        time.sleep(0.3)  # the reader is idle again: each probe is measured alone
    inbox.put(None)
    reader.join(60)
    return percentiles(seen) | {"max_ms": float(max(seen) * 1000)}


def time_search(mem, config: MemoryBenchConfig, rng: np.random.Generator) -> dict:
    """Fill the fresh tier to ``config.fresh`` records, then time searches (before and after
    the full-text index absorbs them)."""
    start = time.perf_counter()
    have = len(mem.state.live_ids)
    while have < config.fresh:
        take = min(config.batch, config.fresh - have)
        mem.remember_many([synthetic_fact(100_000 + have + i, rng) for i in range(take)])
        have += take
    fill_s = time.perf_counter() - start
    queries = [
        f"Who inspected the {a} near the {b}?" for a, b in rng.choice(WORDS, (config.queries, 2))
    ]
    out: dict[str, Any] = {"fresh_records": len(mem.state.live_ids), "fill_s": round(fill_s, 1)}
    out["remember_at_fresh"] = _time_writes(mem, config, rng, 200_000)
    for label in ("unindexed", "after_optimize"):
        if label == "after_optimize":
            start = time.perf_counter()
            mem.table.optimize()
            out["optimize_s"] = round(time.perf_counter() - start, 2)
        mem.search(queries[0], top_k=10)
        spent, tiers = [], []
        for query in queries:
            begin = time.perf_counter()
            result = mem.search(query, top_k=10)
            spent.append(time.perf_counter() - begin)
            tiers.append(sum(h.tier == "fresh" for h in result.passages))
        embed = []
        for query in queries:
            begin = time.perf_counter()
            mem.embedder.embed([query])
            embed.append(time.perf_counter() - begin)
        out[label] = percentiles(spent) | {
            "query_embed_p50_ms": percentiles(embed)["p50_ms"],
            "fresh_hits_per_query": float(np.mean(tiers)),
        }
    return out


def run_memory_bench(config: MemoryBenchConfig, snapshot_dir: Path | None = None) -> dict:
    """All three measurements on ``config.home`` (after an optional file ingest of
    ``snapshot_dir`` so searches also walk a snapshot)."""
    import qortex_core
    from qortex_core.embed import make_embedder
    from qortex_core.storage import snapshot as snap

    embedder = make_embedder()
    if snapshot_dir is not None:
        _ingest(config.home, snapshot_dir, embedder)
    mem = qortex_core.open(config.home, embedder=embedder)
    rng = np.random.default_rng(7)
    report = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "embedder": embedder.name,
        "snapshot": bool(snap.list_versions(config.home)),
        "remember": time_remember(mem, config, rng),
        "remember_to_searchable": time_visible(mem, config, rng),
    }
    report["search"] = time_search(mem, config, rng)
    return report


def _ingest(home: Path, source: Path, embedder) -> None:
    """Index a folder with the stage functions (no Dagster), so a snapshot exists."""
    from qortex_core.ingest import stages
    from qortex_core.ingest.chunking import chunk_documents
    from qortex_core.ingest.documents import SourceConfig, load_documents, sync_documents
    from qortex_core.ingest.extract import OfflineExtractor
    from qortex_core.storage.store import LanceStore

    store = LanceStore.open(home)
    docs = load_documents(SourceConfig(root=source)).documents
    sync_documents(store, docs)
    stages.build_index(store, home, chunk_documents(docs), OfflineExtractor(), embedder)
