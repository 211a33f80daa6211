"""``qortex remember/update/forget/history/memories`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

from qortex_cli.main import main


def test_cli_write_commands_and_one_line_errors(tmp_path: Path, capsys) -> None:
    home = str(tmp_path / "home")
    args = ["--home", home]
    assert (
        main(["remember", "The Ventra Bridge is red.", "--time", "2026-03-05", *args, "--json"])
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["id"].startswith("m_") and record["time"] == "2026-03-05T00:00:00Z"
    assert main(["update", record["id"], "The Ventra Bridge is blue.", *args]) == 0
    assert "blue" in capsys.readouterr().out
    assert main(["history", record["id"], *args, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["op"] for h in history] == ["remember", "update"]
    assert main(["memories", "--since", "2026-01-01", *args, "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [record["id"]]
    assert main(["forget", record["id"], *args]) == 0
    assert capsys.readouterr().out.strip() == f"forgot {record['id']}"
    for bad in (
        ["forget", record["id"]],
        ["update", record["id"], "again"],
        ["remember", "   "],
        ["remember", "x", "--time", "tomorrow-ish"],
        ["history", "m_unknown"],
        ["memories", "--limit", "0"],
    ):
        assert main([*bad, *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("qortex: error: ") and err.count("\n") == 1, err
    assert main(["history", record["id"], *args, "--json"]) == 0
    assert [h["op"] for h in json.loads(capsys.readouterr().out)] == [
        "remember",
        "update",
        "forget",
    ]
