"""The memory soak, short: 4 processes remember / update / forget / search while consolidation
and purge run on the same home; no acknowledged write is lost, every history is consistent and
no process crashes (``qortex bench soak`` runs the long version)."""

from __future__ import annotations

from pathlib import Path

from qortex_bench.soak import SoakConfig, run_soak
from qortex_cli.commands.purge import purge_home
from qortex_cli.runs.local import run_ingest


def test_a_short_soak_loses_nothing_and_nothing_crashes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:64")
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    ran: list[str] = []

    def consolidate(home: Path) -> None:
        run_ingest(None, home, progress=False)
        ran.append("consolidate")

    def purge(home: Path) -> None:
        purge_home(home, 1)
        ran.append("purge")

    report = run_soak(SoakConfig(tmp_path / "home", processes=4, seconds=8.0), consolidate, purge)
    assert "consolidate" in ran and "purge" in ran  # both ran while the workers wrote
    assert report["acknowledged_writes"] > 20
    assert report["operations"]["update"]["count"] and report["operations"]["forget"]["count"]
    assert report["lost_writes"] == []
    assert report["inconsistent_histories"] == []
    assert report["crashed_processes"] == 0 and report["unexpected_errors"] == []
    assert report["background_errors"] == []
