"""``qortex bench incremental`` at a few hundred passages: the real CLI in child processes, a
full rebuild compared query by query; after the incremental runs every mode answers as the
rebuild does."""

from __future__ import annotations

import json

import pytest

from qortex_cli.main import main
from qortex_core.storage.retention import list_snapshots

pytestmark = pytest.mark.slow


def test_bench_incremental_agrees_with_a_full_rebuild_and_reports_every_step(tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(
        [
            "bench",
            "incremental",
            "--passages",
            "500",
            "--delta",
            "3",
            "--queries",
            "50",
            "--keep-snapshots",
            "1",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == report
    (size,) = report["sizes"]
    assert size["passages"] == 500 and size["delta"] == 3
    for step in ("full", "plus_delta", "unchanged", "consolidate", "rebuild"):
        assert size[f"{step}_s"] > 0
    for step in ("plus_delta", "unchanged", "consolidate"):
        assert size[f"{step}_ratio"] == pytest.approx(size[f"{step}_s"] / size["full_s"], 1e-3)
    assert size["peak_rss_mb"] > 0
    peaks = [size[f"{step}_peak_rss_mb"] for step in ("full", "plus_delta", "unchanged")]
    assert all(p > 30 for p in peaks)  # each step's own child: an interpreter with the library
    assert max(peaks) <= size["peak_rss_mb"]  # no step beyond the largest child's peak
    assert size["top10_agreement"] == {"dense": 1.0, "hipporag": 1.0, "hybrid": 1.0}
    synonyms = size["synonym_edges"]  # the incremental runs' edges are the rebuild's
    assert synonyms["rebuild"] > 0 and synonyms["incremental"] == synonyms["rebuild"]
    assert synonyms["jaccard"] == 1.0
    assert synonyms["edge_recall"][0] == synonyms["edge_recall"][1] is not None
    steps = size["steps"]
    assert steps["plus_delta"]["new_documents"] == 3 and steps["unchanged"]["embedded"] == 0
    assert steps["unchanged"]["new_documents"] == 0 and steps["consolidate"]["memories"] == 3
    # --keep-snapshots 1: the consolidation's snapshot, and the freshness step's after it
    home = tmp_path / "work" / "n500" / "home"
    assert len(list_snapshots(home)) == 2
