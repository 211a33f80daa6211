"""Sorting and looking up content ids as 64-bit integers.

An id (:mod:`.ids`) is a kind letter, ``_`` and 16 lower-case hex digits. Within one kind the
hex digits are a 64-bit integer whose order is the strings' order, so sorting or looking up a
million ids is a numpy sort and a binary search over integers instead of Arrow's string sort or
string hash table (at 1.45M fact ids: about 0.5 s each). A column that holds anything else
(another length, mixed kinds, upper case, nulls) goes to Arrow's string kernels: the results
are the same either way.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage.arrow_access import utf8_buffers

ID_CHARS = 18  # kind letter, "_", 16 hex digits
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
# the byte two lower-case hex digits spell, indexed by the digits' bytes as a little-endian
# uint16 (first digit low), -1 for any other pair of bytes: one lookup per two digits
_OCTET = np.full(1 << 16, -1, np.int16)
_OCTET[_HEX[:, None].astype(np.int64) | (_HEX[None, :].astype(np.int64) << 8)] = (
    np.arange(16)[:, None] << 4
) | np.arange(16)[None, :]

Ids: TypeAlias = "pa.Array | pa.ChunkedArray"
HASHED = 1 << 16  # from this many ids on either side, a lookup is a compiled hash (.id_hash)


def packed(ids: Ids) -> tuple[bytes, np.ndarray] | None:
    """(the ids' common two-byte prefix, (n,) uint64 of their hex digits) when every id has the
    id format and the same prefix, else None (also for an empty column)."""
    textual = pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)
    if len(ids) == 0 or ids.null_count or not textual:
        return None
    if len(ids) >= HASHED:  # one compiled pass (the same keys: tests/storage/test_id_keys.py)
        return _compiled(ids)
    raw, at = utf8_buffers(ids)
    n = len(at) - 1
    if int(at[-1] - at[0]) != ID_CHARS * n or not (np.diff(at) == ID_CHARS).all():
        return None
    body = raw[at[0] : at[-1]].reshape(n, ID_CHARS)  # (n, 18) bytes
    prefix = body[0, :2]
    if not (body[:, :2] == prefix).all():
        return None
    pairs = np.ascontiguousarray(body[:, 2:]).view("<u2")  # (n, 8) two digits each
    octets = _OCTET[pairs]  # (n, 8) the bytes they spell
    if (octets < 0).any():
        return None
    return prefix.tobytes(), octets.astype(np.uint8).view(">u8").ravel().astype(np.uint64)


def _compiled(ids: Ids) -> tuple[bytes, np.ndarray] | None:
    """:func:`packed` by the compiled pass, a chunk at a time (its bytes are not copied)."""
    from qortex_core.storage.id_hash import hex_keys

    parts, prefix = [], None
    for chunk in ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]:
        if not len(chunk):
            continue
        raw, at = utf8_buffers(chunk)
        keys, head = hex_keys(raw, at, ID_CHARS), raw[at[0] : at[0] + 2].tobytes()
        if keys is None or prefix not in (None, head):
            return None
        prefix = head
        parts.append(keys)
    return (prefix, np.concatenate(parts)) if prefix is not None else None


def sort_indices(ids: Ids) -> np.ndarray:
    """(n,) int64 positions of ``ids`` in ascending order, equal ids in their order
    (``pyarrow.compute.sort_indices``)."""
    keys = packed(ids)
    if keys is None:
        return np.asarray(pc.sort_indices(ids).to_numpy(), np.int64)
    return _ascending(keys[1])


def index_in(values: Ids, value_set: Ids) -> np.ndarray:
    """(n,) int64 position in ``value_set`` of each of ``values`` (its first occurrence), -1
    where it is not there (``pyarrow.compute.index_in`` with nulls as -1)."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    wanted = packed(values)
    held = packed(value_set) if wanted is not None else None
    if wanted is None or held is None or wanted[0] != held[0]:
        at = pc.index_in(values, value_set=_array(value_set)).fill_null(-1)
        return np.asarray(at.to_numpy(zero_copy_only=False), np.int64)
    if max(len(values), len(value_set)) >= HASHED:
        from qortex_core.storage.id_hash import first_positions

        return first_positions(wanted[1], held[1])
    order = _ascending(held[1])  # (m,) first occurrences first among equals
    ranked = held[1][order]
    at = np.minimum(np.searchsorted(ranked, wanted[1]), len(ranked) - 1)  # (n,)
    return np.where(ranked[at] == wanted[1], order[at], -1).astype(np.int64)


def is_in(values: Ids, value_set: Ids) -> np.ndarray:
    """(n,) bool: each of ``values`` is in ``value_set`` (a null never is)."""
    if len(value_set) == 0:
        return np.zeros(len(values), bool)
    return index_in(values, value_set) >= 0


def _ascending(keys: np.ndarray) -> np.ndarray:
    """(n,) int64 stable ascending order of ``keys``: the vectorised unstable sort, which is
    the stable order when no two keys are equal (ids are unique), else the stable sort."""
    order = np.argsort(keys).astype(np.int64)
    ranked = keys[order]
    if len(ranked) > 1 and (ranked[1:] == ranked[:-1]).any():
        order = np.argsort(keys, kind="stable").astype(np.int64)
    return order


def _array(column: Ids) -> pa.Array:
    """``column`` as one array (a value set must be one)."""
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column
