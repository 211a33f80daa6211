"""``qortex bench incremental``: what a change costs against a full build, on synthetic corpora.

For each size N: N synthetic passages (:mod:`qortex_bench.synth_corpus`) written one file each
into a source folder; ``qortex ingest`` full; ``delta`` more files and ``qortex ingest``;
``qortex ingest`` with nothing changed; ``delta`` ``qortex remember`` calls and ``qortex
consolidate``. Every step is the real CLI in a child process (its wall seconds and its own peak
RSS), with the hash embedder and the offline extractor, and starts once the earlier steps'
writes are flushed to disk (``sync``, untimed: a scheduled run does not find a full build's
gigabytes still being written back). Then a full rebuild of the same final corpus
(the same files, the same memories) in a fresh home, and the top 10 passages of every mode on
the same queries from both homes: after incremental runs the answers must be the rebuild's,
and so must the synonym edges (:func:`synonym_agreement`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from qortex_core.errors import QortexError

MODES = ("dense", "hipporag", "hybrid")
PAST_S = 60.0  # the source files' age: written before the run, as a real folder's are
Consolidate = Callable[[Path, dict[str, str]], object]  # (home, env): the ingest job, no source


@dataclass(frozen=True)
class IncrementalConfig:
    """Sizes, the change per step, where the homes live, the hash embedder's width, queries."""

    sizes: tuple[int, ...]
    delta: int = 10
    workdir: Path = Path(".")
    dim: int = 64
    queries: int = 50
    seed: int = 0
    keep_snapshots: int = 0  # > 0: older snapshot folders deleted between steps (untimed)


def _env(dim: int) -> dict[str, str]:
    env = dict(os.environ, QORTEX_EMBEDDER=f"hash:{dim}", QORTEX_EXTRACTOR="offline")
    env.pop("DAGSTER_HOME", None)  # each home's own instance
    return env


def _cli(args: list[str], env: dict[str, str]) -> dict:
    """``qortex ARGS`` in a child process: its wall seconds, its own peak RSS (MB: the kernel's
    ``ru_maxrss`` of that child, file pages it had mapped included) and its JSON output.

    Raises:
        QortexError: the command failed (its last line of stderr).
    """
    from concurrent.futures import ThreadPoolExecutor

    argv = [sys.executable, "-m", "qortex_cli", *args]
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with ThreadPoolExecutor(2) as pool:  # both pipes drained while it runs
        out, err = pool.submit(child.stdout.read), pool.submit(child.stderr.read)  # type: ignore[union-attr]
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        stdout, stderr = out.result(), err.result()
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        line = (stderr.strip().splitlines() or ["no output"])[-1]
        raise QortexError(f"qortex {args[0]} failed in the benchmark: {line}")
    peak = round(usage.ru_maxrss / 1024, 1)
    return {"seconds": round(seconds, 3), "peak_rss_mb": peak, "stdout": stdout}


def _step(args: list[str], env: dict[str, str]) -> dict:
    """A timed step (:func:`_cli`) that starts with the earlier steps' writes on disk, as a
    scheduled run finds them: the flush (untimed) is not charged to the next step."""
    os.sync()
    return _cli(args, env)


def children_peak_rss_mb() -> float:
    """The largest peak RSS of any child process waited for so far (MB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)


def write_passages(source: Path, passages: int, start: int, stop: int, seed: int) -> None:
    """Passages ``start`` .. ``stop - 1`` of the corpus of ``passages``, one ``.md`` each, dated
    :data:`PAST_S` ago."""
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus

    corpus = SynthCorpus(SynthConfig(passages=passages, seed=seed))
    source.mkdir(parents=True, exist_ok=True)
    when = time.time() - PAST_S
    for i in range(start, stop):
        p = corpus.passage(i)
        path = source / f"p{i:08d}.md"
        path.write_text(f"# {p.title}\n\n{p.text}\n", encoding="utf-8")
        os.utime(path, (when, when))


def memory_texts(passages: int, count: int, seed: int) -> list[str]:
    """``count`` facts about the corpus's entities, one per ``qortex remember``."""
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus

    corpus = SynthCorpus(SynthConfig(passages=passages, seed=seed))
    return [
        f"{corpus.entity_name(3 * k + 1)} opened a workshop beside {corpus.entity_name(5 * k + 2)}."
        for k in range(count)
    ]


def _remember_all(home: Path, texts: list[str], env: dict[str, str]) -> None:
    for text in texts:
        _cli(["remember", text, "--home", str(home)], env)


def top10(home: Path, queries: list[str], dim: int) -> dict[str, list[list[str]]]:
    """Each mode's top 10 passage texts per query (texts, not ids: a memory's passage id names
    its record, which differs between two homes holding the same text)."""
    from qortex_core.embed import HashEmbedder, HashEmbedderConfig
    from qortex_core.query.retriever import Retriever

    retriever = Retriever.open(home, embedder=HashEmbedder(HashEmbedderConfig(dim)))
    return {
        mode: [[h.text for h in retriever.query(q, top_k=10, mode=mode).passages] for q in queries]
        for mode in MODES
    }


def agreement(a: dict[str, list[list[str]]], b: dict[str, list[list[str]]]) -> dict[str, float]:
    """Per mode, the share of queries whose top 10 (ordered) is the same in both."""
    return {
        mode: round(sum(x == y for x, y in zip(a[mode], b[mode])) / max(len(a[mode]), 1), 4)
        for mode in a
    }


def synonym_agreement(home: Path, rebuilt: Path) -> dict:
    """The synonym edges after the incremental runs against the rebuild's: how many each
    holds, the share they have in common (Jaccard) and each one's edge recall on the same
    sampled concepts (:func:`~qortex_bench.scale_bench.synonym_recall`: incremental, rebuild)."""
    from qortex_bench.scale_bench import synonym_recall
    from qortex_core.storage.store import SYNONYMS, LanceStore

    stores = [LanceStore.open(str(h)) for h in (home, rebuilt)]
    edges = [s.read(SYNONYMS) for s in stores]
    sets = [{frozenset(p) for p in zip(e["a"].to_pylist(), e["b"].to_pylist())} for e in edges]
    union = sets[0] | sets[1]
    return {
        "incremental": len(sets[0]),
        "rebuild": len(sets[1]),
        "jaccard": round(len(sets[0] & sets[1]) / len(union), 4) if union else 1.0,
        "edge_recall": [synonym_recall(s)["recall"] for s in stores],
    }


def _summary(stdout: str) -> dict:
    """What a step's ``--json`` output says it did (step seconds, embedded, cache hits)."""
    import json

    try:
        data = json.loads(stdout)
    except ValueError:
        return {}
    keep = ("embedded", "embedding_cache_hits", "new_documents", "snapshot_status", "memories")
    out = {k: data[k] for k in keep if k in data}
    if isinstance(data.get("step_seconds"), dict):
        out["step_seconds"] = {k: round(v, 2) for k, v in data["step_seconds"].items()}
    return out


def _trim(home: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest snapshot folders (none when ``keep`` is 0); the
    tables are not optimized, so the next step sees the versions the last one wrote."""
    if keep > 0:
        from qortex_core.storage.retention import prune_snapshots

        prune_snapshots(home, keep, optimize=False)


def run_size(config: IncrementalConfig, n: int, consolidate: Consolidate) -> dict:
    """Every step at one size; seconds, ratios to the full build, agreement, peak RSS."""
    from qortex_bench.synth_corpus import SynthConfig, SynthCorpus

    where = Path(config.workdir) / f"n{n}"
    shutil.rmtree(where, ignore_errors=True)
    source, home, rebuilt = where / "src", where / "home", where / "rebuild"
    env, total = _env(config.dim), n + config.delta
    write_passages(source, total, 0, n, config.seed)
    ingest = ["ingest", str(source), "--home", str(home), "--json"]
    steps = {"full": _step(ingest, env)}
    write_passages(source, total, n, total, config.seed)
    _trim(home, config.keep_snapshots)
    steps["plus_delta"] = _step(ingest, env)
    _trim(home, config.keep_snapshots)
    steps["unchanged"] = _step(ingest, env)
    texts = memory_texts(total, config.delta, config.seed)
    _remember_all(home, texts, env)
    steps["consolidate"] = _step(["consolidate", "--home", str(home), "--json"], env)
    _trim(home, config.keep_snapshots)
    _remember_all(rebuilt, texts, env)
    steps["rebuild"] = _step(["ingest", str(source), "--home", str(rebuilt), "--json"], env)
    queries = SynthCorpus(SynthConfig(passages=total, seed=config.seed)).queries(config.queries)
    same = agreement(top10(home, queries, config.dim), top10(rebuilt, queries, config.dim))
    full = steps["full"]["seconds"]
    out: dict = {"passages": n, "delta": config.delta}
    for name, step in steps.items():
        out[f"{name}_s"] = step["seconds"]
        out[f"{name}_peak_rss_mb"] = step["peak_rss_mb"]
        if name not in ("full", "rebuild"):
            out[f"{name}_ratio"] = round(step["seconds"] / full, 4) if full else None
    out["peak_rss_mb"] = children_peak_rss_mb()  # the largest step so far (ladders grow)
    out["steps"] = {name: _summary(step["stdout"]) for name, step in steps.items()}
    out["top10_agreement"] = same
    out["synonym_edges"] = synonym_agreement(home, rebuilt)
    fact = f"{memory_texts(total, 1, config.seed + 1)[0]} It stores amber lanterns."
    out["freshness"] = freshness(home, config.dim, fact, consolidate)
    out["top10_agreement_min"] = min(same.values()) if same else 1.0
    return out


def _served_from_graph(memory, text: str) -> bool:
    hits = memory.search(text, top_k=10, mode="hipporag").passages
    return any(h.tier == "graph" and h.text == text for h in hits)


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` set to ``env`` for the block, then restored."""
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def freshness(
    home: Path, dim: int, text: str, consolidate: Consolidate, limit_s: float = 600.0
) -> dict:
    """Seconds from a ``remember`` returning to its fact answered from tier ``graph`` (PPR over
    the snapshot), along the ``memories_arrived`` sensor's path: the sensor is evaluated at once
    (its poll interval comes on top), its run request is the ``ingest`` job with no source
    folder, run in this process, and the search is polled until the graph tier serves it.

    Raises:
        QortexError: the sensor asked for no run, or the fact never reached the graph tier.
    """
    from dagster import RunRequest, build_sensor_context

    from pipelines.resources import StoreResource
    from pipelines.sensors import make_memories_sensor
    from qortex_core.agent.api import Memory
    from qortex_core.embed import HashEmbedder, HashEmbedderConfig
    from qortex_core.memory.records import MemoryTable

    env = _env(dim)
    memory = Memory(home, embedder=HashEmbedder(HashEmbedderConfig(dim)))
    cursor = str(MemoryTable(memory.store).version())
    memory.remember(text)
    start = time.perf_counter()
    sensor = make_memories_sensor({"QORTEX_MEMORY_SENSOR": "on"})
    context = build_sensor_context(
        cursor=cursor, resources={"store": StoreResource(home=str(home))}
    )
    asked = sensor(context)
    if not isinstance(asked, RunRequest):
        raise QortexError(f"the memories_arrived sensor asked for no run: {asked}")
    fresh_tier = not _served_from_graph(memory, text)  # before the run: the fresh tier only
    with _environment(env):  # the job's resources read the embedder and extractor from it
        consolidate(home, env)
    ran = time.perf_counter() - start
    while not _served_from_graph(memory, text):
        if time.perf_counter() - start > limit_s:
            raise QortexError(f"the remembered fact was not served from the graph in {limit_s} s")
        time.sleep(0.2)
    return {
        "seconds": round(time.perf_counter() - start, 3),
        "run_s": round(ran, 3),
        "fresh_tier_before_run": fresh_tier,
        "sensor_run_key": asked.run_key,
    }


def run_incremental(config: IncrementalConfig, consolidate: Consolidate) -> dict:
    """Every size in order; the report (``consolidate``: the freshness step's job run)."""
    sizes = [run_size(config, n, consolidate) for n in config.sizes]
    return {
        "embedder": f"hash:{config.dim}",
        "extractor": "offline",
        "delta": config.delta,
        "queries": config.queries,
        "modes": list(MODES),
        "workdir": str(config.workdir),
        "sizes": sizes,
    }
