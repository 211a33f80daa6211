"""Checksums of a snapshot's files: computed as they are written (or read back when they
were not), checked when a snapshot is loaded (several files side by side).

A checksum finds a damaged file (a torn write, a disk flipping bits); nobody who could forge
one is kept out by it (whoever can rewrite a file can rewrite the manifest beside it). So new
files are hashed with XXH3-128 (``xxh3-128:`` and 32 hex digits), about 20 GB/s on one core
where SHA-256 gives 1.7: at 1M passages every build writes and hashes 9 GB. A checksum of 64
hex digits and no prefix is the SHA-256 an older qortex wrote; it is still checked as such.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Protocol

import xxhash

from qortex_core.cores import usable_cores

ALGORITHM = "xxh3-128"  # new files' checksums: "xxh3-128:<32 hex digits>"
_LEGACY_HEX = 64  # a bare SHA-256


class _Hash(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


def _hasher(like: str | None) -> tuple[_Hash, str]:
    """A fresh hash and the prefix of its checksum: the algorithm of the checksum ``like``
    (a bare 64-digit one is SHA-256), the current one when None."""
    if like is not None and len(like) == _LEGACY_HEX and ":" not in like:
        return hashlib.sha256(), ""
    return xxhash.xxh3_128(), f"{ALGORITHM}:"


def file_digest(path: Path, like: str | None = None) -> str:
    """The checksum of a file, read 1 MiB at a time, by the algorithm of ``like`` (a manifest's
    checksum to compare with; None: the current algorithm)."""
    h, prefix = _hasher(like)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return prefix + h.hexdigest()


def _digest(job: tuple[Path, str | None]) -> str | None:
    path, like = job
    return file_digest(path, like) if path.is_file() else None


def digests_of(paths: list[Path], like: list[str | None] | None = None) -> list[str | None]:
    """The checksum of each path (None where it is not a file), by the algorithm of the
    matching ``like`` (see :func:`file_digest`), the largest files first on up to 4 threads:
    the hashes release the GIL, so the files of a large snapshot are read and hashed side by
    side."""
    jobs = list(zip(paths, like if like is not None else [None] * len(paths)))
    workers = usable_cores(min(4, max(len(paths), 1)))
    if workers == 1:
        return [_digest(job) for job in jobs]
    from concurrent.futures import ThreadPoolExecutor

    sizes = [p.stat().st_size if p.is_file() else 0 for p in paths]
    order = sorted(range(len(paths)), key=lambda i: -sizes[i])
    out: list[str | None] = [None] * len(paths)
    with ThreadPoolExecutor(workers, thread_name_prefix="qortex-verify") as pool:
        for i, digest in zip(order, pool.map(_digest, [jobs[i] for i in order])):
            out[i] = digest
    return out


class HashingWriter:
    """A file opened for binary writing that hashes (:data:`ALGORITHM`) the bytes written, in
    order, so a file's checksum costs no second read of it. File-like enough for ``np.save``,
    Arrow's IPC writer and plain ``write`` calls; written sequentially (no seek)."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "wb")
        self._hash, self._prefix = _hasher(None)
        self._at = 0

    def write(self, data) -> int:  # noqa: ANN001 - bytes, memoryview or any buffer
        view = memoryview(data).cast("B")
        self._hash.update(view)  # releases the GIL, as the write does
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

    def digest(self) -> str:
        """The checksum of everything written so far (:func:`file_digest`'s form)."""
        return self._prefix + self._hash.hexdigest()

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
