"""``qortex bench fragments`` on a small table: the runs leave a fragment each, the compaction
merges them (the reads then go through two fragments), every phase is timed, and a count
below one is one error line."""

from __future__ import annotations

import json

from qortex_cli.main import main


def test_the_runs_fragments_are_merged_and_every_phase_timed(tmp_path, capsys):
    out = tmp_path / "report.json"
    args = ["bench", "fragments", "--rows", "3000", "--runs", "20", "--per-run", "4"]
    assert main([*args, "--workdir", str(tmp_path / "w"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == report
    assert report["one_fragment"]["fragments"] == 1
    assert report["after_runs"]["fragments"] == 21  # one appended fragment a run
    assert report["compacted"]["fragments"] == 2  # the whole write's, and the runs' merged
    assert report["compacted"]["fragments_merged"] == 19
    for phase in ("one_fragment", "after_runs", "compacted"):
        assert report[phase]["keyed_read_s"] > 0 and report[phase]["scan_s"] > 0
    assert report["after_runs"]["last_runs_write_s"] > 0
    for ratios in ("after_runs_vs_one", "compacted_vs_one", "compacted_vs_after_runs"):
        assert set(report[ratios]) == {"scan_s", "keyed_read_s", "count_s"}
    assert list((tmp_path / "w").iterdir()) == []  # the table is removed after the run


def test_a_count_below_one_is_one_error_line(capsys):
    assert main(["bench", "fragments", "--runs", "0"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--runs: must be at least 1, got 0" in err[0], err
