"""SHA-256 checksums of a snapshot's files: computed when it is published, checked when it is
loaded (several files side by side)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


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
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    workers = max(1, min(4, cores, len(paths)))
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
