"""The snapshot's vector arrays, written to ``.npy`` files a block at a time and never held whole.

A table's vectors are streamed from LanceDB into a file in stored row order (checking, batch by
batch, that the rows are still the ones the stage read), then, when the snapshot stores the rows
in another order (hubs first, facts cell by cell), gathered from a read-only memory map of that
file into a second file one block of output rows at a time. The memory map's pages are released
after every block (``MADV_DONTNEED``: they stay in the page cache, not in the process), so the
stage's resident memory holds one block of the map, not the 4 bytes x dimensions x rows of
every table (5.4 GB at 1M passages with 64 dimensions). A block is sized by what a random read
maps, not by the rows it wants: Linux maps up to 64 kB around each read fault (fault-around),
so 65,536 random 256-byte rows of a 3.7 GB file mapped 3.5 GB; 16 MB blocks keep it at ~0.4 GB.
The finished files are published by link, not rewritten
(:func:`qortex_core.storage.snapshot.publish`).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from qortex_core.errors import SnapshotError
from qortex_core.ingest.cells import FAULT_AROUND
from qortex_core.storage.store import LanceStore, arrow_to_vectors

BLOCK_BYTES = 16 << 20  # mapped bytes a block of output rows may touch before release


def _header(fh: BinaryIO, rows: int, dim: int) -> None:
    """The ``.npy`` header ``np.save`` writes for a C-ordered float32 (rows, dim) array."""
    descr = np.lib.format.dtype_to_descr(np.dtype(np.float32))
    np.lib.format.write_array_header_1_0(
        fh, {"descr": descr, "fortran_order": False, "shape": (rows, dim)}
    )


def changed(name: str) -> SnapshotError:
    """The error for table ``name`` changing between two reads of one snapshot build."""
    return SnapshotError(f"table {name} changed while the snapshot read it: run it again")


def write_stored(store: LanceStore, name: str, ids: pa.ChunkedArray, path: Path) -> None:
    """``name``'s ``vector`` column, in stored row order, into the ``.npy`` file ``path``.

    ``ids`` are the stored rows' ids as the stage read them (without vectors).

    Raises:
        SnapshotError: the table changed since (other ids, more or fewer rows).
    """
    at, rows = 0, len(ids)
    with open(path, "wb") as fh:
        for batch in store.scan(name, ["id", "vector"]):
            n, dim = batch.num_rows, batch.schema.field("vector").type.list_size
            if at == 0:
                _header(fh, rows, dim)
            if at + n > rows or not ids.slice(at, n).equals(pa.chunked_array([batch.column(0)])):
                raise changed(name)
            fh.write(arrow_to_vectors(batch.column(1), dim).tobytes())
            at += n
        if at == 0:
            _header(fh, 0, 1)
    if at != rows:
        raise changed(name)


@contextmanager
def mapped(path: Path) -> Iterator[tuple[np.ndarray, Callable[[], None]]]:
    """A read-only (rows, dim) view of the ``.npy`` file ``path`` and a function that releases
    the view's resident pages (call it between blocks; it is called once more on exit). The map
    is unmapped when the last array viewing it is gone."""
    with open(path, "rb") as fh:
        fmt = np.lib.format
        major, _ = fmt.read_magic(fh)
        read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, _, _ = read(fh)
        offset = fh.tell()
        if shape[0] == 0:
            yield np.zeros(shape, np.float32), lambda: None
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = np.frombuffer(mm, np.float32, shape[0] * shape[1], offset).reshape(shape)

    def release() -> None:
        mm.madvise(mmap.MADV_DONTNEED)

    try:
        yield view, release
    finally:
        release()


def write_permuted(source: Path, order: np.ndarray, path: Path) -> None:
    """``path`` (.npy) row i = row ``order[i]`` of ``source`` (.npy), a block at a time."""
    with mapped(source) as (rows, release), open(path, "wb") as fh:
        _header(fh, len(order), rows.shape[1])
        # random rows: each read maps up to 64 kB around it (fault-around), so a step touches
        # at most BLOCK_BYTES of the map before its pages are released
        step = max(1, BLOCK_BYTES // max(4 * rows.shape[1], FAULT_AROUND))
        for start in range(0, len(order), step):
            fh.write(np.ascontiguousarray(rows[order[start : start + step]]).tobytes())
            release()


def load(path: Path) -> np.ndarray:
    """The finished file as a read-only memory map (what :func:`publish` links in)."""
    return np.load(path, mmap_mode="r")
