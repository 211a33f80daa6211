"""Reading the home's own small files (the ``LATEST`` pointer, a manifest) without trusting them.

``LATEST`` holds the name of the published snapshot folder. Anyone who can write the home can
replace it (or a manifest) with a symlink to any file, a FIFO, or junk: a symlink is never
followed, so what an error message quotes is the home's own bytes, never another file's; a FIFO
never blocks the reader; and what ``LATEST`` holds is never shown at all.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from qortex_core.errors import SnapshotError

MAX_POINTER_BYTES = 64  # a snapshot name is 16 characters
MAX_MANIFEST_BYTES = 64 << 20


def _open_own(path: Path) -> int:
    """A descriptor of the regular file at ``path``, opened without following a symlink and
    without blocking.

    Raises:
        FileNotFoundError, NotADirectoryError, OSError: as opening it raises them.
        SnapshotError: a symlink, a socket or not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO) or path.is_symlink():
            raise SnapshotError(f"{path} is a symlink or a socket, not one of the home's files")
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SnapshotError(f"{path} is not a regular file")
    return fd


def read_own_file(path: Path, limit: int = MAX_MANIFEST_BYTES) -> str:
    """The text of one of the home's files (a manifest), never a symlink's target.

    Raises:
        FileNotFoundError, OSError: as opening or reading it raises them.
        SnapshotError: a symlink, not a regular file, over ``limit`` bytes, not UTF-8.
    """
    fd = _open_own(path)
    try:
        raw = os.read(fd, limit + 1)
        while len(raw) <= limit and (more := os.read(fd, limit + 1 - len(raw))):
            raw += more
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise SnapshotError(f"{path} is larger than {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"{path} is not UTF-8 text") from None


def read_pointer(pointer: Path, name: re.Pattern) -> str:
    """The snapshot name ``pointer`` holds: a small regular file, read without following a
    symlink, whose content fully matches ``name``.

    Raises:
        FileNotFoundError, NotADirectoryError, OSError: as opening it raises them.
        SnapshotError: a symlink, not a regular file, or not a snapshot name (its bytes are
            never shown: they may come from any file).
    """
    invalid = f"snapshot pointer {pointer} is not a valid pointer"
    fix = "publish a snapshot to replace it"
    try:
        fd = _open_own(pointer)
    except SnapshotError:
        raise SnapshotError(f"{invalid} (a symlink or not a regular file): {fix}") from None
    try:
        raw = os.read(fd, MAX_POINTER_BYTES + 1)
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if len(raw) > MAX_POINTER_BYTES or not name.fullmatch(text):
        raise SnapshotError(f"{invalid} (it does not hold a snapshot name): {fix}")
    return text
