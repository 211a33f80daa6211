"""Agent memories through the pipeline: the issue's scenario, the sensor, and kill -9 of a writer
and of a consolidation (real processes, a real Dagster instance, LanceDB on disk)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, RunRequest, SkipReason, build_sensor_context

import pipelines.resources as resources
import qortex_core
from pipelines.resources import StoreResource
from pipelines.sensors import make_memories_sensor
from qortex_cli.runs.local import run_ingest
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap

MODES = ("auto", "dense", "hipporag", "hybrid")
FORGET = ("The Zorblat Engine was repaired by Inga Moss on the north pier.", "2026-01-10")
UPDATE = ("Quillon Dam supplies power to the town of Fennick.", "2026-02-20")
KEEP = ("The Ventra Bridge was painted red by the Osk Brothers.", "2026-03-05")
QUERIES = {
    FORGET[0]: "Who repaired the Zorblat Engine?",
    UPDATE[0]: "Which town does Quillon Dam supply with power?",
    KEEP[0]: "Who painted the Ventra Bridge?",
}


@pytest.fixture
def shared_model(monkeypatch, embedder):
    """The pipeline's embedder resource reuses the session's loaded model."""
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    return embedder


def _files_home(tmp_path: Path) -> Path:
    src = tmp_path / "src" / "engineering"
    src.mkdir(parents=True)
    (src / "pump.md").write_text(
        "# Orion Pump\n\nThe Orion Pump is serviced by the Delta Crew every spring.\n"
    )
    (src / "valve.md").write_text(
        "# Vega Valve\n\nThe Vega Valve regulates the Orion Pump outflow at Cedar Ridge.\n"
    )
    home = tmp_path / "home"
    run_ingest(src.parent, home, progress=False)
    return home


def _reader(home: str, inbox, outbox) -> None:
    """Another process: gets (record id, query, wall time written), polls search until found."""
    mem = qortex_core.open(home)
    mem.search("warm up", top_k=1)
    outbox.put("ready")
    for rid, query, written in iter(inbox.get, None):
        while rid not in [h.id for h in mem.search(query, top_k=3).passages]:
            if time.time() - written > 10:
                break
            time.sleep(0.01)
        outbox.put((rid, time.time() - written))


def _hits(mem, query: str, mode: str) -> list:
    return mem.search(query, top_k=5, mode=mode).passages


def test_scenario_remember_revise_forget_consolidate(tmp_path, shared_model):
    home = _files_home(tmp_path)
    first_snapshot = snap.latest_name(home)
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(home), inbox, outbox))
    reader.start()
    assert outbox.get(timeout=300) == "ready"
    mem = qortex_core.open(home, embedder=shared_model)
    records = {}
    for text, when in (FORGET, UPDATE, KEEP):
        records[text] = mem.remember(text, time=when, domain="notes")
        inbox.put((records[text].id, QUERIES[text], time.time()))
    seen = dict(outbox.get(timeout=60) for _ in records)
    inbox.put(None)
    reader.join(60)
    assert set(seen) == {r.id for r in records.values()} and max(seen.values()) <= 1.0

    forget, update, keep = (records[t[0]] for t in (FORGET, UPDATE, KEEP))
    new_text = "Quillon Dam supplies power to the towns of Fennick and Harrow."
    mem.update(update.id, new_text)
    assert [(h.revision, h.op) for h in mem.history(update.id)] == [(1, "remember"), (2, "update")]
    mem.forget(forget.id)
    for mode in MODES:
        assert forget.id not in [h.id for h in _hits(mem, QUERIES[FORGET[0]], mode)]
        top = _hits(mem, QUERIES[KEEP[0]], mode)[0]
        assert (top.id, top.tier) == (keep.id, "fresh")
        texts = [h.text for h in _hits(mem, QUERIES[UPDATE[0]], mode)]
        assert new_text in texts and UPDATE[0] not in texts

    outcome = run_ingest(None, home, progress=False)
    assert outcome.summary["memories"] == 2 and all(outcome.checks.values())
    mem.table.version()  # the handle moves to the newest commit
    fts = [i for i in mem.table._open().list_indices() if i.index_type == "FTS"]
    assert fts and fts[0].num_unindexed_rows == 0  # consolidation folded writes into the index
    loaded = snap.load(home)
    assert loaded.manifest["name"] != first_snapshot
    texts = loaded.tables["passages"]["text"].to_pylist()
    assert KEEP[0] in texts and new_text in texts and FORGET[0] not in texts
    assert UPDATE[0] not in texts and "The Orion Pump is serviced" in " ".join(texts)
    names = " ".join(loaded.tables["nodes"]["name"].to_pylist()).lower()
    facts = " ".join(str(r) for r in loaded.tables["facts"].to_pylist()).lower()
    assert "zorblat" not in names and "zorblat" not in facts and "ventra" in names
    time.sleep(0.25)  # the open memory notices the new LATEST within its check interval
    for text, rid in ((KEEP[0], keep.id), (new_text, update.id)):
        result = mem.search(
            QUERIES[KEEP[0]] if rid == keep.id else QUERIES[UPDATE[0]], 3, "hipporag"
        )
        top = result.passages[0]
        assert top.text == text and top.tier == "graph" and result.seeds and top.seeds
        assert mem.get(rid).tier == "graph"
    assert forget.id not in [r.id for r in mem.list()] and mem.get(forget.id).forgotten


def test_forgetting_a_file_passage_hides_it_until_the_file_changes(tmp_path, shared_model):
    home = _files_home(tmp_path)
    mem = qortex_core.open(home, embedder=shared_model)
    hit = _hits(mem, "Who services the Orion Pump?", "dense")[0]
    assert hit.id.startswith("p_") and "Delta Crew" in hit.text
    assert mem.get(hit.id).source == "engineering/pump.md"
    mem.forget(hit.id)
    for mode in MODES:
        assert hit.id not in [h.id for h in _hits(mem, "Who services the Orion Pump?", mode)]
    assert [r.op for r in mem.history(hit.id)] == ["ingest", "forget"]
    run_ingest(None, home, progress=False)  # consolidation keeps it out of the next snapshot
    assert hit.id not in snap.load(home).tables["passages"]["id"].to_pylist()
    pump = tmp_path / "src" / "engineering" / "pump.md"
    pump.write_text(pump.read_text() + "\nThe Delta Crew also checks the seals.\n")
    run_ingest(tmp_path / "src", home, progress=False)
    fresh = qortex_core.open(home, embedder=shared_model)
    texts = [h.text for h in _hits(fresh, "Who services the Orion Pump?", "dense")]
    assert any("Delta Crew" in t for t in texts)  # the file changed: its passage is back


def test_memories_sensor_requests_a_run_when_the_table_moves(tmp_path, embedder):
    home = tmp_path / "home"
    store = StoreResource(home=str(home))
    sensor_def = make_memories_sensor({})
    with DagsterInstance.ephemeral() as instance:
        first = sensor_def(build_sensor_context(instance=instance, resources={"store": store}))
        assert isinstance(first, SkipReason)
        qortex_core.open(home, embedder=embedder).remember(KEEP[0])
        ctx = build_sensor_context(instance=instance, resources={"store": store})
        assert isinstance(sensor_def(ctx), RunRequest)
        again = build_sensor_context(
            instance=instance, resources={"store": store}, cursor=ctx.cursor
        )
        assert isinstance(sensor_def(again), SkipReason)


def _remember_then_die(home: str, text: str, outbox) -> None:
    record = qortex_core.open(home).remember(text)
    outbox.put(record.id)
    os.kill(os.getpid(), signal.SIGKILL)


def _consolidate_then_die(home: str) -> None:
    import sys

    import assets  # noqa: F401  (the package re-exports the asset under the module's name)

    synonym_asset = sys.modules["assets.synonym_edges"]

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    synonym_asset.build_synonyms = die  # killed after chunks, extractions and embeddings ran
    run_ingest(None, home, progress=False)


@pytest.mark.slow
def test_kill_9_after_remember_and_during_consolidation(tmp_path, shared_model):
    home = _files_home(tmp_path)
    first = snap.latest_name(home)
    ctx = mp.get_context("spawn")
    outbox = ctx.SimpleQueue()  # written synchronously: the id is out before the kill
    writer = ctx.Process(target=_remember_then_die, args=(str(home), KEEP[0], outbox))
    writer.start()
    writer.join(300)
    rid = outbox.get()
    assert writer.exitcode == -signal.SIGKILL
    mem = qortex_core.open(home, embedder=shared_model)
    assert mem.get(rid).text == KEEP[0]

    killed = ctx.Process(target=_consolidate_then_die, args=(str(home),))
    killed.start()
    killed.join(300)
    assert killed.exitcode == -signal.SIGKILL
    assert snap.latest_name(home) == first
    answer = Retriever.open(home, embedder=shared_model).query("Who services the Orion Pump?", 1)
    assert "Delta Crew" in answer.passages[0].text and answer.snapshot == first
    top = _hits(mem, QUERIES[KEEP[0]], "auto")[0]
    assert (top.id, top.tier) == (rid, "fresh")
    run_ingest(None, home, progress=False)  # the next consolidation completes
    time.sleep(0.25)
    assert _hits(mem, QUERIES[KEEP[0]], "auto")[0].tier == "graph"
