"""The snapshot's vector arrays, written to ``.npy`` files a block at a time and never held whole.

A table's vectors are streamed from LanceDB into a file in stored row order (checking, batch by
batch, that the rows are still the ones the stage read), then, when the snapshot stores the rows
in another order (hubs first, facts cell by cell), permuted into a second file by two sequential
passes through a spill file (:func:`write_permuted`): no random reads at all. The gather it
replaced read random rows from a memory map, one page fault each (Linux maps up to 64 kB around
a read fault), and a fault over the 3.7 GB facts file of 1M passages cost about twice one over a
370 MB file: 27 s at 1M against 1.3 s at 100k. The fact cells still read a memory map of the
stored-order file (:func:`mapped`), in order, releasing its pages after every block
(``MADV_DONTNEED``: they stay in the page cache, not in the process), so the stage's resident
memory holds one block of the map, not every table's vectors (5.4 GB at 1M passages with 64
dimensions). The finished files are published by link, not rewritten
(:func:`qortex_core.storage.snapshot.publish`).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from qortex_core.errors import SnapshotError
from qortex_core.storage.checksums import HashingWriter, WrittenDigests, file_digest
from qortex_core.storage.segmented_rows import SegmentedRows
from qortex_core.storage.snapshot_files import write_header
from qortex_core.storage.store import LanceStore, arrow_to_vectors

BLOCK_BYTES = 16 << 20  # bytes of rows a block of the permutation reads and writes at once
WRITTEN = WrittenDigests()  # the files below, hashed as written (what ``_sealed`` takes)


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
    with HashingWriter(path) as fh:
        for batch in store.scan(name, ["id", "vector"]):
            n, dim = batch.num_rows, batch.schema.field("vector").type.list_size
            if at == 0:
                write_header(fh, rows, dim)
            if at + n > rows or not ids.slice(at, n).equals(pa.chunked_array([batch.column(0)])):
                raise changed(name)
            fh.write(arrow_to_vectors(batch.column(1), dim).tobytes())
            at += n
        if at == 0:
            write_header(fh, 0, 1)
    if at != rows:
        raise changed(name)
    WRITTEN.record(path, fh.digest())


def _npy_layout(fh: BinaryIO) -> tuple[tuple[int, ...], int]:
    """The shape and data offset of the open ``.npy`` file ``fh`` (left at the data)."""
    fmt = np.lib.format
    major, _ = fmt.read_magic(fh)
    read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
    shape, _, _ = read(fh)
    return shape, fh.tell()


@contextmanager
def mapped(path: Path) -> Iterator[tuple[np.ndarray, Callable[[], None]]]:
    """A read-only (rows, dim) view of the ``.npy`` file ``path`` and a function that releases
    the view's resident pages (call it between blocks; it is called once more on exit). The map
    is unmapped when the last array viewing it is gone."""
    with open(path, "rb") as fh:
        shape, offset = _npy_layout(fh)
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


def release(array: np.ndarray | SegmentedRows) -> None:
    """Drop the resident pages of the file map ``array`` views, if it views one (a snapshot's
    memory-mapped array): they stay in the page cache, and a later read maps them again.
    Call it between the blocks of a pass over a base snapshot's vectors, so that the pass
    holds one block of them, not the file."""
    if isinstance(array, SegmentedRows):
        for segment in array.segments:
            release(segment)
        return
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, mmap.mmap):
        base.madvise(mmap.MADV_DONTNEED)


def _read_rows(fh: BinaryIO, offset: int, start: int, rows: int, dim: int) -> np.ndarray:
    """(rows, dim) float32 rows ``start:start+rows`` of the file ``fh`` whose data starts at
    ``offset``."""
    out = np.empty((rows, dim), np.float32)
    fh.seek(offset + start * dim * 4)
    if fh.readinto(out.data.cast("B")) != out.nbytes:  # type: ignore[attr-defined]
        raise SnapshotError(f"{getattr(fh, 'name', 'a vector file')} is shorter than its header")
    return out


def _spill(src: BinaryIO, offset: int, dest: np.ndarray, dim: int, step: int, fd: int) -> None:
    """Pass 1: each source row appended, in source order, to the spill region of the output
    block it belongs to (block b's region: spill rows ``b*step:(b+1)*step``, exactly filled
    because ``dest`` is a permutation)."""
    n = len(dest)
    cursor = np.arange(0, n, step, dtype=np.int64)  # (blocks,) next spill row of each region
    for start in range(0, n, step):
        rows = _read_rows(src, offset, start, min(step, n - start), dim)  # (rows, dim)
        block = dest[start : start + len(rows)] // step  # (rows,) each row's output block
        grouped = rows[np.argsort(block, kind="stable")]  # by output block, source order within
        counts = np.bincount(block, minlength=len(cursor))  # (blocks,)
        at = 0
        for b in np.flatnonzero(counts).tolist():
            piece = grouped[at : at + counts[b]]
            os.pwrite(fd, piece.data.cast("B"), int(cursor[b]) * dim * 4)
            cursor[b] += counts[b]
            at += counts[b]


def _inverse(order: np.ndarray, n: int, name: str) -> np.ndarray:
    """(n,) int64: the position of each source row in ``order``.

    Raises:
        SnapshotError: ``order`` is not a permutation of ``range(n)``.
    """
    dest = np.full(n, -1, np.int64)
    if len(order) == n and (n == 0 or (int(order.min()) >= 0 and int(order.max()) < n)):
        dest[order] = np.arange(n)
    if len(order) != n or (dest < 0).any():  # a repeated row leaves another one unplaced
        raise SnapshotError(f"{name}: the row order is not a permutation of its rows")
    return dest


def write_permuted(source: Path, order: np.ndarray, path: Path) -> None:
    """``path`` (.npy) row i = row ``order[i]`` of ``source`` (.npy), in two sequential passes.

    Pass 1 reads the source a block at a time and writes each row into the region of a spill
    file that belongs to its output block; pass 2 reads each region (``order``'s rows for that
    block, in source order) and writes them in output order. Every read and write is of whole
    blocks or of one output block's share of a source block: O(n) bytes moved, no page faults
    on a map and no memory beyond a few blocks and the inverse permutation.

    Raises:
        SnapshotError: ``order`` is not a permutation of the source's rows.
    """
    with open(source, "rb") as src:
        (n, dim), offset = _npy_layout(src)
        dest = _inverse(order, n, source.name)  # (n,) output row of each source row
        step = max(1, BLOCK_BYTES // max(4 * dim, 1))  # rows a block
        spill = path.with_name(path.name + ".spill")
        try:
            with open(spill, "w+b") as sp:
                sp.truncate(n * dim * 4)
                _spill(src, offset, dest, dim, step, sp.fileno())
                del dest
                with HashingWriter(path) as fh:
                    write_header(fh, n, dim)
                    for start in range(0, n, step):
                        want = order[start : start + step]  # (rows,) source rows of this block
                        region = _read_rows(sp, 0, start, len(want), dim)  # source order
                        out = np.empty_like(region)
                        out[np.argsort(want)] = region  # region row k: the k-th smallest want
                        fh.write(out.data.cast("B"))
                WRITTEN.record(path, fh.digest())
        finally:
            spill.unlink(missing_ok=True)


def load(path: Path) -> np.ndarray:
    """The finished file as a read-only memory map (what :func:`publish` links in)."""
    return np.load(path, mmap_mode="r")


Staged = np.ndarray | SegmentedRows


def _sealed(write: Callable[[], Staged]) -> tuple[Staged, dict[str, str]]:
    """The memory map ``write`` returns (or the segments and row map of one), once its files
    are hashed (as they were written, where the writer recorded it in :data:`WRITTEN`) and on
    disk: each file's path -> checksum."""
    array = write()
    if isinstance(array, SegmentedRows):
        paths = list(array.paths)
    else:
        paths = [Path(str(getattr(array, "filename", "") or ""))]
    digests = {}
    for path in paths:
        if not path.is_file():
            raise SnapshotError("a staged vector array is not a file")  # a caller's bug
        digests[str(path)] = WRITTEN.take(path) or file_digest(path)
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
    return array, digests


class VectorFiles:
    """The snapshot's vector files, written beside the build on one worker thread, in the
    order asked (Lance reads, numpy copies and file writes release the GIL, so the build goes
    on meanwhile); each finished file is hashed and flushed there, so publishing links it in
    without reading it again (:func:`qortex_core.storage.snapshot.publish`'s ``digests``)."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._pending: dict[str, Future[tuple[Staged, dict[str, str]]]] = {}

    @classmethod
    @contextmanager
    def beside(cls) -> Iterator[VectorFiles]:
        """Files written on a worker that is joined on exit (what it had not begun is dropped
        when the build fails)."""
        pool = ThreadPoolExecutor(1, thread_name_prefix="snapshot-vectors")
        try:
            yield cls(pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, name: str, write: Callable[[], Staged]) -> None:
        """Write table ``name``'s file with ``write`` (which returns its memory map)."""
        self._pending[name] = self._pool.submit(_sealed, write)

    def get(self, name: str) -> Staged:
        """Table ``name``'s finished vectors (re-raises what writing them raised)."""
        return self._pending[name].result()[0]

    def digests(self) -> dict[str, str]:
        """Each finished file's path -> checksum."""
        return {p: d for f in self._pending.values() for p, d in f.result()[1].items()}
