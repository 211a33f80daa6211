"""The memory soak: writers, readers, consolidation and purge on one home at once, then an audit.

``processes`` spawned workers each loop for ``seconds``: ``remember`` a new record, ``update``
or ``forget`` one (their own, or one of a few shared records every worker revises, so
revisions of one record race), and ``search``. Meanwhile this process runs the given
``consolidate`` and purge, alternately, until the workers stop. Each worker reports every write
it was told succeeded (the acknowledged state) and every error it did not expect.

The audit, on a fresh handle after everything stopped:

- every acknowledged ``remember`` exists; every acknowledged revision is in its record's history
  with the number the caller was told, and its text (blank only once the record is forgotten
  and purged);
- every record's revisions are 1, 2, ... with no gap or repeat;
- every acknowledged ``forget`` left its record forgotten, and no forgotten record was revised;
- no worker died or met an unexpected error.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

OPS = ("remember", "update", "forget", "search")
WEIGHTS = (0.35, 0.25, 0.1, 0.3)
WORDS = "pump valve bridge harbour crew engine station river tower market vault ferry".split()


@dataclass(frozen=True)
class SoakConfig:
    """Attributes:
    home: the data home (made fresh by the caller).
    processes: worker processes.
    seconds: how long the workers run.
    shared: records every worker revises (the contended ones).
    embedder: embedder spec of the workers (``hash:64``: no model, so the store is what is timed).
    seed: random seed of the workers' choices.
    """

    home: Path
    processes: int = 8
    seconds: float = 60.0
    shared: int = 8
    embedder: str = "hash:64"
    seed: int = 0


def _worker(config: SoakConfig, index: int, shared: list[str], start, outbox) -> None:
    """One worker: random operations until the deadline; sends (acks, latencies, errors)."""
    from qortex_core.agent.api import open_memory
    from qortex_core.embed import make_embedder
    from qortex_core.errors import RecordError

    rng = random.Random(config.seed * 1000 + index)
    mem = open_memory(config.home, embedder=make_embedder(config.embedder))
    acks: list[tuple[str, str, int, str]] = []  # (op, id, revision, text)
    times: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    mine: list[str] = []
    start.wait()
    deadline = time.monotonic() + config.seconds
    n = 0
    while time.monotonic() < deadline:
        op = rng.choices(OPS, WEIGHTS)[0]
        n += 1
        text = f"worker {index} note {n}: the {rng.choice(WORDS)} in bay {rng.randrange(99)}"
        target = rng.choice(shared if rng.random() < 0.5 or not mine else mine)
        began = time.perf_counter()
        try:
            if op == "remember":
                record = mem.remember(text)
                mine.append(record.id)
                acks.append((op, record.id, record.revision, record.text))
            elif op == "update":
                record = mem.update(target, text)
                acks.append((op, record.id, record.revision, record.text))
            elif op == "forget":
                record = mem.forget(target)
                acks.append((op, record.id, record.revision, ""))
            else:
                mem.search(text, top_k=5, mode="auto")
        except RecordError as exc:  # revising a record another worker forgot: a refusal
            if "forgotten" not in str(exc):
                errors.append(f"{op}: {type(exc).__name__}: {exc}")
        except Exception as exc:  # anything else is a failure the soak is looking for
            errors.append(f"{op}: {type(exc).__name__}: {exc}")
        times[op].append(time.perf_counter() - began)
    outbox.put((acks, dict(times), errors))


def run_soak(
    config: SoakConfig, consolidate: Callable[[Path], object], purge: Callable[[Path], object]
) -> dict:
    """Run the soak and audit the home; the report (see the module docstring)."""
    from qortex_core.agent.api import open_memory
    from qortex_core.embed import make_embedder

    mem = open_memory(config.home, embedder=make_embedder(config.embedder))
    shared = [r.id for r in mem.remember_many([f"shared record {i}" for i in range(config.shared)])]
    ctx = mp.get_context("spawn")
    start, outbox = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(config, i, shared, start, outbox))
        for i in range(config.processes)
    ]
    for w in workers:
        w.start()
    start.set()
    began = time.monotonic()
    background: dict[str, list[float]] = defaultdict(list)
    background_errors: list[str] = []
    while any(w.is_alive() for w in workers) and outbox.qsize() < len(workers):
        for name, job in (("consolidate", consolidate), ("purge", purge)):
            t0 = time.perf_counter()
            try:
                job(config.home)
            except Exception as exc:  # reported, and the soak fails on it
                background_errors.append(f"{name}: {type(exc).__name__}: {exc}")
            background[name].append(time.perf_counter() - t0)
    results = _collect(workers, outbox)
    wall = time.monotonic() - began
    report = _audit(config, results, [w.exitcode for w in workers])
    report["wall_s"] = round(wall, 1)
    report["background"] = {k: _latency(v) for k, v in background.items()}
    report["background_errors"] = background_errors
    return report


def _collect(workers: list, outbox) -> list:
    """Each worker's report, read while they flush it (a dead worker sends none)."""
    import queue

    results: list = []
    while len(results) < len(workers):
        try:
            results.append(outbox.get(timeout=1.0))
        except queue.Empty:
            if not any(w.is_alive() for w in workers) and outbox.empty():
                break
    for w in workers:
        w.join(timeout=60)
    return results


def _latency(seconds: list[float], wall: float | None = None) -> dict:
    ms = np.asarray(seconds) * 1000.0
    out: dict[str, float] = {"count": len(seconds)}
    if len(seconds):
        out.update(p50_ms=round(float(np.percentile(ms, 50)), 1))
        out.update(p99_ms=round(float(np.percentile(ms, 99)), 1))
    if wall:
        out["per_s"] = round(len(seconds) / wall, 1)
    return out


def _audit(config: SoakConfig, results: list, exitcodes: list[int | None]) -> dict:
    from qortex_core.agent.api import open_memory
    from qortex_core.embed import make_embedder

    mem = open_memory(config.home, embedder=make_embedder(config.embedder))
    acks = [a for r in results for a in r[0]]
    errors = [e for r in results for e in r[2]]
    times: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for op, values in r[1].items():
            times[op].extend(values)
    lost, inconsistent = [], []
    for rid in sorted({a[1] for a in acks}):
        history = mem.history(rid)
        numbers = sorted(h.revision for h in history if h.id == rid)
        if numbers != list(range(1, len(numbers) + 1)):
            inconsistent.append(f"{rid}: revisions {numbers}")
        forgotten = mem.get(rid).forgotten
        by_number = {h.revision: h for h in history if h.id == rid}
        for op, _, revision, text in (a for a in acks if a[1] == rid):
            row = by_number.get(revision)
            if row is None or row.op != op or (text and row.text not in (text, "")):
                lost.append(f"{op} {rid} r{revision}")
            elif op == "forget" and not forgotten:
                lost.append(f"forget {rid} r{revision}: the record is live")
        ops = [by_number[n].op for n in sorted(by_number)]
        if "forget" in ops and ops.index("forget") != len(ops) - 1:
            inconsistent.append(f"{rid}: revised after it was forgotten")
    seconds = config.seconds
    return {
        "processes": config.processes,
        "seconds": seconds,
        "acknowledged_writes": len(acks),
        "lost_writes": lost,
        "inconsistent_histories": inconsistent,
        "crashed_processes": sum(1 for c in exitcodes if c != 0),
        "unexpected_errors": errors[:20],
        "unexpected_error_count": len(errors),
        "operations": {op: _latency(times[op], seconds) for op in OPS},
    }
