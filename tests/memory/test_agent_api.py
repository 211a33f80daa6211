"""The agent memory API on a real LanceDB home: writes, revisions, forgetting, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

import qortex_core
from qortex_core.errors import QortexError, QueryError, RecordError
from qortex_core.memory.records import MAX_TEXT_BYTES, MEMORIES
from qortex_core.storage.store import LanceStore

PUMP = "The Orion Pump is serviced by the Delta Crew every spring."
BREAD = "Amber Bread is baked in Tilburg by the Meyer Bakery."
VALVE = "Technicians must check the Vega Valve before starting the Orion Pump."


@pytest.fixture
def mem(tmp_path: Path, embedder):
    return qortex_core.open(tmp_path / "home", embedder=embedder)


def _rows(mem) -> int:
    return LanceStore.open(mem.home).count(MEMORIES)


def test_exported_names_resolve():
    assert set(qortex_core.__all__) >= {"Memory", "MemoryRecord", "Revision", "open"}
    for name in qortex_core.__all__:
        assert getattr(qortex_core, name) is not None
    assert isinstance(qortex_core.open, type(lambda: 0))
    with pytest.raises(AttributeError):
        qortex_core.nothing_here  # noqa: B018


def test_remember_get_list_and_search_without_a_snapshot(mem):
    pump = mem.remember(PUMP, time="2026-03-01T09:30:00Z", domain="engineering", source="chat")
    bread = mem.remember(BREAD, time="2025-06-01", domain="kitchen", metadata={"who": "ana"})
    assert pump.id.startswith("m_") and pump.tier == "fresh" and pump.revision == 1
    assert pump.time == "2026-03-01T09:30:00Z" and pump.source == "chat"
    assert mem.get(bread.id).metadata == {"who": "ana"}
    assert [r.id for r in mem.list()] == [pump.id, bread.id]  # newest event time first
    assert [r.id for r in mem.list(domain="kitchen")] == [bread.id]
    assert [r.id for r in mem.list(since="2026-01-01")] == [pump.id]
    assert [r.id for r in mem.list(until="2025-12-31")] == [bread.id]
    result = mem.search("Who services the Orion Pump?", top_k=2)
    assert result.passages[0].id == pump.id and result.passages[0].tier == "fresh"
    assert result.passages[0].time == pump.time and "no snapshot" in result.fallback
    assert [h.id for h in mem.search("pump", since="2026-01-01").passages] == [pump.id]
    assert [h.id for h in mem.search("bread", domain="kitchen").passages] == [bread.id]


def test_lexical_channel_finds_a_code_the_embedder_does_not_know(mem):
    target = mem.remember("Ticket ZX-4471-QQ was closed by the night shift.")
    for n in range(6):
        mem.remember(f"Ticket number {n} of the support queue was reopened.")
    hits = mem.search("ZX-4471-QQ", top_k=3).passages
    assert hits[0].id == target.id and hits[0].breakdown["lexical"] == 1.0


def test_update_keeps_history_and_search_sees_only_the_new_text(mem):
    record = mem.remember(PUMP)
    updated = mem.update(record.id, "The Orion Pump is serviced by the Gamma Crew every autumn.")
    assert updated.revision == 2 and updated.created_at == record.created_at
    history = mem.history(record.id)
    assert [(h.revision, h.op) for h in history] == [(1, "remember"), (2, "update")]
    assert history[0].text == PUMP and "Gamma" in history[1].text
    assert history[0].writer.startswith("library@")
    hits = mem.search("Which crew services the Orion Pump?", top_k=5).passages
    assert [h.text for h in hits if h.id == record.id] == [updated.text]


def test_forget_removes_from_search_at_once_and_keeps_history(mem):
    keep, gone = mem.remember(VALVE), mem.remember(PUMP)
    assert mem.forget(gone.id).forgotten
    for mode in ("auto", "dense", "hipporag", "hybrid"):
        ids = [h.id for h in mem.search("Orion Pump crew service", top_k=5, mode=mode).passages]
        assert gone.id not in ids and keep.id in ids
    assert mem.get(gone.id).forgotten and gone.id not in [r.id for r in mem.list()]
    assert [h.op for h in mem.history(gone.id)] == ["remember", "forget"]


def test_bad_input_is_one_error_and_loses_nothing(mem, tmp_path):
    record = mem.remember(PUMP)
    before = _rows(mem)
    bad_calls = [
        lambda: mem.remember(""),
        lambda: mem.remember("   \n\t "),
        lambda: mem.remember("x" * (MAX_TEXT_BYTES + 1)),
        lambda: mem.remember(42),
        lambda: mem.remember(BREAD, time="yesterday-ish"),
        lambda: mem.remember(BREAD, time=12),
        lambda: mem.remember(BREAD, domain=""),
        lambda: mem.remember(BREAD, metadata={"x": object()}),
        lambda: mem.get("m_0000000000000000"),
        lambda: mem.history("m_nope"),
        lambda: mem.update("m_nope", BREAD),
        lambda: mem.forget("m_nope"),
        lambda: mem.forget("p_nope"),
        lambda: mem.update(record.id, " "),
        lambda: mem.list(limit=0),
        lambda: mem.list(since="not a time"),
    ]
    for call in bad_calls:
        with pytest.raises(RecordError):
            call()
    with pytest.raises(QueryError):
        mem.search("   ")
    with pytest.raises(QueryError):
        mem.search("pump", min_relevance=2)
    mem.forget(record.id)
    with pytest.raises(RecordError, match="forgotten"):
        mem.forget(record.id)
    with pytest.raises(RecordError, match="forgotten"):
        mem.update(record.id, BREAD)
    assert _rows(mem) == before + 1  # only the forget was written
    assert mem.history(record.id)[0].text == PUMP
    assert issubclass(RecordError, QortexError)


def test_another_tenants_id_is_unknown(tmp_path, embedder):
    a = qortex_core.open(tmp_path / "home", tenant="alice", embedder=embedder)
    b = qortex_core.open(tmp_path / "home", tenant="bob", embedder=embedder)
    record = a.remember(PUMP)
    for call in (b.get, b.history, b.forget, lambda i: b.update(i, BREAD)):
        with pytest.raises(RecordError, match="tenant bob"):
            call(record.id)
    assert b.search("Orion Pump").passages == [] and a.get(record.id).text == PUMP


def test_secrets_are_redacted_before_storage(mem):
    key = "sk-proj-" + "Q" * 32
    record = mem.remember(f"The deploy key is {key} and the db is postgres://app:hunter2pw@db/x")
    assert key not in record.text and "hunter2pw" not in record.text
    assert "[REDACTED]" in record.text
    blob = b"".join(p.read_bytes() for p in Path(mem.home).rglob("*") if p.is_file())
    assert key.encode() not in blob and b"hunter2pw" not in blob


def test_other_processes_writes_are_seen_by_an_open_memory(tmp_path, embedder):
    home = tmp_path / "home"
    reader = qortex_core.open(home, embedder=embedder)
    assert reader.list() == []
    writer = qortex_core.open(home, embedder=embedder)  # a second handle: its own table and state
    record = writer.remember(BREAD)
    import time

    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and not reader.list():
        time.sleep(0.05)
    assert [r.id for r in reader.list()] == [record.id]


def test_remember_many_is_one_batch_all_or_none(mem):
    records = mem.remember_many([PUMP, BREAD, VALVE], domain="batch", time="2026-01-02")
    assert [r.text for r in records] == [PUMP, BREAD, VALVE] and len({r.id for r in records}) == 3
    assert {r.id for r in mem.list(domain="batch")} == {r.id for r in records}
    before = _rows(mem)
    for bad in ([PUMP, "  "], [], PUMP):
        with pytest.raises(RecordError):
            mem.remember_many(bad)
    assert _rows(mem) == before


def test_consolidation_merges_near_duplicates_and_history_keeps_both(mem):
    from qortex_core.memory.consolidate import memory_documents

    first = mem.remember(PUMP)
    same = mem.remember("  " + PUMP.replace(" ", "  ") + " ")  # identical text up to spaces
    near = mem.remember(PUMP.replace("spring.", "spring!"))  # cosine >= 0.95
    other = mem.remember(BREAD)
    cos = float(
        mem.state.vectors[mem.state.live_ids.index(near.id)] @ mem.embedder.embed([PUMP])[0]
    )
    assert cos >= 0.95
    docs = memory_documents(LanceStore.open(mem.home))
    assert set(docs.merged) == {(same.id, first.id), (near.id, first.id)}
    assert sorted(d.doc_id for d in docs.documents) == sorted(
        f"memory:{r.id}" for r in (first, other)
    )
    mem.state.refresh(force=True)
    assert {r.id for r in mem.list()} == {first.id, other.id}
    assert mem.get(same.id).merged_into == first.id and mem.get(same.id).forgotten
    ops = [(h.id, h.op) for h in mem.history(first.id)]
    assert (first.id, "remember") in ops and (same.id, "remember") in ops
    assert (near.id, "remember") in ops and ops.count((first.id, "merge")) == 2
    hits = [h.id for h in mem.search("Who services the Orion Pump?", top_k=5).passages]
    assert first.id in hits and same.id not in hits and near.id not in hits
