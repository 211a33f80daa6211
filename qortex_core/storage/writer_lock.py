"""One writer per data home: a lock file naming its holder, stale after the holder dies.

``<home>/.writer.lock`` holds the writer's pid, the process start time (``/proc/PID/stat``
field 22, so a reused pid is not mistaken for the holder), the host, what it is doing and
since when. A second writer fails fast with one line naming the first; the lock survives
``kill -9`` as a file and is taken over once its holder is gone. Creating and taking over
happen under a short ``flock`` on ``<home>/.writer.guard``, so two writers racing over a
stale lock cannot both win. Readers never take this lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from qortex_core.errors import QortexError
from qortex_core.storage.store import is_uri

LOCK_NAME = ".writer.lock"
GUARD_NAME = ".writer.guard"


class HomeBusyError(QortexError):
    """Another live process is writing to this data home."""


@dataclass(frozen=True)
class Holder:
    """Who holds a home's writer lock."""

    pid: int
    start: str
    host: str
    what: str
    since: float

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.what} (pid {self.pid} on {self.host}, since {when})"


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" where /proc has none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name (field 2) may hold spaces


def _alive(holder: Holder) -> bool:
    if holder.host != socket.gethostname():
        return True  # another machine's process: cannot tell, so assume it is running
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's live process
    start = process_start(holder.pid)
    return not (start and holder.start and start != holder.start)  # a reused pid is not it


def read_holder(home: str | Path) -> Holder | None:
    """The recorded holder of ``home``'s lock (alive or not), or None."""
    try:
        return Holder(**json.loads((Path(home) / LOCK_NAME).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def current_holder(home: str | Path) -> Holder | None:
    """The live holder of ``home``'s writer lock, or None when it is free (or stale)."""
    holder = read_holder(home)
    return holder if holder is not None and _alive(holder) else None


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its parent, grandparent, ... (from /proc; just ``pid`` where there is none)."""
    out = {pid}
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4: the parent's pid
        out.add(pid)
    return out


def ensure_no_other_writer(home: str | Path) -> None:
    """Fail fast when a live process other than this one (or one it runs under) writes to ``home``.

    For runs that do not take the lock themselves (launched from the UI, a schedule or a sensor):
    while ``qortex ingest`` holds it, such a run stops here in one line instead of racing it.

    Raises:
        HomeBusyError: another live process holds the writer lock.
    """
    if is_uri(home):
        return
    holder = current_holder(home)
    if holder is None or holder.host != socket.gethostname():
        return
    if holder.pid not in _ancestors(os.getpid()):
        raise HomeBusyError(
            f"data home {home} is being written by {holder.describe()}; this run stops "
            "here (launch it again when that one has finished)"
        )


@contextmanager
def _guard(home: Path) -> Iterator[None]:
    with open(home / GUARD_NAME, "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


@contextmanager
def writer_lock(home: str | Path, what: str) -> Iterator[Holder]:
    """Hold ``home``'s writer lock for the ``with`` block (re-entrant within one process).

    Args:
        home: a local data home (an object-store URI is not locked: nothing to put a file in).
        what: what the writer does, for the message a second writer sees ("qortex ingest").

    Raises:
        HomeBusyError: a live process holds the lock; the message names it.
    """
    me = Holder(os.getpid(), process_start(os.getpid()), socket.gethostname(), what, time.time())
    if is_uri(home):
        yield me
        return
    root = Path(home)
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    with _guard(root):
        holder = current_holder(root)
        nested = holder is not None and (holder.pid, holder.host) == (me.pid, me.host)
        if holder is not None and not nested:
            raise HomeBusyError(
                f"data home {root} is being written by {holder.describe()}; "
                "wait for it to finish or stop it"
            )
        if not nested:
            tmp = root / f"{LOCK_NAME}.{me.pid}.tmp"
            tmp.write_text(json.dumps(asdict(me)))
            os.replace(tmp, lock)  # takes over a stale lock atomically
    if nested and holder is not None:  # this process already writes here (CLI around Dagster)
        yield holder
        return
    try:
        yield me
    finally:
        with _guard(root):
            if read_holder(root) == me:
                lock.unlink(missing_ok=True)
