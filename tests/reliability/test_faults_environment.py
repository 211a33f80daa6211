"""The environment fails: a full disk and a read-only data home (a read-only mount, and files owned
by another user with root's override capabilities dropped).

For each: queries still answer (query logging skipped with a note on stderr); every writer
(``ingest``, ``feedback``, ``factors update``) fails with one ``qortex: error:`` line, exit 1
when the machine refuses (no space, read-only filesystem) and exit 2 for permissions; nothing
stored is lost and the last good snapshot answers as before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION
from faults import (
    answer_ids,
    copy_home,
    error_line,
    fill,
    published,
    remount_read_only,
    run_cli,
    tmpfs,
)

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "harbour.md").write_text("# Ivo Lark\n\nIvo Lark paints harbour landscapes.\n")
    return folder


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """``qortex ARGV`` in this process with a private ``DAGSTER_HOME`` (restored afterwards)."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("QORTEX_HOME", str(tmp_path / "unused-home"))
    return lambda *argv: run_cli(capsys, *argv)


def _judgeable(cli, home: Path) -> tuple[str, str, list[str]]:
    """A logged query (written while the disk was fine): its id, its top passage, its ranking."""
    first = cli("query", BRIDGE_QUESTION, "--home", home, "--json", "--top-k", "3")
    ranking = answer_ids(first)
    return json.loads(first.stdout)["query_id"], ranking[0], ranking


def _writers_fail(cli, home: Path, source: Path, query_id: str, passage: str, *fragments: str):
    """Every writer fails with one line naming the problem (exit 1: the machine refused)."""
    feedback = ("feedback", "--query-id", query_id, "--accept", passage, "--home", home)
    error_line(cli(*feedback), 1, *fragments)
    error_line(cli("factors", "update", "--via", "library", "--force", "--home", home), 1)
    error_line(cli("factors", "update", "--force", "--home", home), 1, *fragments)
    error_line(cli("ingest", source, "--home", home, "--quiet"), 1, *fragments)


def test_a_full_disk_still_answers_and_writers_fail_with_one_line(
    cli, tmp_path, toy_home, source, monkeypatch
):
    with tmpfs(tmp_path / "disk") as disk:
        home = copy_home(toy_home, disk / "home")
        monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))  # the instance is full too
        query_id, passage, ranking = _judgeable(cli, home)
        before = published(home)
        filler = fill(disk)

        answered = cli("query", BRIDGE_QUESTION, "--home", home, "--json", "--top-k", "3")
        assert answer_ids(answered) == ranking  # the answer is printed, and the same
        notes = [x for x in answered.stderr.splitlines() if x.strip()]
        assert len(notes) == 1 and notes[0].startswith("qortex: note: query log skipped")
        assert "no space left" in notes[0]
        _writers_fail(cli, home, source, query_id, passage, "no space left", str(home))

        filler.unlink()  # space again: nothing was lost, and the writers work
        assert published(home) == before
        again = cli("query", BRIDGE_QUESTION, "--home", home, "--json", "--top-k", "3")
        assert answer_ids(again) == ranking
        judged = cli("feedback", "--query-id", query_id, "--accept", passage, "--home", home)
        assert judged.code == 0 and "recorded 1 judgement" in judged.stdout, judged.stderr


def test_a_full_disk_under_a_separate_dagster_home_stops_ingest_at_its_first_write(
    cli, tmp_path, toy_home, source
):
    """The instance has room; the data home has none: its first write is refused."""
    with tmpfs(tmp_path / "disk") as disk:
        home = copy_home(toy_home, disk / "home")
        before = published(home)
        fill(disk)
        failed = cli("ingest", source, "--home", home, "--quiet")
        error_line(failed, 1, str(home), "no space left")
        assert published(home) == before


def test_a_read_only_mount_still_answers_and_writers_fail_with_one_line(
    cli, tmp_path, toy_home, source, monkeypatch
):
    with tmpfs(tmp_path / "disk") as disk:
        home = copy_home(toy_home, disk / "home")
        monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
        query_id, passage, ranking = _judgeable(cli, home)
        before = published(home)
        remount_read_only(disk)

        answered = cli("query", BRIDGE_QUESTION, "--home", home, "--json", "--top-k", "3")
        assert answer_ids(answered) == ranking
        assert answered.stderr.strip().startswith("qortex: note: query log skipped")
        assert "not writable" in answered.stderr
        checked = cli("doctor", "--home", home)  # diagnosed read-only, not refused
        assert checked.code == 0 and "healthy" in checked.stdout, checked.stdout + checked.stderr
        _writers_fail(cli, home, source, query_id, passage, "read-only", str(home))
        assert published(home) == before


def _without_overrides(*argv: object) -> subprocess.CompletedProcess:
    """The real CLI as root without the capabilities that let root ignore file modes."""
    capsh = shutil.which("capsh")
    drop = "cap_dac_override,cap_dac_read_search,cap_fowner"
    command = " ".join(map(str, (sys.executable, "-m", "qortex_cli", *argv)))
    return subprocess.run(
        [capsh, f"--drop={drop}", "--", "-c", command],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={
            **{k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"},
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
        },
    )


def test_a_home_owned_by_another_user_still_answers_and_writers_fail(tmp_path, toy_home):
    """Root without CAP_DAC_OVERRIDE honours modes: a home owned by nobody is not writable."""
    if os.geteuid() != 0 or not shutil.which("capsh"):
        pytest.skip("needs root and capsh (libcap2-bin) to drop CAP_DAC_OVERRIDE")
    home = copy_home(toy_home, tmp_path / "owned" / "home")
    for path in [home, *home.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
        path.chmod(path.stat().st_mode & ~0o022)
    os.chmod(tmp_path, 0o755)  # pytest's tmp folders are 0700: let the home be reached
    answered = _without_overrides("query", "'Who is Orlan Vesk?'", "--home", home, "--json")
    assert answered.returncode == 0 and "Traceback" not in answered.stderr, answered.stderr
    assert json.loads(answered.stdout)["passages"]
    assert "query log skipped" in answered.stderr and "not writable" in answered.stderr
    query_id = json.loads(answered.stdout)["query_id"]
    for argv in (
        ("feedback", "--query-id", query_id, "--accept", "p_x", "--home", home),
        ("factors", "update", "--home", home),
    ):
        failed = _without_overrides(*argv)
        lines = [x for x in failed.stderr.splitlines() if x.strip()]
        assert failed.returncode == 2 and "Traceback" not in failed.stderr, failed.stderr
        assert len(lines) == 1 and lines[0].startswith("qortex: error: "), failed.stderr
        assert str(home) in lines[0] and "writ" in lines[0] or "ermission" in lines[0]
