"""Time through the pipeline: documents -> chunks -> passages -> snapshot, the since/until
window in every mode, a hit's time, and the ``recent`` profile."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from qortex_cli.main import main
from qortex_core.ingest import stages
from qortex_core.ingest.chunking import chunk_documents
from qortex_core.ingest.documents import SourceConfig, load_documents
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.query import modes
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage import times
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CHUNKS, LanceStore

OLD = dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
_NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
MIDDLE = (_NOW - dt.timedelta(days=40)).date()  # a bare date: midnight UTC
NEWER = _NOW - dt.timedelta(days=2, hours=3)  # given with a +01:00 offset below
MIDDLE_ISO, NEWER_ISO = times.parse_time(MIDDLE), times.iso(NEWER)
CORPUS = [
    {"title": "Orion Pump", "text": "Mara Quell serviced the Orion Pump in Velmora.",
     "date": MIDDLE.isoformat()},
    {"title": "Orion Pump", "text": "Mara Quell serviced the Orion Pump again in Lune.",
     "time": NEWER.astimezone(dt.timezone(dt.timedelta(hours=1))).isoformat()},
    {"title": "Brisk Valve", "text": "The Brisk Valve in Keldor needs no service."},
]  # fmt: skip


def _write_source(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    note = root / "ops" / "notes.md"
    note.write_text("# Velmora station\n\nThe Velmora station hosts the Orion Pump.\n")
    os.utime(note, (OLD.timestamp(), OLD.timestamp()))
    corpus = root / "corpus.json"
    corpus.write_text(json.dumps(CORPUS))
    os.utime(corpus, (OLD.timestamp(), OLD.timestamp()))
    return root


@pytest.fixture(scope="module")
def timed_home(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("timed")
    docs = load_documents(SourceConfig(_write_source(root / "src")))
    home = root / "home"
    store = LanceStore.open(home)
    stages.build_index(store, home, chunk_documents(docs.documents), OfflineExtractor(), embedder)
    return home


def test_documents_carry_event_times(tmp_path):
    docs = load_documents(SourceConfig(_write_source(tmp_path / "src")))
    found = {s.text: s.time for d in docs.documents for s in d.sections}
    assert found["The Velmora station hosts the Orion Pump."] == "2020-01-02T03:04:05Z"
    assert found[CORPUS[2]["text"]] == "2020-01-02T03:04:05Z"  # no date field: the file's mtime
    assert set(found.values()) == {
        "2020-01-02T03:04:05Z",  # the markdown file's mtime; the corpus entry without a date
        MIDDLE_ISO,
        NEWER_ISO,
    }
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "c.json").write_text(json.dumps([{"title": "x", "text": "y", "date": "someday"}]))
    skipped = load_documents(SourceConfig(bad)).skipped
    assert len(skipped) == 1 and "corpus entry 0: 'date'" in skipped[0].reason


def test_times_reach_chunks_passages_and_snapshot(timed_home):
    store = LanceStore.open(timed_home)
    chunks = store.read(CHUNKS).to_pylist()
    assert {c["time"] for c in chunks} == {
        "2020-01-02T03:04:05Z",
        MIDDLE_ISO,
        NEWER_ISO,
    }
    assert all(times.parse_time(c["ingested_at"]) == c["ingested_at"] for c in chunks)
    table = snap.load_latest_good(timed_home)[0].tables["passages"]
    assert {"time", "ingested_at"} <= set(table.schema.names)
    assert sorted(table["time"].to_pylist()) == sorted(c["time"] for c in chunks)
    before = {c["id"]: c["ingested_at"] for c in chunks}
    stages.sync_chunks(store, stages.read_chunks(store))  # unchanged: ingest times stay
    assert {c["id"]: c["ingested_at"] for c in store.read(CHUNKS).to_pylist()} == before


def test_chunks_table_from_before_times_gains_the_columns(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    old = Passage("An old chunk about Brisk.", "Old")
    store.upsert(
        CHUNKS,
        pa.table({"id": [old.id], "doc_id": ["a"], "title": ["Old"], "text": [old.text],
                  "domain": ["default"]}),
    )  # fmt: skip
    new = Passage("A new chunk about Lune.", "New", "b", time="2024-02-03T00:00:00Z")
    report = stages.sync_chunks(store, [Passage(old.text, "Old", "a"), new])
    assert report.added == 1 and report.removed == 0
    rows = {r["title"]: r for r in store.read(CHUNKS).to_pylist()}
    assert rows["Old"]["time"] is None and rows["Old"]["ingested_at"] is None  # unknown
    assert rows["New"]["time"] == "2024-02-03T00:00:00Z" and rows["New"]["ingested_at"]
    assert [p.time for p in stages.read_chunks(store) if p.title == "New"] == [new.time]


@pytest.mark.parametrize("mode", modes.names())
def test_since_until_filter_results_in_every_mode(timed_home, embedder, mode):
    retriever = Retriever.open(timed_home, embedder=embedder)
    query = "Who serviced the Orion Pump?"
    everything = retriever.query(query, top_k=10, mode=mode)
    assert len(everything.passages) == 4 and all(h.time for h in everything.passages)
    since = (MIDDLE + dt.timedelta(days=1)).isoformat()
    recent = retriever.query(query, top_k=10, mode=mode, since=since)
    assert [h.time for h in recent.passages] == [NEWER_ISO]
    day = MIDDLE.isoformat()
    middle = retriever.query(query, top_k=10, mode=mode, since=day, until=day)
    assert [h.time for h in middle.passages] == [MIDDLE_ISO]
    assert retriever.query(query, top_k=10, mode=mode, until="2019-12-31").passages == []


def test_recent_profile_uses_event_time(timed_home, embedder):
    retriever = Retriever.open(timed_home, embedder=embedder)
    query = "Mara Quell serviced the Orion Pump"
    hits = retriever.query(query, top_k=10, mode="dense", profile="recent").passages
    recency = {h.time: h.breakdown["recency"] for h in hits}
    assert recency[NEWER_ISO] > recency[MIDDLE_ISO] > 0
    assert recency[MIDDLE_ISO] > recency["2020-01-02T03:04:05Z"]
    assert hits[0].time == NEWER_ISO  # the newer service report first
    plain = retriever.query(query, top_k=10, mode="dense").passages
    assert all(h.breakdown["recency"] >= 0 for h in plain)


def test_cli_query_window_and_time(timed_home, capsys):
    home = str(timed_home)
    assert main(["query", "Orion Pump", "--home", home, "--since", "2021-01-01", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {h["time"] for h in out["passages"]} == {MIDDLE_ISO, NEWER_ISO}
    assert main(["query", "Orion Pump", "--home", home, "--until", "2020-12-31"]) == 0
    assert "(2020-01-02)" in capsys.readouterr().out
    assert main(["query", "Orion Pump", "--home", home, "--since", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qortex: error: since:")
