"""Listing a source directory: the files to read, the entries skipped and why, and the
identity (device, inode) of each file as listed, which the read checks
(:func:`qortex_core.storage.source_files.read_source`): a file swapped after the listing is
never read in its place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why."""

    path: str
    reason: str


# -- scanning -----------------------------------------------------------------------------
def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
        return True
    except ValueError:
        return False
    except (RuntimeError, OSError):  # a symlink loop leads nowhere: the regular-file check skips it
        return True


def _file_problem(path: Path, real_root: Path, suffixes: tuple[str, ...]) -> str | None:
    """Why a listed file is not a candidate (None: it is one)."""
    if path.suffix.lower() not in suffixes:
        return f"unsupported file type {path.suffix or '(none)'}"
    if path.is_symlink() and not _inside(path, real_root):
        return "symlink leads outside the source root"
    if not path.is_file():
        return "not a regular file"
    return None


def _identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the file at ``path`` as listed (None: it vanished)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def list_sources(
    root: Path, suffixes: tuple[str, ...]
) -> tuple[list[Path], list[Skipped], dict[Path, tuple[int, int] | None]]:
    """Regular files under ``root`` (sorted) whose suffix is one of ``suffixes``, with skipped
    symlinks and unsupported files, and the identity (device, inode) of each file as listed."""
    files: list[Path] = []
    skipped: list[Skipped] = []
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                reason = (
                    "symlink leads outside the source root"
                    if not _inside(here / name, real_root)
                    else "symlinked directory not followed"
                )
                skipped.append(Skipped(str((here / name).relative_to(root)), reason))
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not (here / d).is_symlink()
        )
        for name in sorted(filenames):
            path = here / name
            rel = str(path.relative_to(root))
            if name.startswith("."):
                continue
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            problem = (
                "file name is not valid UTF-8"
                if rel != shown
                else _file_problem(path, real_root, suffixes)
            )  # ids must be UTF-8
            if problem:
                skipped.append(Skipped(shown, problem))
            else:
                files.append(path)
    files.sort()
    return files, skipped, {path: _identity(path) for path in files}


def list_file(
    path: Path, suffixes: tuple[str, ...]
) -> tuple[list[Path], list[Skipped], dict[Path, tuple[int, int] | None]]:
    """:func:`list_sources` of a source that is one file (its folder is the root)."""
    problem = _file_problem(path, path.parent.resolve(), suffixes)
    if problem:
        return [], [Skipped(path.name, problem)], {}
    return [path], [], {path: _identity(path)}
