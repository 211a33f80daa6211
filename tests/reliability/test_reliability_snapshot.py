"""Corrupt snapshots: refused with a clear message; the retriever falls back to the previous good one and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION

from qortex_cli.main import main
from qortex_core.errors import SnapshotError
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap


def publish_second(home: Path) -> tuple[str, str]:
    """Republish the home's only snapshot as a second version; returns (old name, new name)."""
    old = snap.load(home)
    new = snap.publish(
        home,
        snap.Snapshot(
            arrays=dict(old.arrays),
            tables=dict(old.tables),
            manifest={k: v for k, v in old.manifest.items() if k not in ("files", "name")},
        ),
    )
    return old.path.name, new.name


def flip_bytes(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    for i in range(len(raw) - 16, len(raw)):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


def truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


@pytest.fixture
def two_versions(toy_home: Path) -> tuple[Path, str, str]:
    old, new = publish_second(toy_home)
    assert snap.latest_name(toy_home) == new
    return toy_home, old, new


@pytest.mark.parametrize(
    "damage, fname, verify",
    [
        (flip_bytes, "passage_vectors.npy", True),
        (truncate, "adj_indices.npy", True),
        (
            truncate,
            "passage_vectors.npy",
            False,
        ),  # no checksum pass: the truncated array itself is refused
        (truncate, "passages.arrow", False),
    ],
)
def test_corrupt_latest_falls_back_to_previous_and_flags_it(
    two_versions, embedder, damage, fname, verify
):
    home, old, new = two_versions
    damage(home / "snapshots" / new / fname)
    with pytest.raises(SnapshotError, match=f"snapshot {new}.*{fname}"):
        snap.load(home, verify=verify)
    loaded, problems = snap.load_latest_good(home, verify=verify)
    assert loaded.path.name == old and len(problems) == 1 and new in problems[0]
    retriever = Retriever.open(home, embedder=embedder, verify=verify)
    assert retriever.snapshot.path.name == old
    assert old in retriever.warning and new in retriever.warning
    result = retriever.query(BRIDGE_QUESTION, top_k=3)
    assert result.snapshot == old and result.passages
    assert result.fallback and f"serving older snapshot {old}" in result.fallback


def test_healthy_latest_has_no_warning(two_versions, embedder):
    home, _, new = two_versions
    retriever = Retriever.open(home, embedder=embedder)
    assert retriever.warning is None
    result = retriever.query(BRIDGE_QUESTION, top_k=3)
    assert result.snapshot == new and (
        result.fallback is None or "older snapshot" not in result.fallback
    )


def test_corrupt_pointer_falls_back_to_newest_good_version(two_versions, embedder):
    home, old, new = two_versions
    (home / "snapshots" / snap.POINTER).write_text("garbage\n")
    flip_bytes(home / "snapshots" / new / "adj_data.npy")
    loaded, problems = snap.load_latest_good(home)
    assert loaded.path.name == old
    assert any("pointer" in p for p in problems) and any(new in p for p in problems)


def test_pinned_corrupt_version_is_refused_not_replaced(two_versions, embedder):
    home, _, new = two_versions
    flip_bytes(home / "snapshots" / new / "passage_vectors.npy")
    with pytest.raises(SnapshotError, match="checksum mismatch"):
        Retriever.open(home, embedder=embedder, version=new)


def test_all_corrupt_is_one_error_line_in_cli(two_versions, capsys, monkeypatch):
    home, old, new = two_versions
    for name in (old, new):
        truncate(home / "snapshots" / name / "adj_indptr.npy")
    with pytest.raises(SnapshotError, match="no usable snapshot"):
        snap.load_latest_good(home)
    monkeypatch.setenv("QORTEX_HOME", str(home))
    code = main(["query", BRIDGE_QUESTION, "--home", str(home)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qortex: error: no usable snapshot")
    assert old in lines[0] and new in lines[0] and "Traceback" not in err


def test_nothing_published_keeps_its_message(tmp_path):
    with pytest.raises(SnapshotError, match="no snapshot published"):
        snap.load_latest_good(tmp_path)


def test_cli_query_answers_from_the_older_snapshot_with_a_note(
    two_versions, embedder, capsys, monkeypatch
):
    home, old, new = two_versions
    flip_bytes(home / "snapshots" / new / "adj_indices.npy")
    monkeypatch.setattr(
        "qortex_core.query.retriever.make_embedder", lambda *a: embedder
    )  # the real model, loaded once
    assert main(["query", BRIDGE_QUESTION, "--home", str(home), "--top-k", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if line.startswith("note: ")]
    assert (
        len(notes) == 1
        and f"serving older snapshot {old}" in notes[0]
        and "checksum mismatch" in notes[0]
    )
    assert any(line.startswith(" 1. [") for line in out) and not any(
        line.startswith(" 3. [") for line in out
    )
