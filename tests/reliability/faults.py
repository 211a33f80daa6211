"""Fault injection for the reliability suite: the CLI run in this process, real filesystems that
fill up or turn read-only, and the one-line error contract every fault must keep.

``tmpfs`` mounts a real small filesystem (root only: the test is skipped with the reason where the
machine cannot mount); ``fill`` writes to it until the kernel says ENOSPC; ``remount_read_only``
makes the kernel refuse every write, even root's.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Outcome:
    """What one CLI run printed and returned."""

    code: int
    stdout: str
    stderr: str


def run_cli(capsys, *argv: object) -> Outcome:
    """``qortex ARGV`` through ``qortex_cli.main.main`` in this process (an escaping exception fails
    the test just as a traceback would)."""
    from qortex_cli import main as cli

    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return Outcome(code, out.out, out.err)


def error_line(outcome: Outcome, code: int, *fragments: str) -> str:
    """Assert exit ``code``, no traceback and exactly one ``qortex: error:`` line holding every
    fragment (indented progress lines may come first); returns that line."""
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.code == code, (outcome.code, outcome.stderr)
    lines = [x for x in outcome.stderr.splitlines() if x.strip() and not x.startswith("  ")]
    assert len(lines) == 1 and lines[0].startswith("qortex: error: "), outcome.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def answer_ids(outcome: Outcome) -> list[str]:
    """Passage ids of a successful ``qortex query --json``."""
    assert outcome.code == 0 and "Traceback" not in outcome.stderr, outcome.stderr
    return [p["id"] for p in json.loads(outcome.stdout)["passages"]]


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@contextmanager
def tmpfs(path: Path, size_mb: int = 64):
    """A real tmpfs of ``size_mb`` at ``path``; skips the test where none can be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; this machine runs the tests unprivileged")
    path.mkdir(parents=True, exist_ok=True)
    done = _mount("-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path))
    if done.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill(folder: Path) -> Path:
    """Write ``folder/filler`` until the filesystem is full (ENOSPC); returns the filler."""
    filler = folder / "filler"
    block = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    for small in (4096, 512, 1):  # the last partial block too
        try:
            with open(filler, "ab", buffering=0) as fh:
                while True:
                    fh.write(b"\0" * small)
        except OSError:
            pass
    assert os.statvfs(folder).f_bavail == 0
    return filler


def remount_read_only(path: Path) -> None:
    """Make the mount at ``path`` read-only: the kernel refuses every write with EROFS."""
    done = _mount("-o", "remount,ro", str(path))
    assert done.returncode == 0, done.stderr


def copy_home(home: Path, target: Path) -> Path:
    """A copy of ``home`` at ``target`` (on the faulty filesystem)."""
    shutil.copytree(home, target)
    return target


def published(home: Path) -> tuple[str, list[str]]:
    """``LATEST`` and the snapshot folders under ``home``."""
    root = home / "snapshots"
    return (root / "LATEST").read_text().strip(), sorted(
        p.name for p in root.iterdir() if p.name.startswith("v")
    )
