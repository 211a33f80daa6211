"""Hostile source files of every type: each is skipped with its name and reason, the rest loads,
and nothing blocks (a FIFO swapped in after the listing, devices, sockets, endless files).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest
from faults import error_line, run_cli

from qortex_core.ingest.documents import SourceConfig, load_documents, read_document

GOOD = "# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n"


def _finishes(call, timeout_s: float = 20.0):
    """Run ``call`` in a thread; fail (instead of hanging the suite) when it blocks."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), f"blocked for {timeout_s} s"
    return box


def _hostile_tree(src: Path) -> dict[str, str]:
    """Write one file of each hostile kind under ``src``; name -> a word its reason must hold."""
    (src / "good.md").write_text(GOOD)
    (src / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (src / "nested.jsonl").write_text('{"a": ' * 50_000 + "1" + "}" * 50_000 + "\n")
    (src / "surrogate.json").write_text(json.dumps([{"title": "x", "text": "bad \ud800 text"}]))
    (src / "surrogate_title.jsonl").write_text('{"title": "\\udfff", "text": "fine"}\n')
    os.mkfifo(src / "pipe.md")
    expected = {
        "nested.json": "nested too deeply",
        "nested.jsonl": "nested too deeply",
        "surrogate.json": "lone surrogate",
        "surrogate_title.jsonl": "lone surrogate",
        "pipe.md": "not a regular file",
    }
    if os.geteuid() == 0:  # device nodes need CAP_MKNOD
        os.mknod(src / "zero.txt", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
        expected["zero.txt"] = "not a regular file"
    return expected


def test_every_hostile_file_is_skipped_with_its_name_and_reason(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    expected = _hostile_tree(src)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(src / "sock.txt"))
    expected["sock.txt"] = "not a regular file"
    try:
        box = _finishes(lambda: load_documents(SourceConfig(root=src)))
    finally:
        server.close()
    found = box["value"]
    assert [d.doc_id for d in found.documents] == ["good.md"]
    reasons = {s.path: s.reason for s in found.skipped}
    assert set(reasons) == set(expected)
    for name, word in expected.items():
        assert word in reasons[name], (name, reasons[name])


def test_a_fifo_swapped_in_after_the_listing_does_not_block(tmp_path):
    """The race: listed as a regular file, a FIFO (no writer, ever) when read."""
    path = tmp_path / "notes.md"
    path.write_text(GOOD)
    config = SourceConfig(root=tmp_path)
    path.unlink()
    os.mkfifo(path)
    box = _finishes(lambda: read_document(path, config))
    assert isinstance(box.get("error"), ValueError) and "a FIFO" in str(box["error"])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_device_swapped_in_is_refused_without_reading(tmp_path):
    path = tmp_path / "notes.txt"
    path.symlink_to("/dev/zero")  # what a rename over the listed file would leave
    box = _finishes(lambda: read_document(path, SourceConfig(root=tmp_path, max_bytes=1000)))
    assert "outside the source root" in str(box.get("error"))  # refused before any open


def test_a_file_growing_past_the_limit_is_read_only_up_to_the_bound(tmp_path):
    """The size check is on what is read, not on a stat taken before it."""
    path = tmp_path / "grown.txt"
    path.write_text("Ivo Lark paints harbours. " * 100)
    box = _finishes(lambda: read_document(path, SourceConfig(root=tmp_path, max_bytes=1000)))
    assert str(box.get("error")) == "larger than 1000 bytes"


@pytest.mark.slow
def test_ingest_skips_hostile_files_and_publishes_the_rest(tmp_path, capsys, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    expected = _hostile_tree(src)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    home = tmp_path / "home"
    box = _finishes(
        lambda: run_cli(capsys, "ingest", src, "--home", home, "--json", "--quiet"), 300
    )
    outcome = box["value"]
    assert outcome.code == 0 and "Traceback" not in outcome.stderr, outcome.stderr
    summary = json.loads(outcome.stdout)
    assert summary["documents"] == 1 and summary["skipped_files"] == len(expected)
    asked = run_cli(capsys, "query", "Where was Orlan Vesk born?", "--home", home, "--json")
    assert json.loads(asked.stdout)["passages"][0]["title"] == "Orlan Vesk"


def test_a_source_of_only_hostile_files_is_one_line_naming_one(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    failed = run_cli(capsys, "ingest", src, "--home", tmp_path / "home")
    error_line(failed, 2, "no usable", "nested.json", "nested too deeply")
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("which", ["questions", "corpus", "openie"])
def test_an_eval_dataset_file_that_is_a_fifo_is_one_line_not_a_hang(which, tmp_path, capsys):
    from conftest import write_toy_dataset

    data = write_toy_dataset(tmp_path / "data")
    target = getattr(data, which)
    target.unlink()
    os.mkfifo(target)  # no writer, ever: a blocking open or read would hang here
    argv = ["eval", "--questions", data.questions, "--corpus", data.corpus]
    argv += ["--openie", data.openie, "--home", tmp_path / "home", "--modes", "dense"]
    box = _finishes(lambda: run_cli(capsys, *argv), 120)
    error_line(box["value"], 2, str(target), "FIFO")
