"""Reading one source file safely: never block, never read without a bound, never trust a name.

A file listed as regular may be swapped for a FIFO, a device, a socket or a symlink to a file
outside the source root before it is read (a race the listing cannot close).
:func:`read_bounded` opens without blocking, checks the type of what it actually opened, and
reads at most ``max_bytes + 1`` bytes; :func:`read_source` (a source root's files) also opens
from the root down following no symlink, and checks that it opened the file the listing saw.
:func:`load_json`
and :func:`check_text` turn the ways a JSON corpus can lie (nesting past the parser's
recursion limit, lone surrogate escapes that no UTF-8 store accepts) into a reason to skip it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)
_BLOCK = 1 << 20


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _special(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (None: regular, or gone)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


@dataclass(frozen=True)
class SourceBytes:
    """What was read from one source file: its bytes and its modification time (epoch s)."""

    data: bytes
    mtime: float


_OPEN = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _read_open(fd: int, max_bytes: int, listed: tuple[int, int] | None = None) -> SourceBytes:
    """Read the file open at ``fd``, checked with ``fstat``: a regular file, and the one listed
    (``listed``: its ``(st_dev, st_ino)``) when given.

    Raises:
        ValueError: not a regular file, another file than listed, over ``max_bytes``, unreadable.
    """
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # re-checked on what was opened: the listing is stale
            raise ValueError(f"{_kind(info.st_mode)}, not a regular file")
        if listed is not None and (info.st_dev, info.st_ino) != tuple(listed):
            raise ValueError("replaced by another file since it was listed: not read")
        chunks: list[bytes] = []
        total = 0
        while block := os.read(fd, min(_BLOCK, max_bytes + 1 - total)):
            chunks.append(block)
            total += len(block)
            if total > max_bytes:
                raise ValueError(f"larger than {max_bytes} bytes")
        return SourceBytes(b"".join(chunks), info.st_mtime)
    except OSError as exc:
        raise ValueError(f"unreadable: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_bounded(path: Path, max_bytes: int) -> SourceBytes:
    """The bytes and modification time of the regular file at ``path``, opened without blocking.

    Raises:
        ValueError: not a regular file once opened (FIFO, device, socket), larger than
            ``max_bytes``, or unreadable; the message is the reason to record.
    """
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:  # a socket cannot be opened at all (ENXIO)
        kind = _special(path)
        raise ValueError(
            f"{kind}, not a regular file" if kind else f"unreadable: {exc.strerror or exc}"
        ) from None
    return _read_open(fd, max_bytes)


def _below(root: Path, path: Path) -> Path:
    """``path`` (listed under ``root``) relative to the resolved root; an in-root symlink is
    followed to its target, once, here.

    Raises:
        ValueError: a symlink that leads outside the root (or nowhere), a path not under it.
    """
    try:
        if not os.path.islink(path):
            return path.relative_to(root)
        return Path(os.path.realpath(path, strict=True)).relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        raise ValueError("symlink leads outside the source root (or nowhere): not read") from None


def _open_below(dir_fd: int, rel: Path) -> int:
    """A descriptor of ``rel`` opened below ``dir_fd`` one component at a time, following no
    symlink (so what opens lies inside that folder); closes ``dir_fd``.

    Raises:
        OSError: a component is missing, a symlink (ELOOP, ENOTDIR) or cannot be opened.
    """
    try:
        for part in rel.parts[:-1]:
            below = os.open(part, _DIR | _NOFOLLOW, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = below
        try:
            return os.open(rel.name, _OPEN | _NOFOLLOW, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket: say what it is
                mode = os.stat(rel.name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                raise ValueError(f"{_kind(mode)}, not a regular file") from None
            raise
    finally:
        os.close(dir_fd)


def read_source(
    root: Path, path: Path, max_bytes: int, listed: tuple[int, int] | None = None
) -> SourceBytes:
    """The bytes of the source file ``path`` under ``root``, never of a file outside it.

    The file is opened from the root down with ``O_NOFOLLOW`` on every component and checked with
    ``fstat`` (:func:`_read_open`): a file swapped for a symlink (or a folder on its path swapped
    for one) after the listing is refused, not followed; a symlink inside the root that was
    listed is followed once, to a target that must lie inside the root.

    Raises:
        ValueError: outside the root, a symlink now, not a regular file, not the file listed,
            over ``max_bytes`` or unreadable; the message is the reason to record.
    """
    rel = _below(Path(root), Path(path))
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError("lies outside the source root: not read")
    try:
        fd = _open_below(os.open(Path(root).resolve(), _DIR), rel)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", -1)):
            raise ValueError("a symlink now (swapped in after the listing): not followed") from None
        raise ValueError(f"unreadable: {exc.strerror or exc}") from None
    return _read_open(fd, max_bytes, listed)


def load_json(text: str) -> object:
    """``json.loads`` whose failures are reasons to skip a file.

    Raises:
        ValueError: not valid JSON, or nested deeper than the parser can follow.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to parse") from None


def check_text(value: str, where: str) -> str:
    """``value`` when it encodes as UTF-8.

    Raises:
        ValueError: it holds a lone surrogate (a ``\\ud800``-``\\udfff`` escape without its pair).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{where} holds a lone surrogate escape (\\u{ord(value[exc.start]):04x}) at "
            f"character {exc.start}: not valid Unicode text"
        ) from None
    return value
