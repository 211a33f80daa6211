"""Writing a snapshot's files into its new folder: arrays as ``.npy``, tables as Arrow IPC
files, staged files linked in, each hashed (:mod:`.checksums`) for the manifest."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
import pyarrow as pa

from qortex_core.cores import usable_cores
from qortex_core.storage.arrow_access import owned
from qortex_core.storage.checksums import HashingWriter, digests_of


class Payload(Protocol):
    """What a snapshot writes: its arrays and tables by name."""

    @property
    def arrays(self) -> Mapping[str, np.ndarray]: ...

    @property
    def tables(self) -> Mapping[str, pa.Table]: ...


def write_header(fh: HashingWriter | BinaryIO, rows: int, dim: int) -> None:
    """The ``.npy`` header ``np.save`` writes for a C-ordered float32 (rows, dim) array (a
    vector file written a block of rows at a time after it)."""
    descr = np.lib.format.dtype_to_descr(np.dtype(np.float32))
    np.lib.format.write_array_header_1_0(
        fh, {"descr": descr, "fortran_order": False, "shape": (rows, dim)}
    )


BLOCK_ROWS = 1 << 20  # rows of one record batch of a table written in blocks


def write_arrow(table: pa.Table, sink: HashingWriter, blocks: bool = False) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file, which loads zero-copy from a memory
    map: one record batch, or with ``blocks`` one per :data:`BLOCK_ROWS` rows, each copied
    into buffers of its own as it is written (for a table of views of other files' rows that
    no query reads: never held whole in memory, and the same bytes however it is chunked)."""
    with pa.ipc.new_file(sink, table.schema) as writer:
        if not blocks:
            writer.write_table(table)
            return
        for start in range(0, max(table.num_rows, 1), BLOCK_ROWS):
            writer.write_table(owned(table.slice(start, BLOCK_ROWS)))


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or no hard links there
        shutil.copyfile(source, target)


def write_flushed(path: Path, write: Callable[[HashingWriter], None]) -> str:
    """Write ``path`` with ``write`` and flush it to disk (the publisher's own flush then finds
    nothing left to write); its checksum, taken as it was written."""
    with HashingWriter(path) as sink:
        write(sink)
        sink.flush()
        os.fsync(sink.fileno())
        return sink.digest()


def write_payload(
    tmp: Path,
    snapshot: Payload,
    files: Mapping[str, Path],
    known: Mapping[str, str],
    blocked: Collection[str] = (),
) -> dict[str, str]:
    """Write arrays, link staged files and write tables into the new folder ``tmp``; file name
    -> checksum (a linked file's from ``known`` where given). Arrays and tables are written and
    hashed on up to 2 threads, the largest first (numpy's and Arrow's writes and ``hashlib``
    release the GIL); the tables named in ``blocked`` a block of rows at a time
    (:func:`write_arrow`)."""
    jobs: list[tuple[int, str, Callable[[Path], None]]] = []
    for name, array in snapshot.arrays.items():
        data = np.ascontiguousarray(array)
        jobs.append((data.nbytes, f"{name}.npy", partial(_save_npy, data)))
    for name, table in snapshot.tables.items():
        write = partial(write_arrow, table, blocks=name in blocked)
        jobs.append((table.nbytes, f"{name}.arrow", write))
    named = {name: f"{name}{Path(source).suffix or '.npy'}" for name, source in files.items()}
    for name, source in files.items():  # a staged ``.npy`` array or ``.arrow`` table segment
        _link_or_copy(Path(source), tmp / named[name])
    digests = {named[name]: digest for name, digest in known.items() if name in files}
    jobs.sort(key=lambda job: -job[0])
    with ThreadPoolExecutor(usable_cores(2), thread_name_prefix="snapshot-write") as pool:
        done = pool.map(lambda job: write_flushed(tmp / job[1], job[2]), jobs)
        digests.update((file, digest) for (_, file, _), digest in zip(jobs, done))
    hashed = [p for p in sorted(tmp.iterdir()) if p.name not in digests]  # linked, unknown
    digests.update((p.name, str(d)) for p, d in zip(hashed, digests_of(hashed)))
    return digests


def _save_npy(array: np.ndarray, sink: HashingWriter) -> None:
    np.save(sink, array)  # not a real file to numpy: written in 16 MB pieces
