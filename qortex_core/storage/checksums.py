"""SHA-256 checksums of a snapshot's files: computed as they are written (or read back when
they were not), checked when a snapshot is loaded (several files side by side)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from types import TracebackType

from qortex_core.cores import usable_cores


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read 1 MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digest(path: Path) -> str | None:
    return sha256_of(path) if path.is_file() else None


def digests_of(paths: list[Path]) -> list[str | None]:
    """SHA-256 of each path (None where it is not a file), the largest files first on up to
    4 threads: ``hashlib`` releases the GIL while it hashes, so the files of a large snapshot
    are read and hashed side by side."""
    workers = usable_cores(min(4, max(len(paths), 1)))
    if workers == 1:
        return [_digest(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    sizes = [p.stat().st_size if p.is_file() else 0 for p in paths]
    order = sorted(range(len(paths)), key=lambda i: -sizes[i])
    out: list[str | None] = [None] * len(paths)
    with ThreadPoolExecutor(workers, thread_name_prefix="qortex-verify") as pool:
        for i, digest in zip(order, pool.map(_digest, [paths[i] for i in order])):
            out[i] = digest
    return out


class HashingWriter:
    """A file opened for binary writing that hashes (SHA-256) the bytes written, in order, so
    a file's digest costs no second read of it. File-like enough for ``np.save``, Arrow's IPC
    writer and plain ``write`` calls; written sequentially (no seek)."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "wb")
        self._hash = hashlib.sha256()
        self._at = 0

    def write(self, data) -> int:  # noqa: ANN001 - bytes, memoryview or any buffer
        view = memoryview(data).cast("B")
        self._hash.update(view)  # releases the GIL on large buffers, as the write does
        written = self._fh.write(view)
        self._at += len(view)
        return written

    def tell(self) -> int:
        return self._at

    def flush(self) -> None:
        self._fh.flush()

    def fileno(self) -> int:
        return self._fh.fileno()

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        self._fh.close()

    def hexdigest(self) -> str:
        """The SHA-256 of everything written so far."""
        return self._hash.hexdigest()

    def __enter__(self) -> HashingWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class WrittenDigests:
    """Digests of files hashed as they were written, by path, each with the file's size,
    modification time and inode then: :meth:`take` gives a digest back only while the file is
    unchanged, so a stale one is never trusted (the caller hashes the file instead)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, int, int, int]] = {}

    def record(self, path: Path, digest: str) -> None:
        st = os.stat(path)
        with self._lock:
            self._known[str(path)] = (digest, st.st_size, st.st_mtime_ns, st.st_ino)

    def take(self, path: Path) -> str | None:
        """The digest recorded for ``path`` (forgotten now), or None: none recorded, or the
        file changed since."""
        with self._lock:
            known = self._known.pop(str(path), None)
        if known is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        return known[0] if (st.st_size, st.st_mtime_ns, st.st_ino) == known[1:] else None
