"""A snapshot's vector array kept as a base file plus a delta file, read as one array.

An incremental snapshot build takes most rows of a large vector array (the facts', the
concepts') from the previous snapshot, in another order. Instead of writing every row again,
it links the previous snapshot's file in (a hard link: no byte copied), writes the rows that
file lacks to a small delta file, and stores a row map: row ``i`` of the array is physical row
``rows[i]`` of the segments laid end to end. :class:`SegmentedRows` reads the three as the
``(n, d)`` array a full build writes: the same rows, so the same scores.

What a reader does with a vector array works on it: a contiguous range of rows that one
segment holds in order (a fact cell) is a view of that segment's memory map; other ranges
and lists of rows are gathered; a product with a vector runs a block of rows at a time; and
``np.asarray`` makes a copy (for small arrays: a reader of a large one takes rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROWS_SUFFIX = "-rows"  # the row map's file stem is the array's name and this
_BLOCK_ROWS = 1 << 16  # rows of one product block (a multiple of 64: see query.scoring.cosine)


class SegmentedRows:
    """A read-only ``(n, d)`` array whose row ``i`` is physical row ``rows[i]`` of
    ``segments`` laid end to end.

    Attributes:
        segments: the segment arrays (memory maps), each ``(m_k, d)`` of one dtype.
        rows: ``(n,)`` integer physical row of each row.
        names: each segment's file stem in the snapshot folder.
        paths: each segment's file, then the row map's (a build links them on).
    """

    def __init__(
        self,
        segments: Sequence[np.ndarray],
        rows: np.ndarray,
        names: Sequence[str],
        paths: Sequence[Path] = (),
    ) -> None:
        if not segments or len(names) != len(segments):
            raise ValueError("a segmented array needs one name per segment, and a segment")
        widths = {(s.ndim, s.shape[1:], s.dtype) for s in segments}
        if len(widths) != 1 or segments[0].ndim != 2:
            raise ValueError("its segments are not 2-D arrays of one width and type")
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise ValueError("its row map is not a 1-D integer array")
        self.segments = tuple(segments)
        self.starts = np.cumsum([0] + [len(s) for s in segments]).astype(np.int64)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= int(self.starts[-1])):
            raise ValueError("its row map points past its segments")
        self.rows = rows
        self.names = tuple(names)
        self.paths = tuple(paths)

    # -- the ndarray surface a reader uses -----------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.rows), int(self.segments[0].shape[1]))

    @property
    def dtype(self) -> np.dtype:
        return self.segments[0].dtype

    ndim = 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):  # rows first, then the rest on what they give
            head = self[key[0]]
            rest = key[1:] if head.ndim == 1 else (slice(None), *key[1:])
            return head[rest]
        if isinstance(key, slice):
            return self._range(key)
        if isinstance(key, (int, np.integer)):
            return self._gather(np.atleast_1d(self.rows[key]))[0]
        phys = np.asarray(self.rows[np.asarray(key)])  # numpy's rules: masks, negatives
        return self._gather(phys.ravel()).reshape(*phys.shape, self.shape[1])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        """``self @ other`` a block of :data:`_BLOCK_ROWS` rows at a time (whole 64-row groups:
        each row summed as in one product of the whole array)."""
        n = len(self.rows)
        parts = [self[s : s + _BLOCK_ROWS] @ other for s in range(0, n, _BLOCK_ROWS)]
        if parts:
            return np.concatenate(parts)
        return np.zeros((0, *np.shape(other)[1:]), np.result_type(self.dtype, other))

    # -- reads ----------------------------------------------------------------------------
    def _range(self, key: slice) -> np.ndarray:
        """Rows of a slice: a view of one segment when they lie there in order, else a copy."""
        phys = self.rows[key]
        if len(phys) and key.step in (None, 1):
            first = int(phys[0])
            k = int(np.searchsorted(self.starts, first, side="right")) - 1
            end = first + len(phys)
            if end <= self.starts[k + 1] and (len(phys) == 1 or (np.diff(phys) == 1).all()):
                return self.segments[k][first - self.starts[k] : end - self.starts[k]]
        return self._gather(np.asarray(phys))

    def _gather(self, phys: np.ndarray) -> np.ndarray:
        """(len(phys), d) the physical rows ``phys``, copied."""
        out = np.empty((len(phys), self.shape[1]), self.dtype)
        if not len(phys):
            return out
        seg = np.searchsorted(self.starts, phys, side="right") - 1  # (k,) each row's segment
        for k in np.unique(seg).tolist():
            at = np.flatnonzero(seg == k) if len(self.segments) > 1 else slice(None)
            out[at] = self.segments[k][phys[at] - self.starts[k]]
        return out


def rows_stem(name: str) -> str:
    """The file stem of array ``name``'s row map."""
    return f"{name}{ROWS_SUFFIX}"


def assemble(
    name: str, stems: Sequence[str], arrays: dict[str, np.ndarray], folder: Path
) -> SegmentedRows:
    """Array ``name`` of a loaded snapshot from its segments ``stems`` and row map, taken out of
    ``arrays`` (the folder's ``.npy`` files by stem).

    Raises:
        ValueError: a segment or the row map is missing, or they do not fit together.
    """
    missing = [s for s in (*stems, rows_stem(name)) if s not in arrays]
    if missing:
        raise ValueError(f"{name} lacks {', '.join(missing)}")
    segments = [arrays.pop(s) for s in stems]
    rows = arrays.pop(rows_stem(name))
    paths = [folder / f"{s}.npy" for s in (*stems, rows_stem(name))]
    return SegmentedRows(segments, rows, stems, paths)


def join_segments(split: dict[str, list[str]], arrays: dict[str, Any], folder: Path) -> None:
    """Replace, in ``arrays`` (a loaded snapshot's ``.npy`` files by stem), each array of
    ``split`` (name -> its segments' stems) by its :class:`SegmentedRows`.

    Raises:
        ValueError: one names the array that cannot be read, and why.
    """
    for name, stems in split.items():
        try:
            arrays[name] = assemble(name, stems, arrays, folder)
        except ValueError as exc:
            raise ValueError(f"{name} cannot be read: {exc}") from None
