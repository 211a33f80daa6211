"""Hostile inputs to the write path (issue 35, items 8-11): metadata and sources holding secrets,
metadata nested 10,000 deep, 100 MB or holding NaN, and times outside years 1000-9999. Every
entry point (library, CLI, MCP) refuses them in one line or stores them redacted; ``--json`` is
always valid JSON, even on a home whose old rows hold what the bounds now refuse.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest
from faults import error_line, run_cli
from mcp.server.mcpserver.exceptions import ToolError

from qortex_cli.output import json_text
from qortex_core.agent.api import Memory
from qortex_core.embed import make_embedder
from qortex_core.errors import RecordError
from qortex_core.ingest.documents import SourceConfig, load_documents
from qortex_core.memory.records import MemoryTable, Revision, revision_rows
from qortex_core.redact import MARK

PASSWORD = "hunter2"  # too short and too plain for any text detector: only its key gives it away
URL_PASSWORD = "Zq8pw"
SECRET_META = {
    "db_password": PASSWORD,
    "apiKey": 73915,
    "auth": {"user": "ops", "pin": "4242"},
    "note": "deploy with token = ghp_" + "a1B2" * 9,
    "turn": "d1:3",
    "tokens_used": 812,
    "session_id": "s-42",
}
SECRET_SOURCE = f"https://admin:{URL_PASSWORD}@git.example.org/r?x=1"


def _strict(text: str):
    """JSON as a strict parser reads it (NaN and Infinity refused)."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))


def _deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    """The CLI with the hash embedder (no model to load) and a fresh home."""
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:64")
    return tmp_path / "home"


@pytest.fixture
def mem(tmp_path) -> Memory:
    return Memory(tmp_path / "lib", embedder=make_embedder("hash:64"))


def _mcp(home: Path):
    """An in-process MCP server on ``home`` (hash embedder) and a function that calls a tool."""
    from qortex_core.mcp_server import MCPConfig, build_server

    server = build_server(MCPConfig(home=str(home)), embedder=make_embedder("hash:64"))
    return lambda tool, **args: asyncio.run(server.call_tool(tool, args))


def _files_hold(root: Path, needle: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``needle``."""
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


# -- item 8: secrets in metadata and source ---------------------------------------------------
def _assert_redacted(record: dict) -> None:
    meta = record["metadata"]
    assert meta["db_password"] == MARK and meta["apiKey"] == MARK
    assert meta["auth"] == {"user": MARK, "pin": MARK}  # everything under a secret's key
    assert "ghp_" not in meta["note"] and meta["note"].startswith("deploy with token")
    assert (meta["turn"], meta["tokens_used"], meta["session_id"]) == ("d1:3", 812, "s-42")
    assert URL_PASSWORD not in record["source"] and "admin" in record["source"]
    assert record["source"].endswith("@git.example.org/r?x=1")


def test_cli_remember_redacts_metadata_and_source_everywhere(cli_env, capsys):
    meta = json.dumps(SECRET_META)
    done = run_cli(capsys, "remember", "deploy notes", "--metadata", meta,
                   "--source", SECRET_SOURCE, "--home", cli_env, "--json")  # fmt: skip
    assert done.code == 0, done.stderr
    _assert_redacted(_strict(done.stdout))
    listed = run_cli(capsys, "memories", "--home", cli_env, "--json")
    _assert_redacted(_strict(listed.stdout)[0])
    assert PASSWORD not in listed.stdout + done.stdout
    assert _files_hold(cli_env, PASSWORD) == [] and _files_hold(cli_env, URL_PASSWORD) == []


def test_library_and_mcp_redact_metadata_and_source(mem, tmp_path):
    records = mem.remember_many(
        ["one", "two"], metadata=[SECRET_META, {"password": "x"}], source=SECRET_SOURCE
    )
    _assert_redacted(records[0].__dict__)
    assert records[1].metadata == {"password": MARK} and URL_PASSWORD not in records[1].source
    stored = _mcp(tmp_path / "mcp")("qortex_remember", text="three", source=SECRET_SOURCE)
    assert URL_PASSWORD not in json.dumps(stored.structured_content)
    kept = mem.remember("at the bounds", metadata={"deep": _deep(31), "big": "y" * 60_000})
    assert kept.metadata["big"] == "y" * 60_000 and kept.metadata["deep"] == _deep(31)


# -- item 9: metadata bounds --------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"a": ' * 10_000 + "1" + "}" * 10_000, "nested deeper than 32"),
        (json.dumps(_deep(900)), "nested deeper than 32"),
        (json.dumps(_deep(33)), "nested deeper than 32"),
        ('{"x": NaN}', "NaN or Infinity"),
        ('{"x": [1, -Infinity]}', "NaN or Infinity"),
        (json.dumps({"x": "y" * 70_000}), "over 65536 bytes"),
    ],
    ids=["10000-deep", "900-deep", "33-deep", "nan", "infinity", "70kb"],
)
def test_cli_refuses_unbounded_metadata_in_one_line(cli_env, capsys, text, fragment):
    done = run_cli(capsys, "remember", "x", "--metadata", text, "--home", cli_env, "--json")
    error_line(done, 2, fragment)
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("metadata", "fragment"),
    [
        (_deep(10_000), "nested deeper than 32"),
        ({"x": "y" * (100 << 20)}, "over 65536 bytes"),  # 100 MB: refused before serialising
        ({"x": [0] * 2_000_000}, "over 65536 bytes"),
        ({"x": float("nan")}, "NaN or Infinity"),
        ({"x": {"y": float("inf")}}, "NaN or Infinity"),
        ({1: "int key"}, "keys must be strings"),
        ({"x": {1, 2}}, "not a JSON value"),
        ({"x": "\ud800"}, "not valid UTF-8"),
    ],
    ids=["10000-deep", "100mb", "2m-items", "nan", "inf", "int-key", "set", "surrogate"],
)
def test_library_refuses_unbounded_metadata(mem, metadata, fragment):
    with pytest.raises(RecordError, match=fragment) as caught:
        mem.remember("x", metadata=metadata)
    assert "\n" not in str(caught.value)
    with pytest.raises(RecordError, match=fragment):
        mem.remember_many(["x", "y"], metadata=[{}, metadata])
    assert mem.list() == []  # nothing stored: all or none


def test_memories_json_survives_old_rows_the_bounds_refuse(cli_env, capsys):
    """Rows written before the bounds (900 deep, NaN, over 64 KB) must not break the listing."""
    Memory(cli_env, embedder=make_embedder("hash:64")).remember("a good memory")
    table = MemoryTable(Memory(cli_env, embedder=make_embedder("hash:64")).store)
    old = [_deep(900), {"score": float("nan")}, {"blob": "z" * 70_000}]
    revisions = [
        Revision(f"m_old{n}", 1, "remember", f"old memory {n}", None, "2025-01-01T00:00:00Z",
                 None, "default", "old")
        for n in range(len(old))
    ]  # fmt: skip
    table.append(revision_rows(revisions, old, np.ones((3, 64), np.float32)))
    listed = run_cli(capsys, "memories", "--home", cli_env, "--json")
    assert listed.code == 0 and "Traceback" not in listed.stderr, listed.stderr
    rows = {r["text"]: r["metadata"] for r in _strict(listed.stdout)}
    assert rows["a good memory"] == {}
    assert all(set(rows[f"old memory {n}"]) == {"_withheld"} for n in range(3))
    shown = run_cli(capsys, "memories", "--home", cli_env)
    assert shown.code == 0 and shown.stdout.count("old memory") == 3


def test_json_output_is_strict_for_any_number():
    assert _strict(json_text({"a": [math.nan, math.inf, -math.inf, 1.5]})) == {
        "a": [None, None, None, 1.5]
    }


# -- items 10 and 11: times outside years 1000-9999 -------------------------------------------
BAD_TIMES = [
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "9999-12-31T23:59:59-01:00",  # year 10000 in UTC
    "0900-06-01",
    "1000-01-01T00:30:00+01:00",  # 999 in UTC
]


@pytest.mark.parametrize("when", BAD_TIMES)
def test_cli_refuses_out_of_range_times_in_one_line(cli_env, capsys, when):
    error_line(run_cli(capsys, "remember", "x", "--time", when, "--home", cli_env),
               2, "invalid time", "years 1000-9999")  # fmt: skip
    run_cli(capsys, "remember", "a memory of Lune", "--home", cli_env)
    for option in ("--since", "--until"):
        asked = run_cli(capsys, "query", "Lune", option, when, "--home", cli_env)
        error_line(asked, 2, option[2:], "1000-9999")
        error_line(run_cli(capsys, "memories", option, when, "--home", cli_env), 2, option[2:])


def test_four_digit_years_are_kept_and_sort_as_times(cli_env, capsys):
    for when in ("1000-01-01T05:00:00+01:00", "2020-05-01", "9999-12-31T23:59:59Z"):
        assert run_cli(capsys, "remember", f"event {when}", "--time", when,
                       "--home", cli_env).code == 0  # fmt: skip
    listed = _strict(run_cli(capsys, "memories", "--home", cli_env, "--json").stdout)
    assert [r["time"] for r in listed] == [
        "9999-12-31T23:59:59Z", "2020-05-01T00:00:00Z", "1000-01-01T04:00:00Z",
    ]  # fmt: skip
    since = run_cli(capsys, "memories", "--since", "2026-01-01", "--home", cli_env, "--json")
    assert [r["time"] for r in _strict(since.stdout)] == ["9999-12-31T23:59:59Z"]
    until = run_cli(capsys, "query", "event", "--until", "1000-01-01", "--min-relevance", "0",
                    "--home", cli_env, "--json")  # fmt: skip
    assert [h["time"] for h in _strict(until.stdout)["passages"]] == ["1000-01-01T04:00:00Z"]


@pytest.mark.parametrize("when", BAD_TIMES)
def test_library_refuses_out_of_range_times(mem, when):
    kept = mem.remember("a kept memory")
    for call in (
        lambda: mem.remember("x", time=when),
        lambda: mem.remember_many(["x", "y"], time=["2020-01-01", when]),
        lambda: mem.update(kept.id, "y", time=when),
        lambda: mem.list(since=when),
        lambda: mem.search("x", until=when),
    ):
        with pytest.raises(RecordError) as caught:
            call()
        assert "\n" not in str(caught.value)
    assert [r.text for r in mem.list()] == ["a kept memory"]


def test_mcp_names_the_argument_of_a_bad_time(tmp_path):
    call = _mcp(tmp_path / "mcp")
    with pytest.raises(ToolError, match=r"invalid time .*1000-9999"):
        call("qortex_remember", text="x", time="0001-01-01T00:00:00+14:00")
    for name in ("since", "until"):
        with pytest.raises(ToolError, match=rf"invalid {name} .*1000-9999"):
            call("qortex_query", query="x", **{name: "9999-12-31T23:59:59-01:00"})


@pytest.mark.parametrize("when", [1e300, "0900-06-01", "0001-01-01T00:00:00+14:00", True])
def test_a_corpus_entry_with_a_bad_time_is_skipped_alone(tmp_path, when):
    rows = [
        {"title": "Orlan Vesk", "text": "Orlan Vesk was born in Ostrania.", "time": when},
        {"title": "Ostrania", "text": "Ostrania is governed from Velmora.", "date": "2020-01-02"},
    ]
    (tmp_path / "corpus.json").write_text(json.dumps(rows))
    lines = [dict(rows[1], text="Velmora hosts the parliament."), dict(rows[0], title="Again")]
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps(r) for r in lines))
    found = load_documents(SourceConfig(root=tmp_path))
    kept = {d.doc_id: [(s.title, s.time) for s in d.sections] for d in found.documents}
    assert kept == {
        "corpus.json": [("Ostrania", "2020-01-02T00:00:00Z")],
        "lines.jsonl": [("Ostrania", "2020-01-02T00:00:00Z")],
    }
    reasons = {s.path: s.reason for s in found.skipped}
    assert reasons.keys() == {"corpus.json", "lines.jsonl"}
    assert "corpus entry 0: 'time'" in reasons["corpus.json"]
    assert "corpus entry 1: 'time'" in reasons["lines.jsonl"]
