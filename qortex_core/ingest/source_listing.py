"""Listing a source directory: the files to read, the entries skipped and why, and the stat of
each file as listed (its size, mtime and identity), taken once by one ``os.scandir`` walk.

The identity (device, inode) is what the read checks
(:func:`qortex_core.storage.source_files.read_source`): a file swapped after the listing is
never read in its place. The size and mtime are what the source manifest compares
(:mod:`qortex_core.ingest.source_manifest`), so an unchanged file costs its directory entry and
one ``stat``, nothing else.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from qortex_core.cores import usable_cores

PARALLEL_STAT = 8192  # a folder with this many plain files has them stated on 2 threads


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why."""

    path: str
    reason: str


class Listed(NamedTuple):
    """A candidate file: its path relative to the root (POSIX), its full path and its stat as
    listed (None: it vanished between the directory read and the stat). A tuple: a walk of a
    million files makes a million of them, and a frozen dataclass's ``__init__`` costs
    several times a tuple's."""

    rel: str
    path: str
    stat: os.stat_result | None


@dataclass(frozen=True)
class Listing:
    """Every candidate file under a root, sorted as :class:`pathlib.Path` sorts them, and the
    entries skipped.

    Attributes:
        root: the folder the relative paths start from (a one-file source: its folder).
        files: the candidates, sorted.
        skipped: entries that are not candidates, each with its reason.
    """

    root: Path
    files: tuple[Listed, ...]
    skipped: tuple[Skipped, ...]

    def identities(self) -> dict[Path, tuple[int, int] | None]:
        """Each file's path -> ``(st_dev, st_ino)`` as listed (None: it vanished)."""
        return {
            Path(f.path): (f.stat.st_dev, f.stat.st_ino) if f.stat is not None else None
            for f in self.files
        }


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


def _suffix(name: str) -> str:
    """``PurePath(name).suffix`` without building a path (``""`` for ``x`` and ``x.``)."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def _entry_problem(entry: os.DirEntry, real_root: Path, suffixes: tuple[str, ...]) -> str | None:
    """:func:`_file_problem` from a directory entry: a plain regular file costs no system call
    (its type came with the directory read); a symlink is checked as before."""
    if not entry.name.lower().endswith(suffixes):  # a hidden name (".md") never gets here
        return f"unsupported file type {_suffix(entry.name) or '(none)'}"
    if entry.is_symlink():
        return _file_problem(Path(entry.path), real_root, suffixes)
    return None if entry.is_file(follow_symlinks=False) else "not a regular file"


def _stat(entry: os.DirEntry) -> os.stat_result | None:
    """The entry's stat, following a symlink (None: it vanished)."""
    try:
        return entry.stat()  # cached on the entry once taken (see _prestat)
    except OSError:
        return None


def _stat_all(entries: list[os.DirEntry]) -> None:
    for entry in entries:
        _stat(entry)


def _prestat(entries: list[os.DirEntry]) -> None:
    """Take the stat of a large folder's plain files ahead of the walk, on 2 threads (each
    entry caches its own).

    A stat of a file whose inode the kernel no longer caches is processor time in the kernel
    (about 10 us against 2 us: the inode is read and set up again, the disk is hardly waited
    for), which a second core shares: at 1M files in one folder, 16 s -> 11 s. With every
    inode cached the threads' handing the interpreter lock to each other costs about 10 %
    (6.5 -> 7.2 s); a folder of this size is rarely all cached after the run that wrote it."""
    plain = [e for e in entries if e.is_file(follow_symlinks=False)]
    if len(plain) < PARALLEL_STAT or usable_cores(2) < 2:
        return
    half = len(plain) // 2
    with ThreadPoolExecutor(1, thread_name_prefix="source-stat") as pool:
        other = pool.submit(_stat_all, plain[half:])
        _stat_all(plain[:half])
        other.result()


def _folder_skip(entry: os.DirEntry, rel: str, real_root: Path) -> Skipped | None:
    """A symlinked folder is never followed: skipped, with where it leads."""
    if not entry.is_symlink():
        return None
    if _inside(Path(entry.path), real_root):
        return Skipped(rel, "symlinked directory not followed")
    return Skipped(rel, "symlink leads outside the source root")


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # as os.walk: an entry whose type cannot be read is not a folder
        return False


def _entries(folder: str, ahead: bool) -> Iterator[os.DirEntry]:
    """The folder's entries sorted by name (none when it cannot be read: as ``os.walk`` skips
    it), a large folder's files stated ahead when ``ahead`` (:func:`_prestat`)."""
    try:
        with os.scandir(folder) as it:
            found = list(it)
    except OSError:
        return iter(())
    found.sort(key=_name)
    if ahead:
        _prestat(found)
    return iter(found)


def _name(entry: os.DirEntry) -> str:
    return entry.name


def _valid_name(rel: str) -> bool:
    """True when ``rel`` is valid UTF-8 (a name that is not was decoded with surrogates)."""
    return rel.isascii() or rel == rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def walk(root: Path, suffixes: tuple[str, ...], ahead: bool = False) -> Iterator[Listed | Skipped]:
    """Every entry under ``root`` as a candidate file or a skipped one, in the order
    :class:`pathlib.Path` sorts paths (each folder's entries by name, a subfolder's files at its
    name's place); hidden files and folders are left out, symlinked folders skipped, not
    followed. ``ahead``: state each large folder's files on 2 threads as the walk enters it
    (for a walk that goes through every file; a walk stopped at its first usable file would
    state a million files for one)."""
    real_root = root.resolve()
    pending = [(_entries(str(root), ahead), "")]
    while pending:
        entries, prefix = pending[-1]
        entry = next(entries, None)
        if entry is None:
            pending.pop()
            continue
        rel = prefix + entry.name
        if _is_folder(entry):  # as os.walk: a symlink to a folder is a folder
            skip = _folder_skip(entry, rel, real_root)
            if skip is not None:
                yield skip
            elif not entry.name.startswith("."):
                pending.append((_entries(entry.path, ahead), rel + "/"))
        elif entry.name.startswith("."):
            continue
        elif not _valid_name(rel):  # ids must be UTF-8
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            yield Skipped(shown, "file name is not valid UTF-8")
        else:
            problem = _entry_problem(entry, real_root, suffixes)
            yield Skipped(rel, problem) if problem else Listed(rel, entry.path, _stat(entry))


def list_tree(root: Path, suffixes: tuple[str, ...]) -> Listing:
    """:func:`walk` gathered: the candidates (sorted as :class:`pathlib.Path` sorts) and the
    skipped entries."""
    files: list[Listed] = []
    skipped: list[Skipped] = []
    for item in walk(root, suffixes, ahead=True):
        (files if isinstance(item, Listed) else skipped).append(item)  # type: ignore[arg-type]
    return Listing(root, tuple(files), tuple(skipped))


def list_one(path: Path, suffixes: tuple[str, ...]) -> Listing:
    """The listing of a source that is one file (its folder is the root)."""
    problem = _file_problem(path, path.parent.resolve(), suffixes)
    if problem:
        return Listing(path.parent, (), (Skipped(path.name, problem),))
    try:
        stat: os.stat_result | None = path.stat()
    except OSError:
        stat = None
    return Listing(path.parent, (Listed(path.name, str(path), stat),), ())


def list_sources(
    root: Path, suffixes: tuple[str, ...]
) -> tuple[list[Path], list[Skipped], dict[Path, tuple[int, int] | None]]:
    """Regular files under ``root`` (sorted) whose suffix is one of ``suffixes``, with skipped
    symlinks and unsupported files, and the identity (device, inode) of each file as listed."""
    listing = list_tree(root, suffixes)
    return [Path(f.path) for f in listing.files], list(listing.skipped), listing.identities()


def list_file(
    path: Path, suffixes: tuple[str, ...]
) -> tuple[list[Path], list[Skipped], dict[Path, tuple[int, int] | None]]:
    """:func:`list_sources` of a source that is one file (its folder is the root)."""
    listing = list_one(path, suffixes)
    return [Path(f.path) for f in listing.files], list(listing.skipped), listing.identities()
