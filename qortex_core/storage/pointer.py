"""Reading the ``LATEST`` pointer file without trusting it.

``LATEST`` holds the name of the published snapshot folder. Anyone who can write the home can
replace it with a symlink to any file, a FIFO, or junk; what is in it is then never shown (an
error message must not leak another file's bytes) and a FIFO never blocks the reader.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from qortex_core.errors import SnapshotError

MAX_POINTER_BYTES = 64  # a snapshot name is 16 characters


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
        fd = os.open(pointer, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO) or pointer.is_symlink():
            raise SnapshotError(f"{invalid} (a symlink or a socket): {fix}") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SnapshotError(f"{invalid} (not a regular file): {fix}")
        raw = os.read(fd, MAX_POINTER_BYTES + 1)
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if len(raw) > MAX_POINTER_BYTES or not name.fullmatch(text):
        raise SnapshotError(f"{invalid} (it does not hold a snapshot name): {fix}")
    return text
