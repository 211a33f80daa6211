"""SHA-256 checksums of a snapshot's files: computed when it is published, checked when it is
loaded (several files side by side)."""

from __future__ import annotations

import hashlib
from pathlib import Path

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
