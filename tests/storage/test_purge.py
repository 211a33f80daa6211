"""Purge: a deleted document's text is gone from every file under the home (LanceDB versions and
fragments, extraction cache, old snapshots, the Dagster run history), while the latest snapshot
still answers, lexically too."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from pipelines.resources import EmbedderResource
from qortex_cli.main import main
from qortex_cli.runs.local import run_ingest
from qortex_core.agent.api import open_memory
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

EMBEDDERS: dict[str, object] = {}


class SessionEmbedder(EmbedderResource):
    def get(self):
        return EMBEDDERS["session"]


def _holders(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    )


def test_purge_removes_a_deleted_documents_text_from_every_file(
    tmp_path: Path, monkeypatch, embedder, capsys
) -> None:
    word = "Zorblax" + secrets.token_hex(6)  # unique: any byte match is the deleted document
    source, home = tmp_path / "src", tmp_path / "home"
    source.mkdir()
    (source / "pumps.md").write_text(
        "# Orion Pump\n\nThe Orion Pump at Velmora station is serviced by Ilse Marrow.\n"
    )
    (source / "plans.md").write_text(
        f"# {word} plans\n\n{word} Industries will buy the Velmora harbour. {word} keeps it "
        f"quiet until spring.\n"
    )
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    monkeypatch.setenv("DAGSTER_HOME", "unset-after-the-test")  # run_ingest exports it
    monkeypatch.delenv("DAGSTER_HOME")
    EMBEDDERS["session"] = embedder
    resources = {"embedder": SessionEmbedder()}
    memory = open_memory(home, embedder=embedder)
    recalled = "Quennel" + secrets.token_hex(6)  # a written memory, forgotten below
    record = memory.remember(f"{recalled} keeps the spare Orion Pump seals in locker 7.")
    run_ingest(source, home, resources=resources, progress=False)
    assert _holders(home, word) and _holders(home, recalled)  # tables, snapshot, run history
    (source / "plans.md").unlink()
    memory.forget(record.id)
    second = run_ingest(source, home, resources=resources, progress=False)
    assert second.summary["deleted_documents"] == 2  # the file and the forgotten memory
    assert _holders(home, recalled)  # the forgotten memory's text lingers too
    lingering = _holders(home, word)
    assert any("lancedb" in p for p in lingering)  # old versions and fragments keep the text
    assert any(p.startswith("dagster") for p in lingering)  # and the run history's previews
    assert len(snap.list_versions(home)) == 2

    assert main(["purge", "--home", str(home), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["removed"] and report["kept"] == [snap.latest_name(home)]
    assert report["orphans_removed"]["extractions"] >= 1
    assert _holders(home, word) == []  # gone from every file under the home
    assert _holders(home, recalled) == [] and report["orphans_removed"]["memories"] >= 1
    assert [r.op for r in open_memory(home, embedder=embedder).history(record.id)][-1] == "forget"

    retriever = Retriever.open(home, embedder=embedder)
    hits = retriever.query("Who services the Orion Pump?", top_k=1).passages
    assert hits and "Ilse Marrow" in hits[0].text
    hybrid = retriever.query("Ilse Marrow Orion Pump", top_k=1, mode="hybrid").passages
    assert hybrid and "Ilse Marrow" in hybrid[0].text
    store = LanceStore.open(home)
    assert store.count("documents") == 1 and store.count("chunks") == 1
    assert main(["purge", "--home", str(home)]) == 0  # idempotent
    assert "kept 1 snapshot(s), removed 0" in capsys.readouterr().out


def _forgotten_home(tmp_path: Path, monkeypatch, embedder, consolidate: bool):
    """A home where a memory holding a unique word was written, (consolidated,) then forgotten."""
    import pipelines.resources as resources

    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    home = tmp_path / "home"
    memory = open_memory(home, embedder=embedder)
    word = "Vraxel" + secrets.token_hex(6)
    memory.remember("Ilse Marrow services the Orion Pump at Velmora station.")
    record = memory.remember(f"{word} keeps the spare Orion Pump seals in locker 7.")
    if consolidate:
        run_ingest(None, home, progress=False)
    memory.forget(record.id)
    return home, word


def test_purge_after_forget_without_consolidating_removes_the_text_from_every_file(
    tmp_path: Path, monkeypatch, embedder, capsys
) -> None:
    home, word = _forgotten_home(tmp_path, monkeypatch, embedder, consolidate=True)
    held = _holders(home, word)
    assert any("chunks" in p for p in held) and any(p.startswith("snapshots") for p in held)
    assert main(["purge", "--home", str(home), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "forgotten memories" in report["consolidated_first"]
    assert _holders(home, word) == []
    hits = Retriever.open(home, embedder=embedder).query("Who services the Orion Pump?").passages
    assert hits and "Ilse Marrow" in hits[0].text


def test_purge_of_a_home_with_no_snapshot_scrubs_forgotten_text_and_exits_0(
    tmp_path: Path, monkeypatch, embedder, capsys
) -> None:
    home, word = _forgotten_home(tmp_path, monkeypatch, embedder, consolidate=False)
    assert _holders(home, word)
    assert main(["purge", "--home", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["consolidated_first"] == ""
    assert _holders(home, word) == []
    assert not snap.list_versions(home)
    memory = open_memory(home, embedder=embedder)
    assert [h.text for h in memory.search("Who services the Orion Pump?", top_k=1).passages] == [
        "Ilse Marrow services the Orion Pump at Velmora station."
    ]
