"""kill -9 during an ingestion: the previous snapshot still loads and answers, and the next run's snapshot
equals that of a clean run over the same sources.

The ingestion runs the stage functions in a spawned process that SIGKILLs itself at a chosen point:
mid-chunk-sync (new chunks stored, the stale one not yet deleted), mid-extraction (after the first batch is stored), mid-embedding (passages and concepts replaced, facts and
rules not), and mid-publication (the new snapshot folder renamed into place, the pointer not yet switched).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from pathlib import Path

import numpy as np
import pytest

from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ops.doctor import DoctorConfig, diagnose
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Passage
from qortex_core.storage.store import LanceStore

BEFORE = [
    ("Orlan Vesk", "Orlan Vesk is a composer. He was born in Ostrania."),
    ("Ostrania", "Ostrania is governed from Velmora, where its parliament sits."),
]
AFTER = BEFORE[1:] + [
    ("Ivo Lark", "Ivo Lark is a painter known for harbour landscapes in Velmora."),
    ("Tessa Brin", "Tessa Brin is a composer who was born in Lune, the capital of Dravia."),
]
QUESTION = "Where was the composer Orlan Vesk born?"


def run_stages(home: str | Path, rows, embedder, kill_at: str = "") -> Path:
    """All ingestion stages over ``rows``; ``kill_at`` SIGKILLs this process at that point instead."""
    import os

    def die(*_args) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    store = LanceStore.open(home)
    if kill_at == "sync":
        store.delete = die  # new chunks are stored, the stale one is not yet deleted
    if embedder is None:
        from qortex_core.embed import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    # the progress call to die at: after the first extraction batch; after passages and concepts
    kill_after = {"extract": ("extract", 1), "embed": ("embed_tables", 2)}.get(kill_at)

    def progress(stage: str, done: int, _total: int) -> None:
        if (stage, done) == kill_after:
            die()

    def before_publish(stage: str, _report: object) -> None:
        if stage == "synonym_edges" and kill_at == "publish":
            os.replace = die  # the pointer switch is the last step of a publish

    passages = [Passage(text, title) for title, text in rows]
    run = index.IngestRun(
        store, home, OfflineExtractor(), embedder, passages, progress=progress, extract_batch=1
    )
    return index.run_stages(run, after=before_publish)["graph_snapshot"].path


def _killed_run(home: str, rows, kill_at: str) -> None:
    run_stages(home, rows, None, kill_at)


def assert_same_snapshot(a: snap.Snapshot, b: snap.Snapshot) -> None:
    assert set(a.arrays) == set(b.arrays) and set(a.tables) == set(b.tables)
    for (
        name
    ) in a.arrays:  # vectors may differ in the last bits: texts were embedded in other batches
        x, y = np.asarray(a.arrays[name]), np.asarray(b.arrays[name])
        assert x.dtype == y.dtype and x.shape == y.shape, name
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)
    for name in a.tables:  # ingestion times differ between two runs by design
        x, y = (
            t.drop_columns([c for c in ("ingested_at",) if c in t.column_names])
            for t in (a.tables[name], b.tables[name])
        )
        assert x.equals(y), name
    assert a.manifest["counts"] == b.manifest["counts"]


@pytest.fixture(scope="module")
def clean_after(tmp_path_factory, embedder) -> snap.Snapshot:
    home = tmp_path_factory.mktemp("clean")
    run_stages(home, AFTER, embedder)
    return snap.load(home)


@pytest.mark.parametrize("kill_at", ["sync", "extract", "embed", "publish"])
def test_kill_9_mid_ingestion(tmp_path, embedder, clean_after, kill_at):
    home = tmp_path / "home"
    first = run_stages(home, BEFORE, embedder).name
    answer = [
        h.id for h in Retriever.open(home, embedder=embedder).query(QUESTION, top_k=2).passages
    ]

    proc = mp.get_context("spawn").Process(target=_killed_run, args=(str(home), AFTER, kill_at))
    proc.start()
    proc.join(300)
    assert proc.exitcode == -signal.SIGKILL

    retriever = Retriever.open(home, embedder=embedder)
    assert retriever.snapshot.path.name == first and retriever.warning is None
    assert [h.id for h in retriever.query(QUESTION, top_k=2).passages] == answer
    if (
        kill_at == "publish"
    ):  # a complete folder that LATEST never pointed to: reported, not a problem
        assert len(snap.list_versions(home)) == 2
        assert "newer unpublished" in next(
            c.detail for c in diagnose(home, embedder).checks if c.name == "pointer"
        )
    assert diagnose(home, embedder, DoctorConfig(probe=False)).healthy

    resumed = run_stages(home, AFTER, embedder)
    assert snap.latest_name(home) == resumed.name != first
    assert_same_snapshot(snap.load(home), clean_after)
