"""``qortex update|forget --expected-revision N``: a stale one is one line, exit 2, no write."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
from faults import error_line, run_cli  # noqa: E402


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:64")  # no model to load
    return tmp_path / "home"


def test_stale_expected_revision_is_refused_in_one_line(home, capsys):
    made = run_cli(capsys, "remember", "The gate code is 4411.", "--home", home, "--json")
    rid = json.loads(made.stdout)["id"]
    fresh = run_cli(capsys, "update", rid, "The gate code is 5522.", "--expected-revision", 1,
                    "--home", home, "--json")  # fmt: skip
    assert fresh.code == 0 and json.loads(fresh.stdout)["revision"] == 2
    stale = run_cli(capsys, "update", rid, "The gate code is 6633.", "--expected-revision", 1,
                    "--home", home)  # fmt: skip
    error_line(stale, 2, "expected revision 1", "revision 2")
    gone = run_cli(capsys, "forget", rid, "--expected-revision", 1, "--home", home)
    error_line(gone, 2, "expected revision 1")
    history = run_cli(capsys, "history", rid, "--home", home, "--json")
    assert [r["text"] for r in json.loads(history.stdout)][-1] == "The gate code is 5522."
    assert run_cli(capsys, "forget", rid, "--expected-revision", 2, "--home", home).code == 0
    bad = run_cli(capsys, "update", rid, "x", "--expected-revision", 0, "--home", home)
    error_line(bad, 2)
