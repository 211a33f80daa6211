"""kill -9 during supersession: a writer killed in the middle of a run of superseding remembers,
and a consolidation killed before its snapshot; every question still answers, nothing written
is lost (real processes, SIGKILL, LanceDB on disk)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest

import qortex_core

CITIES = ("Bergen", "Lyon", "Porto", "Graz", "Turin", "Quito", "Oslo", "Split", "Tartu", "Nantes")
HOME_Q = "Where does Goran Lindqvist live now?"
CAR = ("Goran Lindqvist drives a Volvo XC40.", "2022-12-01T09:00:00Z")
CAR_Q = "What car does Goran Lindqvist drive?"


def _when(i: int) -> str:
    return f"2023-{i % 12 + 1:02d}-{i // 12 + 1:02d}T09:00:00Z"


def _move_until_killed(home: str, outbox) -> None:
    """Remember moves one after another, each id out once durable, until killed."""
    mem = qortex_core.open(home)
    for i, city in enumerate(CITIES[1:] * 20, start=1):
        outbox.put(mem.remember(f"Goran Lindqvist moved to {city}.", time=_when(i)).id)


def _consolidate_then_die(home: str) -> None:
    """Consolidation killed after chunks, extractions and embeddings, before the snapshot."""
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.embed import make_embedder
    from qortex_core.ingest import stages
    from qortex_core.ingest.extract import OfflineExtractor

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    stages.sync_synonyms = die
    consolidate_home(Path(home), make_embedder(None), None, OfflineExtractor())


def _answers(mem) -> tuple[str, str]:
    """The top answers to the two questions (both must answer)."""
    where = mem.search(HOME_Q, top_k=5, min_relevance=0).passages
    car = mem.search(CAR_Q, top_k=5, min_relevance=0).passages
    assert where and car
    return where[0].text, car[0].text


@pytest.mark.slow
def test_kill_9_of_a_writer_mid_supersession_leaves_every_question_answered(tmp_path, embedder):
    home = tmp_path / "home"
    mem = qortex_core.open(home, embedder=embedder)
    first = mem.remember("Goran Lindqvist lives in Bergen.", time=_when(0))
    mem.remember(CAR[0], time=CAR[1])
    ctx = mp.get_context("spawn")
    outbox = ctx.SimpleQueue()
    writer = ctx.Process(target=_move_until_killed, args=(str(home), outbox))
    writer.start()
    durable = [outbox.get() for _ in range(4)]  # four moves written, the fifth under way
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(60)
    assert writer.exitcode == -signal.SIGKILL
    while not outbox.empty():
        durable.append(outbox.get())

    after = qortex_core.open(home, embedder=embedder)
    moves = [r for r in after.list(include_superseded=True) if "moved to" in r.text]
    assert {r.id for r in moves} >= set(durable)  # nothing acknowledged is lost
    newest = max(moves, key=lambda r: r.time)
    assert _answers(after) == (newest.text, CAR[0])  # the latest move, the car untouched
    for record in [after.get(first.id), *(r for r in moves if r.id != newest.id)]:
        assert record.superseded_by is not None and len(after.history(record.id)) == 1
    again = after.remember("Goran Lindqvist moved to Riga.", time="2030-01-01T00:00:00Z")
    assert _answers(after)[0] == again.text and after.get(newest.id).superseded_by == again.id


@pytest.mark.slow
def test_kill_9_of_a_consolidation_leaves_every_question_answered(tmp_path, embedder):
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.errors import SnapshotError
    from qortex_core.ingest.extract import OfflineExtractor
    from qortex_core.storage import snapshot as snap

    home = tmp_path / "home"
    mem = qortex_core.open(home, embedder=embedder)
    old = mem.remember("Goran Lindqvist lives in Bergen.", time=_when(0))
    new = mem.remember("Goran Lindqvist moved to Lyon.", time=_when(5))
    mem.remember(CAR[0], time=CAR[1])
    killed = mp.get_context("spawn").Process(target=_consolidate_then_die, args=(str(home),))
    killed.start()
    killed.join(300)
    assert killed.exitcode == -signal.SIGKILL
    with pytest.raises(SnapshotError):  # nothing published
        snap.latest_name(home)

    after = qortex_core.open(home, embedder=embedder)
    assert _answers(after) == (new.text, CAR[0])
    then = after.search(HOME_Q, top_k=3, min_relevance=0, as_of=_when(2)).passages
    assert then[0].id == old.id and then[0].superseded_by == new.id
    consolidate_home(home, embedder, None, OfflineExtractor())  # the next one completes
    graph = qortex_core.open(home, embedder=embedder)
    assert _answers(graph) == (new.text, CAR[0])
    assert graph.search(HOME_Q, top_k=1, min_relevance=0).passages[0].tier == "graph"
