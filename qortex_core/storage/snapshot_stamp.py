"""Which files of a published snapshot are known whole without hashing them again.

Loading a snapshot checks every file's checksum against its manifest; at 1M passages that is
8 GB read and hashed by every ``Retriever.open`` and by every incremental build's base. A
snapshot's files are never written after they are published, so, as git's index does, a file
whose size, modification time, inode and device are those recorded when it was last hashed
and found whole is trusted without reading it (a stamp, ``.hashed.json`` in the snapshot's
folder, one entry a file with the digest it was checked against).

A write to a file changes its modification time to the present. Publishing sets each new
file's modification time one second into the past before it records the stamp, and a load
records only files last modified more than a second ago, so a write in the same clock tick
as the stamp still shows. What a stamp cannot see is a change that keeps all four (a disk
flipping bits, or someone resetting the time on purpose): ``qortex doctor`` hashes every file.
A stamp that cannot be read or written (a read-only home) only means the files are hashed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

STAMP = ".hashed.json"
_SETTLED_NS = 1_000_000_000  # a file modified this recently is hashed again next time


def _key(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]


def keys_of(folder: Path, names: list[str]) -> dict[str, list[int] | None]:
    """The stamp key (size, modification time, inode, device) of each file, None if missing."""
    return {name: _key(folder / name) for name in names}


def trusted(folder: Path, files: Mapping[str, str]) -> set[str]:
    """The names among ``files`` (name -> manifest digest) that the stamp holds with the same
    digest and whose key is the one recorded."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(stamp, dict):
        return set()
    now = keys_of(folder, [name for name in files if isinstance(stamp.get(name), dict)])
    return {
        name
        for name, key in now.items()
        if key is not None
        and stamp[name].get("digest") == files[name]
        and stamp[name].get("key") == key
    }


def record(folder: Path, files: Mapping[str, str], keys: Mapping[str, list[int] | None]) -> None:
    """Stamp the files of ``files`` (name -> digest they were found to have) with ``keys``
    taken before they were hashed; files modified in the last second are left out. Best
    effort: a stamp that cannot be written is not an error."""
    settled = time.time_ns() - _SETTLED_NS
    entries = {
        name: {"digest": digest, "key": key}
        for name, digest in files.items()
        if (key := keys.get(name)) is not None and key[1] < settled
    }
    tmp = folder / f".hashed-{uuid.uuid4().hex}.tmp"
    try:
        tmp.write_text(json.dumps(entries, sort_keys=True))
        os.rename(tmp, folder / STAMP)  # POSIX: replaces an older stamp atomically
    except OSError:
        with contextlib.suppress(OSError):  # a read-only file system refuses the unlink too
            tmp.unlink(missing_ok=True)


def seal(folder: Path, files: Mapping[str, str]) -> None:
    """Stamp new files (name -> the digest they were written with), each modification time
    first set a second into the past (see the module): any later write then shows."""
    for name in files:
        st = os.stat(folder / name)
        os.utime(folder / name, ns=(st.st_atime_ns, st.st_mtime_ns - _SETTLED_NS - 1))
    record(folder, files, keys_of(folder, list(files)))
