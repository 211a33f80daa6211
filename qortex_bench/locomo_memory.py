"""LoCoMo through the agent write path: one memory per turn, then consolidation into the graph.

``qortex eval --locomo FILE... --locomo-via memory``: each conversation's turns are written into
its tenant with :meth:`~qortex_core.agent.api.Memory.remember_many` (the turn's text as
:attr:`~qortex_bench.locomo.Turn.memory_text`, the session's date as event time plus one second
per turn so the turns keep their order, ``{"dia_id", "conversation"}`` as metadata), then
consolidated the way the ``documents`` asset does it (near-duplicates merged, one document
``memory:<id>`` per live record) and run through the same stages as files. Evidence turn ids
map to passages through the records' metadata: dia_id -> record (-> the record it was merged
into) -> its document's passage.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from qortex_bench.locomo_data import Conversation, Turn

SECOND = timedelta(seconds=1)


def turn_times(turns: tuple[Turn, ...]) -> list[str | None]:
    """Each turn's event time: its session's time plus its place in the session, in seconds."""
    out: list[str | None] = []
    place: dict[int, int] = {}
    for turn in turns:
        n = place[turn.session] = place.get(turn.session, -1) + 1
        if turn.time is None:
            out.append(None)
            continue
        start = datetime.strptime(turn.time, "%Y-%m-%dT%H:%M:%SZ")
        out.append((start + n * SECOND).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return out


def _write(conv: Conversation, home: Path, embedder) -> None:
    """Write the turns as memories into the conversation's tenant, unless it holds them already.

    Raises:
        DatasetError: the tenant holds memories of something else.
    """
    from qortex_core.agent.api import open_memory
    from qortex_core.errors import DatasetError, HomeError
    from qortex_core.ingest.documents import read_stored_documents
    from qortex_core.storage.store import LanceStore
    from qortex_core.storage.tenants import tenant_home

    where = Path(tenant_home(home, conv.name))
    store = LanceStore.open(where)
    learned = [
        t for t in ("feedback_events", "teleportation_factors") if store.open_latest(t) is not None
    ]
    if learned or any(d.kind != "memory" for d in read_stored_documents(store)):
        raise HomeError(f"data home {where} holds ingested files or feedback: pass another --home")
    mem = open_memory(home, tenant=conv.name, embedder=embedder)
    turns = {r.metadata.get("dia_id") for r in mem.list(limit=10_000)}
    if not turns and store.open_latest("chunks") is not None:
        raise HomeError(
            f"data home {where} holds an index not made of memories: pass another --home"
        )
    if not turns:
        mem.remember_many(
            [t.memory_text for t in conv.turns],
            time=turn_times(conv.turns),
            source=conv.name,
            metadata=[{"dia_id": t.dia_id, "conversation": conv.name} for t in conv.turns],
        )
    elif None in turns:
        raise DatasetError(f"tenant {conv.name} holds memories that are no turn of {conv.path}")


def _records_of_turns(where: Path) -> dict[str, str]:
    """dia_id -> the live record that holds the turn (its own, or the one it was merged into)."""
    import json

    from qortex_core.memory.consolidate import load_state
    from qortex_core.storage.store import LanceStore

    state = load_state(LanceStore.open(where))
    into = {rid: row["target"] for rid, row in state.current.items() if row["op"] == "merged"}
    out = {}
    for rid, row in state.current.items():
        dia_id = json.loads(row["metadata"] or "{}").get("dia_id")
        survivor, hops = rid, 0
        while survivor in into and hops < 100:  # merges may chain
            survivor, hops = into[survivor], hops + 1
        if dia_id:
            out[dia_id] = survivor
    return out


def consolidate_home(where: Path, embedder, graph_config, extractor) -> Path:
    """The tenant's memories merged, made documents, chunked and run through every stage;
    the published snapshot's path."""
    from qortex_core.ingest import stages
    from qortex_core.memory.consolidate import memory_documents
    from qortex_core.storage.store import LanceStore

    store = LanceStore.open(where)
    run = stages.IngestRun(
        store, where, extractor, embedder, memories=lambda: memory_documents(store).documents
    )
    if graph_config is not None:
        run = replace(run, graph_config=graph_config)
    report = stages.run_stages(run)["graph_snapshot"]
    assert isinstance(report, stages.SnapshotReport)
    return report.path


def remember_conversation(
    conv: Conversation, home: Path, embedder, graph_config=None, observations: bool = True
) -> tuple[dict, dict[str, str]]:
    """Write a conversation as memories and consolidate them (``observations``: the file's
    observations as recorded facts, :func:`~qortex_bench.locomo_facts.extractor_for`); its index
    report and the passage of each turn (dia_id -> passage id)."""
    from qortex_bench.locomo_facts import extractor_for
    from qortex_core.memory.records import DOC_PREFIX
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.tenants import tenant_home

    t = time.perf_counter()
    _write(conv, home, embedder)
    where = Path(tenant_home(home, conv.name))
    path = consolidate_home(where, embedder, graph_config, extractor_for(conv, observations))
    records = _records_of_turns(where)
    passages = snap.load(where, path.name).tables["passages"].to_pylist()
    passage_of = {p["doc_id"]: p["id"] for p in passages}
    where_turn = {
        dia_id: passage_of[DOC_PREFIX + rid]
        for dia_id, rid in records.items()
        if DOC_PREFIX + rid in passage_of
    }
    report = {
        "file": str(conv.path),
        "tenant": conv.name,
        "via": "memory",
        "turns": len(conv.turns),
        "memories": len(set(records.values())),
        "merged": len(records) - len(set(records.values())),
        "passages": len(set(where_turn.values())),
        "questions": len(conv.questions),
        "adversarial": len(conv.adversarial),
        "no_evidence": conv.no_evidence,
        "observations": len(conv.observations) if observations else 0,
        "snapshot": path.name,
        "index_s": round(time.perf_counter() - t, 3),
    }
    return report, where_turn
