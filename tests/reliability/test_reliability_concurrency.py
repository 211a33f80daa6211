"""Queries in several threads, and in another process, keep answering from whole snapshots while snapshots are published.

(Concurrent feedback appends from several processes are covered by
``tests/test_memory_factors.py::test_appends_from_several_processes_are_all_kept``.)
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

from conftest import BRIDGE_QUESTION

from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap

PUBLISHES = 4


def _publish_many(home: str, n: int) -> None:
    """Rebuild and publish the snapshot ``n`` times from the stored tables (what an ingestion's last stage does)."""
    from qortex_core.ingest import stages as index
    from qortex_core.storage.store import LanceStore

    store = LanceStore.open(home)
    for run in range(n):
        index.build_snapshot(store, home, "all-MiniLM-L6-v2", params={"run": run})


def test_threads_answer_from_whole_snapshots_during_publishes(toy_home: Path, embedder):
    baseline = Retriever.open(toy_home, embedder=embedder)
    expected = [h.id for h in baseline.query(BRIDGE_QUESTION, top_k=3).passages]
    first = baseline.snapshot.path.name
    done = threading.Event()
    seen: list[str] = []
    errors: list[str] = []

    def reader() -> None:
        pinned = Retriever.open(toy_home, embedder=embedder)  # one long-lived retriever per thread
        for _ in range(40):
            try:
                fresh = Retriever.open(toy_home, embedder=embedder)
                for r in (fresh, pinned):
                    result = r.query(BRIDGE_QUESTION, top_k=3)
                    if r.warning or result.snapshot != r.snapshot.path.name:
                        errors.append(f"fallback or mixed snapshot: {r.warning} {result.snapshot}")
                    if [h.id for h in result.passages] != expected:
                        errors.append(f"different answer from {result.snapshot}")
                seen.append(fresh.snapshot.path.name)
            except Exception as exc:  # any failure at all is what this test looks for
                errors.append(f"{type(exc).__name__}: {exc}")
            if done.is_set():
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    publisher = mp.get_context("spawn").Process(
        target=_publish_many, args=(str(toy_home), PUBLISHES)
    )
    publisher.start()
    publisher.join(300)
    done.set()
    for t in threads:
        t.join(300)
    assert publisher.exitcode == 0
    assert errors == []
    versions = snap.list_versions(toy_home)
    assert len(versions) == 1 + PUBLISHES and snap.latest_name(toy_home) == versions[-1]
    assert set(seen) <= set(versions) and first in versions
    last = Retriever.open(toy_home, embedder=embedder).query(BRIDGE_QUESTION, top_k=3)
    assert last.snapshot == versions[-1] and [h.id for h in last.passages] == expected


def _read_until_stopped(home: str, folder: str) -> None:
    """Reader process: open and query repeatedly until ``folder/stop`` appears; results go to ``folder/out.json``."""
    import json

    from qortex_core.embed import SentenceTransformerEmbedder

    embedder, errors, names, expected, rounds = SentenceTransformerEmbedder(), [], set(), None, 0
    while True:
        stop = (Path(folder) / "stop").exists()
        try:
            r = Retriever.open(home, embedder=embedder)
            result = r.query(BRIDGE_QUESTION, top_k=3)
            ids = [h.id for h in result.passages]
            expected = expected or ids
            if ids != expected or result.snapshot != r.snapshot.path.name or r.warning:
                errors.append(f"inconsistent answer from {result.snapshot}: {r.warning}")
            names.add(result.snapshot)
        except Exception as exc:  # any failure at all is what the test looks for
            errors.append(f"{type(exc).__name__}: {exc}")
        rounds += 1
        (Path(folder) / "ready").touch()
        if stop:
            break
    (Path(folder) / "out.json").write_text(
        json.dumps({"errors": errors, "names": sorted(names), "rounds": rounds})
    )


def test_a_reader_process_answers_while_this_process_publishes(toy_home: Path, tmp_path: Path):
    import json
    import time

    from qortex_core.ingest import stages as index
    from qortex_core.storage.store import LanceStore

    reader = mp.get_context("spawn").Process(
        target=_read_until_stopped, args=(str(toy_home), str(tmp_path))
    )
    reader.start()
    for _ in range(600):  # wait (not a timing assertion) for the reader's first answer
        if (tmp_path / "ready").exists() or not reader.is_alive():
            break
        time.sleep(0.5)
    store = LanceStore.open(toy_home)
    for run in range(PUBLISHES):
        index.build_snapshot(store, toy_home, "all-MiniLM-L6-v2", params={"run": run})
    (tmp_path / "stop").touch()
    reader.join(300)
    assert reader.exitcode == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["errors"] == [] and out["rounds"] >= 2
    assert set(out["names"]) <= set(snap.list_versions(toy_home))
    assert (
        snap.list_versions(toy_home)[-1] in out["names"]
    )  # its last round, after the stop, saw the newest
