"""Row access to a snapshot's memory-mapped Arrow tables without per-row Python objects.

A 1M-node snapshot held as Python lists (ids, names, passage dicts, a dict of every concept
name) costs far more memory than its files. These classes keep the Arrow columns (whose buffers
live in the snapshot's memory map) and build Python objects only for the rows a query returns:
:class:`ArrowStrings` and :class:`ArrowRows` read rows on demand (``take``), and
:class:`HashLookup` finds a row by a string key through a sorted array of 64-bit hashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, overload

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

READ_CHUNK = 65_536  # rows turned into Python objects at a time while an index is built


class ArrowStrings(Sequence[str]):
    """A string column read on demand: ``strings[i]`` is one value, ``take`` a few at once.

    Slicing gives another :class:`ArrowStrings` over a zero-copy slice of the column.
    """

    def __init__(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.column = column

    def __len__(self) -> int:
        return len(self.column)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> ArrowStrings: ...

    def __getitem__(self, index: int | slice) -> str | ArrowStrings:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("ArrowStrings slices need step 1")
            return ArrowStrings(self.column.slice(start, max(stop - start, 0)))
        return self.column[int(index)].as_py()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), READ_CHUNK):
            yield from self.column.slice(start, READ_CHUNK).to_pylist()

    def take(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """The values at ``rows`` (in that order), one lookup each: Arrow's ``take`` on a
        chunked column would first concatenate (copy) every chunk."""
        return [self.column[i].as_py() for i in np.asarray(rows, dtype=np.int64).tolist()]


class ArrowRows(Sequence[dict]):
    """A table's rows as dicts, built only for the rows asked for."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    @overload
    def __getitem__(self, index: int) -> dict: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict]: ...

    def __getitem__(self, index: int | slice) -> dict | list[dict]:
        if isinstance(index, slice):
            return self.take(range(*index.indices(len(self))))
        i = int(index) + (len(self) if int(index) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"row {index} out of range for {len(self)} rows")
        return self.table.slice(i, 1).to_pylist()[0]

    def __iter__(self) -> Iterator[dict]:
        for start in range(0, len(self), READ_CHUNK):
            yield from self.table.slice(start, READ_CHUNK).to_pylist()

    def take(self, rows: Sequence[int] | np.ndarray) -> list[dict]:
        """The rows at ``rows`` (in that order) as dicts, each a zero-copy one-row slice: Arrow's
        ``take`` on a chunked table would first concatenate (copy) every column."""
        return [self[i] for i in np.asarray(rows, dtype=np.int64).tolist()]


@numba.njit(nogil=True, cache=True)
def _fnv1a(data, offsets, out):  # pragma: no cover - compiled
    """``out[i]``: 64-bit FNV-1a of the bytes ``data[offsets[i]:offsets[i + 1]]``."""
    for i in range(out.size):
        h = np.uint64(14695981039346656037)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(1099511628211)
        out[i] = h


def large_strings(strings: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One ``large_string`` array of ``strings`` (any string-like Arrow type, chunked or not):
    64-bit offsets, so a column of more than 2 GiB of text combines without overflow."""
    if isinstance(strings, pa.ChunkedArray):
        chunks = [pc.cast(c, pa.large_string()) for c in strings.chunks]
        return pa.concat_arrays(chunks) if chunks else pa.array([], pa.large_string())
    return pc.cast(strings, pa.large_string())


def utf8_buffers(strings: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string column and its (n+1,) int64 offsets into them (string i is
    ``raw[at[i]:at[i + 1]]``; a null spans whatever its slot holds), with no copy of the
    bytes of one unchunked ``large_string`` array."""
    wide = large_strings(strings)
    if not len(wide):
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    _, offsets, data = wide.buffers()
    at = np.frombuffer(offsets, np.int64)[wide.offset : wide.offset + len(wide) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return raw, at


def string_hashes(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(n,) int64 FNV-1a hash of each string's UTF-8 bytes: stable across processes, unlike
    Python's salted ``hash``, and one compiled pass over the column's buffers instead of a
    Python object per row. A null's entry is the hash of whatever bytes its slot spans
    (callers leave nulls out)."""
    raw, at = utf8_buffers(strings)
    out = np.empty(len(at) - 1, np.uint64)
    if len(out):
        _fnv1a(raw, at, out)
    return out.view(np.int64)


def key_hash(key: str) -> int:
    """:func:`string_hashes` of one string."""
    data = np.frombuffer(key.encode("utf-8", "surrogatepass"), np.uint8)
    out = np.empty(1, np.uint64)
    _fnv1a(data, np.array([0, data.size], np.int64), out)
    return int(out.view(np.int64)[0])


def sorted_key_hashes(keys: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(k,) int64 :func:`string_hashes` of the non-null ``keys``, sorted, and (k,) int32 row of
    each; equal hashes in row order (:class:`HashLookup`'s arrays)."""
    rows = np.flatnonzero(pc.is_valid(keys).to_numpy(zero_copy_only=False))  # (k,)
    h = string_hashes(keys)[rows]  # (k,)
    order = np.argsort(h, kind="stable")  # equal hashes stay in row order
    return h[order], rows[order].astype(np.int32)


@dataclass(frozen=True)
class HashLookup:
    """String key -> first row holding it, as a sorted (k,) array of 64-bit key hashes.

    The hashes are FNV-1a of the keys' UTF-8 bytes (:func:`string_hashes`), computed over the
    Arrow buffers in one compiled pass. A hash hit is confirmed against the row's own key
    (``key_at``), so a collision never returns a wrong row. Memory: 12 bytes per key instead
    of a dict entry and two objects.

    Attributes:
        hashes: (k,) int64 sorted key hashes.
        rows: (k,) int32 row of each hash; equal hashes keep row order, so the first row wins.
        key_at: the key of a row (the same function the index was built with).
    """

    hashes: np.ndarray
    rows: np.ndarray
    key_at: Callable[[int], str | None]

    @classmethod
    def of_keys(
        cls, keys: pa.Array | pa.ChunkedArray, key_at: Callable[[int], str | None]
    ) -> HashLookup:
        """Index a column of keys, one per row (null rows are left out)."""
        return cls(*sorted_key_hashes(keys), key_at)

    @classmethod
    def stored(
        cls,
        hashes: np.ndarray,
        rows: np.ndarray,
        values: ArrowStrings,
        key: Callable[[str], str | None],
    ) -> HashLookup:
        """The index :meth:`build` makes of ``values`` and ``key``, from its ``hashes`` and
        ``rows`` as :func:`sorted_key_hashes` gave them and a snapshot stored them (memory
        maps: nothing is hashed or sorted); a hit is still confirmed against ``key``."""
        return cls(hashes, rows, lambda i: _key_of(values, key, i))

    @classmethod
    def build(
        cls,
        values: ArrowStrings,
        key: Callable[[str], str | None] | None = None,
        keys: pa.Array | pa.ChunkedArray | None = None,
    ) -> HashLookup:
        """Index ``key(value)`` of every row (rows whose key is None are left out); without
        ``key``, the values themselves, read straight from the column's buffers.

        ``keys``: the column of ``key(value)`` (null for None) when the caller computed it
        column-wise; it must hold what ``key`` gives, which every hit is confirmed with.
        """
        if key is None:
            return cls.of_keys(values.column, values.__getitem__)
        if keys is not None:
            if len(keys) != len(values):
                raise ValueError(f"{len(keys)} keys for {len(values)} values")
            return cls.of_keys(keys, lambda i: _key_of(values, key, i))
        parts = []
        for start in range(0, len(values), READ_CHUNK):
            chunk = values.column.slice(start, READ_CHUNK).to_pylist()
            parts.append(pa.array([None if v is None else key(v) for v in chunk], pa.string()))
        keys = pa.chunked_array(parts, pa.string())
        return cls.of_keys(keys, lambda i: _key_of(values, key, i))

    def __len__(self) -> int:
        return int(self.hashes.size)

    def get(self, key: str) -> int | None:
        """The first row whose key is ``key``, or None."""
        if not isinstance(key, str):
            return None
        h = key_hash(key)
        lo = int(np.searchsorted(self.hashes, h, side="left"))
        hi = int(np.searchsorted(self.hashes, h, side="right"))
        for row in self.rows[lo:hi].tolist():
            if self.key_at(row) == key:
                return row
        return None

    def rows_of(self, keys: Sequence[str]) -> np.ndarray:
        """(len(keys),) int64 row of each key, -1 where absent."""
        return np.array([_or_missing(self.get(k)) for k in keys], dtype=np.int64)


def _key_of(values: ArrowStrings, key: Callable[[str], str | None], row: int) -> str | None:
    value = values[row]
    return None if value is None else key(value)


def _or_missing(row: int | None) -> int:
    return -1 if row is None else row


@dataclass(frozen=True)
class Codes:
    """A string column dictionary-encoded: ``names[codes[i]]`` is row i's value.

    Attributes:
        codes: (n,) int32 code per row, -1 for a null.
        names: the distinct non-null values.
    """

    codes: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, column: pa.ChunkedArray | pa.Array) -> Codes:
        if len(column) == 0:
            return cls(np.zeros(0, np.int32), ())
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.unify_dictionaries().combine_chunks()
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)  # (n,)
        return cls(codes.astype(np.int32), tuple(encoded.dictionary.to_pylist()))

    def mask(self, values: Sequence[str]) -> np.ndarray:
        """(n,) True for rows whose value is in ``values``."""
        wanted = [c for c, name in enumerate(self.names) if name in set(values)]
        return np.isin(self.codes, np.asarray(wanted, dtype=np.int32))


RUNS_PER_ROW = 1 / 64  # at most one run of consecutive rows per this many rows: copy by runs


def _runs(table: pa.Table, order: np.ndarray) -> list[pa.Table] | None:
    """``table``'s rows ``order`` as zero-copy slices, one a run of consecutive rows, when
    ``order`` is mostly such runs; else None."""
    breaks = np.flatnonzero(np.diff(order) != 1) + 1  # (runs - 1,) where a run starts
    if len(order) == 0 or len(breaks) + 1 > max(1.0, RUNS_PER_ROW * len(order)):
        return None
    starts = np.concatenate([[0], breaks])  # (runs,)
    stops = np.concatenate([breaks, [len(order)]])
    return [table.slice(int(order[a]), int(b - a)) for a, b in zip(starts, stops)]


def view_rows(table: pa.Table, order: np.ndarray) -> pa.Table:
    """``table.take(order)``, without a copy when ``order`` is mostly runs of consecutive
    rows: a table of slices (they keep their parents' whole buffers: for rows that are copied
    again before anything is written), else Arrow's ``take``."""
    order = np.asarray(order, np.int64)
    pieces = _runs(table, order)
    return table.take(pa.array(order)) if pieces is None else pa.concat_tables(pieces)


def runs_of(table: pa.Table, order: np.ndarray) -> pa.Table:
    """``table.take(order)`` as a table of zero-copy slices, one a run of consecutive rows, when
    ``order`` is mostly such runs and every column then has several chunks (which
    ``combine_chunks`` or :func:`owned` copy into buffers of their own before anything is
    written); else :func:`take_rows`' copy (a lone slice would keep its parent's whole
    buffers). For rows of a memory-mapped file that are only read until they are written: they
    stay the file's pages, not memory of the process."""
    order = np.asarray(order, np.int64)
    pieces = _runs(table, order)
    whole = len(order) == table.num_rows and pieces is not None and len(pieces) == 1
    viewed = table if whole else pa.concat_tables(pieces) if pieces is not None else None
    if viewed is None or min((c.num_chunks for c in viewed.columns), default=0) < 2:
        return take_rows(table, order)
    return viewed


def owned(table: pa.Table) -> pa.Table:
    """``table`` as one chunk per column in buffers of its own, holding its rows only (Arrow's
    IPC writer writes a sliced array's whole buffers: the bytes of rows left out)."""
    return pa.table(
        {
            c: pa.concat_arrays(table[c].chunks)
            if table[c].num_chunks
            else pa.array([], table.schema.field(c).type)
            for c in table.column_names
        }
    )


def take_rows(table: pa.Table, order: np.ndarray) -> pa.Table:
    """``table.take(order)`` as one chunk per column, holding the rows asked for only; when
    ``order`` is mostly runs of consecutive rows (a base's rows with a few inserted or
    removed), the runs are sliced and concatenated (a copy of whole buffers, several times
    cheaper than a row-by-row gather of string and list columns), else Arrow's ``take``."""
    order = np.asarray(order, np.int64)
    pieces = _runs(table, order)
    if pieces is not None and len(pieces) > 1:
        return pa.concat_tables(pieces).combine_chunks()
    # a lone slice would keep its parent's whole buffers (the bytes of rows left out, which a
    # purge must not find in a published file)
    return table.take(pa.array(order)).combine_chunks()


def take_scattered(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)`` as one chunk per column, taken chunk by chunk: Arrow's ``take`` on
    a table of many chunks (views of a base's runs) first combines every column, a copy of
    the whole table for a few rows."""
    rows = np.asarray(rows, np.int64)
    if table.num_rows == 0 or len(rows) == 0 or table.column(0).num_chunks <= 1:
        return table.take(pa.array(rows)).combine_chunks()
    batches = table.to_batches()  # zero-copy: record batches where all columns' chunks meet
    starts = np.cumsum([0] + [b.num_rows for b in batches])  # (batches + 1,)
    chunk = np.searchsorted(starts, rows, side="right") - 1  # (k,) each row's batch
    by_chunk = np.argsort(chunk, kind="stable")  # (k,) rows grouped by batch
    grouped_rows, grouped_chunk = rows[by_chunk], chunk[by_chunk]
    used, first = np.unique(grouped_chunk, return_index=True)  # (u,) batches hit, where each starts
    ends = np.append(first[1:], len(rows))
    parts = [
        batches[c].take(pa.array(grouped_rows[a:b] - starts[c]))
        for c, a, b in zip(used.tolist(), first.tolist(), ends.tolist())
    ]
    grouped = pa.Table.from_batches(parts, table.schema).combine_chunks()
    back = np.empty(len(rows), np.int64)
    back[by_chunk] = np.arange(len(rows))  # (k,) each asked row's place among the grouped
    return grouped.take(pa.array(back))


def equal_at(
    left: pa.ChunkedArray | pa.Array,
    at: np.ndarray,
    right: pa.ChunkedArray | pa.Array,
    to: np.ndarray,
) -> np.ndarray:
    """(len(at),) bool: ``left[at[i]] == right[to[i]]`` (a null equals nothing), compared by
    Arrow over the rows taken, with no Python object per row."""
    if len(at) == 0:
        return np.zeros(0, bool)
    equal = pc.equal(left.take(pa.array(at)), right.take(pa.array(to)))
    return np.asarray(pc.fill_null(equal, False).to_numpy(zero_copy_only=False), bool)
