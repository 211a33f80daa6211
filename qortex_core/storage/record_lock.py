"""The records lock: one writer at a time on a home's ``memories`` table, across processes.

Appends alone would not need it (Lance commits them without conflict), but a revision is a
read-then-write: ``update`` and ``forget`` read a record's newest revision and append the next
one, so two processes revising one record at once would both write revision 2. Purge rewrites
the whole table and cleans the files of old versions, which would drop, or break, an append
committed meanwhile. Every write to the table therefore happens under an exclusive ``flock``
on ``<home>/.records.lock``:

- ``remember``, ``update``, ``forget`` and consolidation's merges hold it for the read of the
  newest revision and the append (milliseconds; embedding happens before it is taken);
- ``purge`` holds it while it scrubs, rewrites and cleans the table, and writers wait.

The kernel releases a ``flock`` when its holder dies, so a ``kill -9`` never leaves it held.
An object-store home has no file to lock: its writes are not serialised (documented).
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from qortex_core.storage.store import is_uri
from qortex_core.storage.writer_lock import HomeBusyError

LOCK_NAME = ".records.lock"
WAIT_S = 120.0  # a purge of a large table may hold it this long; writers wait, then fail
_POLL_S = 0.005


def is_local(home: str | Path) -> bool:
    """True for a folder on this machine (an object-store URI has no file to lock)."""
    return not is_uri(home)


@contextmanager
def records_lock(home: str | Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold ``home``'s records lock for the ``with`` block (waits up to ``wait_s`` seconds).

    Re-entrant within one process only by not nesting: callers take it once around a
    read-then-append.

    Raises:
        HomeBusyError: still held by another process after ``wait_s`` seconds.
    """
    if not is_local(home):
        yield
        return
    root = Path(home)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _acquire(fd, root, wait_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, root: Path, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    delay = _POLL_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise HomeBusyError(
                    f"the memories of data home {root} stayed locked for {wait_s:.0f} s "
                    "(a purge or another writer); retry when it has finished"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
