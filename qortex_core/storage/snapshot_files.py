"""Writing a snapshot's files into its new folder: arrays as ``.npy``, tables as Arrow IPC
files, staged files linked in, each hashed (SHA-256) for the manifest."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from qortex_core.cores import usable_cores
from qortex_core.storage.checksums import HashingWriter, digests_of


class Payload(Protocol):
    """What a snapshot writes: its arrays and tables by name."""

    @property
    def arrays(self) -> Mapping[str, np.ndarray]: ...

    @property
    def tables(self) -> Mapping[str, pa.Table]: ...


def write_arrow(table: pa.Table, sink: HashingWriter) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file, which loads zero-copy from a memory
    map."""
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or no hard links there
        shutil.copyfile(source, target)


def _written(path: Path, write: Callable[[HashingWriter], None]) -> str:
    """Write ``path`` with ``write`` and flush it to disk (the publisher's own flush then finds
    nothing left to write); its SHA-256, taken as it was written."""
    with HashingWriter(path) as sink:
        write(sink)
        sink.flush()
        os.fsync(sink.fileno())
        return sink.hexdigest()


def write_payload(
    tmp: Path, snapshot: Payload, files: Mapping[str, Path], known: Mapping[str, str]
) -> dict[str, str]:
    """Write arrays, link staged files and write tables into the new folder ``tmp``; file name
    -> sha256 (a linked file's from ``known`` where given). Arrays and tables are written and
    hashed on up to 2 threads, the largest first (numpy's and Arrow's writes and ``hashlib``
    release the GIL)."""
    jobs: list[tuple[int, str, Callable[[Path], None]]] = []
    for name, array in snapshot.arrays.items():
        data = np.ascontiguousarray(array)
        jobs.append((data.nbytes, f"{name}.npy", partial(_save_npy, data)))
    for name, table in snapshot.tables.items():
        jobs.append((table.nbytes, f"{name}.arrow", partial(write_arrow, table)))
    for name, source in files.items():
        _link_or_copy(Path(source), tmp / f"{name}.npy")
    digests = {f"{name}.npy": digest for name, digest in known.items() if name in files}
    jobs.sort(key=lambda job: -job[0])
    with ThreadPoolExecutor(usable_cores(2), thread_name_prefix="snapshot-write") as pool:
        done = pool.map(lambda job: _written(tmp / job[1], job[2]), jobs)
        digests.update((file, digest) for (_, file, _), digest in zip(jobs, done))
    hashed = [p for p in sorted(tmp.iterdir()) if p.name not in digests]  # linked, unknown
    digests.update((p.name, str(d)) for p, d in zip(hashed, digests_of(hashed)))
    return digests


def _save_npy(array: np.ndarray, sink: HashingWriter) -> None:
    np.save(sink, array)  # not a real file to numpy: written in 16 MB pieces
