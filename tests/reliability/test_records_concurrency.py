"""Records under concurrency and purge: revisions unique and gap-free, forget final, no
acknowledged write lost while purge rewrites the table, readers that survive a purge.

Real processes (spawned), a real LanceDB home on disk; the hash embedder keeps each writer
process light (no model to load).
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pyarrow.compute as pc
import pytest

from qortex_core.agent.api import open_memory
from qortex_core.embed import make_embedder
from qortex_core.errors import RecordError, RevisionConflict
from qortex_core.memory.consolidate import memory_documents
from qortex_core.memory.records import MEMORIES
from qortex_core.ops.purge import purge
from qortex_core.query.retriever import Retriever
from qortex_core.storage.store import LanceStore

SPEC = "hash:64"
MODES = ("auto", "dense", "hipporag", "hybrid", "lexical", "text", "textwalk")


def _mem(home):
    return open_memory(home, embedder=make_embedder(SPEC))


def _rows(home: Path, rid: str) -> list[dict]:
    table = LanceStore.open(home).open_latest(MEMORIES).to_arrow()
    mine = table.filter(pc.equal(table["id"], rid)).drop_columns(["vector"])
    return sorted(mine.to_pylist(), key=lambda r: r["revision"])


# -- workers (module level: spawned processes import them) --------------------------------
def _remember_loop(home: str, n: int, start, outbox) -> None:
    mem = _mem(home)
    start.wait()
    acked = []
    for i in range(n):
        acked.append(mem.remember(f"writer note {i}: the pump in bay {i} was checked").id)
    outbox.put(acked)


def _read_loop(home: str, start, stop, outbox) -> None:
    """A reader: a new handle lists and searches again and again until told to stop."""
    start.wait()
    reads = 0
    while not stop.is_set():
        mem = _mem(home)
        mem.list(limit=1000)
        mem.search("pump in bay", top_k=3, mode="auto")
        reads += 1
    outbox.put(("reads", reads))


def _revise(home: str, rid: str, action: str, start, outbox) -> None:
    mem = _mem(home)
    mem.get(rid)  # warm: the state is loaded before the race starts
    start.wait()
    try:
        if action == "forget":
            outbox.put((action, mem.forget(rid).revision, None))
        else:
            outbox.put((action, mem.update(rid, f"revised by {action}").revision, None))
    except RecordError as exc:
        outbox.put((action, None, str(exc)))


def _race(home: Path, rid: str, actions: tuple[str, ...]) -> list[tuple]:
    ctx = mp.get_context("spawn")
    start, outbox = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_revise, args=(str(home), rid, a, start, outbox)) for a in actions]
    for p in procs:
        p.start()
    start.set()
    results = [outbox.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


# -- item 2: concurrent updates ----------------------------------------------------------
def test_concurrent_updates_get_unique_gap_free_revisions_and_none_is_lost(tmp_path: Path):
    home = tmp_path / "home"
    mem = _mem(home)
    for round_ in range(3):
        rid = mem.remember(f"round {round_}: the standup is at nine").id
        results = _race(home, rid, ("update-a", "update-b"))
        returned = sorted(rev for _, rev, _ in results)
        assert returned == [2, 3], results  # each caller told a distinct revision
        rows = _rows(home, rid)
        assert [r["revision"] for r in rows] == [1, 2, 3]
        newest = {action: rev for action, rev, _ in results}
        winner = max(newest, key=lambda a: newest[a])
        assert mem.get(rid).text == f"revised by {winner}"  # the later write is the state


# -- item 3: forget racing update ----------------------------------------------------------
def test_forget_racing_update_always_ends_forgotten_and_purge_blanks_only_it(tmp_path: Path):
    home = tmp_path / "home"
    mem = _mem(home)
    kept = mem.remember("the north gate code changes on mondays").id
    for round_ in range(3):
        rid = mem.remember(f"round {round_}: the spare key is under the mat").id
        results = {action: (rev, err) for action, rev, err in _race(home, rid, ("forget", "u"))}
        assert results["forget"][0] is not None  # forget is never refused here
        if results["u"][0] is not None:  # the update went first
            assert results["u"][0] < results["forget"][0]
        else:
            assert "forgotten" in results["u"][1]
        assert _mem(home).get(rid).forgotten
        with pytest.raises(RecordError, match="forgotten"):
            mem.update(rid, "too late")
    purge(home)
    table = LanceStore.open(home).open_latest(MEMORIES).to_arrow()
    live_text = table.filter(pc.equal(table["id"], kept))["text"].to_pylist()
    assert live_text == ["the north gate code changes on mondays"]
    gone = table.filter(pc.invert(pc.equal(table["id"], kept)))
    assert set(gone["text"].to_pylist()) == {""}


def test_expected_revision_is_checked_and_a_conflict_is_typed(tmp_path: Path):
    mem = _mem(tmp_path / "home")
    rid = mem.remember("the bus leaves at seven").id
    assert mem.update(rid, "the bus leaves at eight", expected_revision=1).revision == 2
    with pytest.raises(RevisionConflict, match="expected revision 1"):
        mem.update(rid, "the bus leaves at six", expected_revision=1)
    with pytest.raises(RevisionConflict):
        mem.forget(rid, expected_revision=1)
    with pytest.raises(RecordError, match="expected_revision"):
        mem.update(rid, "x", expected_revision=0)
    assert mem.forget(rid, expected_revision=2).forgotten
    assert [r.revision for r in mem.history(rid)] == [1, 2, 3]


# -- item 1: writers during purge ----------------------------------------------------------
def test_no_acknowledged_write_is_lost_while_purge_runs(tmp_path: Path):
    home = tmp_path / "home"
    mem = _mem(home)
    victim = mem.remember("the old alarm code is 4471").id
    mem.forget(victim)
    ctx = mp.get_context("spawn")
    start, outbox = ctx.Event(), ctx.Queue()
    stop, reads = ctx.Event(), ctx.Queue()
    writers = [
        ctx.Process(target=_remember_loop, args=(str(home), 40, start, outbox)) for _ in range(2)
    ]
    reader = ctx.Process(target=_read_loop, args=(str(home), start, stop, reads))
    for p in [*writers, reader]:
        p.start()
    start.set()
    purges = 0
    while any(p.is_alive() for p in writers) or purges < 2:
        purge(home)
        purges += 1
    acked = [rid for _ in writers for rid in outbox.get(timeout=120)]
    stop.set()
    assert reads.get(timeout=120)[1] >= 1  # the reader read on through every purge
    for p in [*writers, reader]:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(acked) == 80
    after = _mem(home)
    live = {r.id for r in after.list(limit=1000)}
    assert set(acked) <= live
    assert after.remember("written after the purges").id in {r.id for r in after.list(limit=1000)}
    for mode in MODES:  # a Memory opened before the purges (fresh tier) answers in every mode
        assert mem.search("pump in bay 7", top_k=3, mode=mode).passages, mode
    table = LanceStore.open(home).open_latest(MEMORIES).to_arrow()
    assert "4471" not in " ".join(table["text"].to_pylist())


# -- item 7: absorbed duplicates ----------------------------------------------------------
def test_forgetting_a_survivor_purges_the_copies_merged_into_it(tmp_path: Path):
    home = tmp_path / "home"
    mem = _mem(home)
    old = mem.remember("Marta keeps the vault key 5512 in the blue box").id
    young = mem.remember("Marta keeps the vault key 5512 in the blue box").id
    assert memory_documents(LanceStore.open(home)).merged == ((young, old),)
    assert _mem(home).get(young).merged_into == old
    mem.forget(old)
    assert mem.forget(young).forgotten  # an absorbed copy may be forgotten too (was refused)
    other = mem.remember("Ola keeps the spare badge").id
    purge(home)
    table = LanceStore.open(home).open_latest(MEMORIES).to_arrow()
    assert "5512" not in " ".join(table["text"].to_pylist())
    assert all("5512" not in r.text for r in _mem(home).history(old))
    assert _mem(home).get(other).text == "Ola keeps the spare badge"


def test_purge_of_an_absorbed_copy_follows_chains_of_merges(tmp_path: Path):
    home = tmp_path / "home"
    mem = _mem(home)
    first = mem.remember("the safe combination is 9034 left right left").id
    memory_documents(LanceStore.open(home))
    second = mem.remember("the safe combination is 9034 left right left").id
    memory_documents(LanceStore.open(home))
    assert _mem(home).get(second).merged_into == first
    mem.forget(first)
    purge(home)
    table = LanceStore.open(home).open_latest(MEMORIES).to_arrow()
    assert "9034" not in " ".join(table["text"].to_pylist())


# -- item 4: readers during purge ----------------------------------------------------------


def test_an_open_retriever_answers_in_every_mode_after_a_purge(toy_home: Path, embedder):
    from conftest import BRIDGE_QUESTION

    retriever = Retriever.open(toy_home, embedder=embedder)
    before = {m: [h.id for h in retriever.query(BRIDGE_QUESTION, mode=m).passages] for m in MODES}
    purge(toy_home)
    purge(toy_home)  # twice: the version a reader reopened is cleaned again
    after = {m: [h.id for h in retriever.query(BRIDGE_QUESTION, mode=m).passages] for m in MODES}
    assert after == before
