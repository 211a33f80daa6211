"""Faults of the incremental snapshot: ``kill -9`` in the middle of a merge leaves the previous
snapshot answering and the next run completes it; a base that cannot be used (damaged, missing)
makes a full build that says why, in one log line and in the report."""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import signal
from pathlib import Path

import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(64))
SYNTH = SynthCorpus(SynthConfig(passages=90, seed=7))
BEFORE, AFTER = SYNTH.passages()[:80], SYNTH.passages()[5:]
QUERIES = SYNTH.queries(8)


def _run(home: Path, passages) -> dict[str, object]:
    run = index.IngestRun(LanceStore.open(home), home, OfflineExtractor(), EMBED, passages)
    return index.run_stages(run)


def _answers(home: Path) -> list[list[str]]:
    retriever = Retriever.open(home, embedder=EMBED)
    return [[h.id for h in retriever.query(q, top_k=10, mode="hipporag").passages] for q in QUERIES]


@pytest.fixture(scope="module")
def clean_after(tmp_path_factory) -> list[list[str]]:
    """The answers of a full build over the final corpus."""
    home = tmp_path_factory.mktemp("clean")
    assert _run(home, AFTER)["graph_snapshot"].mode == "full"
    return _answers(home)


def _killed_merge(home: str) -> None:
    """A run over AFTER that SIGKILLs itself once the first table's vectors are merged."""
    import os

    from qortex_core.ingest import snapshot_read

    merge = snapshot_read.write_merged
    calls = []

    def merge_then_die(*args, **kwargs):
        if calls:
            os.kill(os.getpid(), signal.SIGKILL)
        calls.append(merge(*args, **kwargs))
        return calls[-1]

    snapshot_read.write_merged = merge_then_die  # type: ignore[assignment]
    _run(Path(home), AFTER)


def test_kill_9_mid_merge_keeps_the_previous_snapshot_and_the_next_run_completes(
    tmp_path, clean_after
):
    _run(tmp_path, BEFORE)
    first, answers = snap.latest_name(tmp_path), _answers(tmp_path)

    proc = mp.get_context("spawn").Process(target=_killed_merge, args=(str(tmp_path),))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL

    assert Retriever.open(tmp_path, embedder=EMBED).snapshot.path.name == first
    assert _answers(tmp_path) == answers
    resumed = _run(tmp_path, AFTER)["graph_snapshot"]
    assert resumed.mode == "incremental" and snap.latest_name(tmp_path) == resumed.name != first
    assert _answers(tmp_path) == clean_after


def _damage(home: Path) -> None:
    latest = snap.snapshots_dir(home) / snap.latest_name(home)
    target = latest / "phrase_vectors.npy"
    data = bytearray(target.read_bytes())
    data[-8:] = bytes(8 * [0xFF])
    target.write_bytes(bytes(data))


def _remove(home: Path) -> None:
    shutil.rmtree(snap.snapshots_dir(home) / snap.latest_name(home))


@pytest.mark.parametrize("fault", [_damage, _remove], ids=["damaged", "missing"])
def test_an_unusable_base_makes_a_full_build_that_says_why(tmp_path, clean_after, caplog, fault):
    _run(tmp_path, BEFORE)
    fault(tmp_path)

    with caplog.at_level(logging.INFO, logger="qortex_core.ingest"):
        report = _run(tmp_path, AFTER)["graph_snapshot"]

    assert report.mode == "full" and report.reason.startswith("previous snapshot unusable: ")
    lines = [r.getMessage() for r in caplog.records if "graph_snapshot" in r.getMessage()]
    assert lines == [f"graph_snapshot: full build: {report.reason}"]
    assert _answers(tmp_path) == clean_after
