"""Compiled hash lookups of packed content ids (:mod:`.id_keys`, numba).

``index_in`` of a million ids by a sort and a binary search is ~20 dependent cache misses a
lookup (0.3 s at 1.45M facts); an open-addressing table over the smaller side is one or two,
and leaves the larger side unsorted. The keys are the hex digits of a content hash, so they are
spread already; Fibonacci hashing mixes them anyway. Imported only for large lookups.
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(nogil=True, cache=True)
def _bits(n):  # pragma: no cover - compiled
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    return bits


@numba.njit(nogil=True, cache=True)
def _slot(key, shift, slots, keys):  # pragma: no cover - compiled
    """The slot holding ``key``, or the empty slot where it would go."""
    mask = len(slots) - 1
    at = np.int64((key * _GOLDEN) >> shift)
    while slots[at] != -1 and keys[slots[at]] != key:
        at = (at + 1) & mask
    return at


@numba.njit(nogil=True, cache=True)
def _table(keys):  # pragma: no cover - compiled
    """Slots over ``keys``: each distinct key's first position, -1 for an empty slot."""
    bits = _bits(len(keys))
    slots = np.full(1 << bits, -1, np.int64)
    shift = np.uint64(64 - bits)
    for i in range(len(keys)):
        at = _slot(keys[i], shift, slots, keys)
        if slots[at] == -1:
            slots[at] = i
    return slots, shift


@numba.njit(nogil=True, cache=True)
def _probe_held(values, held):  # pragma: no cover - compiled
    slots, shift = _table(held)
    out = np.empty(len(values), np.int64)
    for j in range(len(values)):
        out[j] = slots[_slot(values[j], shift, slots, held)]
    return out


@numba.njit(nogil=True, cache=True)
def _scan_held(values, held):  # pragma: no cover - compiled
    slots, shift = _table(values)
    first = np.full(len(slots), -1, np.int64)  # per slot: the key's first position in held
    for i in range(len(held)):
        at = _slot(held[i], shift, slots, values)
        if slots[at] != -1 and first[at] == -1:
            first[at] = i
    out = np.empty(len(values), np.int64)
    for j in range(len(values)):
        out[j] = first[_slot(values[j], shift, slots, values)]
    return out


def first_positions(values: np.ndarray, held: np.ndarray) -> np.ndarray:
    """(n,) int64 position of each of ``values`` ((n,) uint64) in ``held`` ((m,) uint64), its
    first occurrence, -1 where it is not there. The table is built over the smaller side."""
    if len(values) == 0 or len(held) == 0:
        return np.full(len(values), -1, np.int64)
    values, held = np.ascontiguousarray(values), np.ascontiguousarray(held)
    return _probe_held(values, held) if len(held) <= len(values) else _scan_held(values, held)


_DIGIT = np.full(256, -1, np.int64)  # each byte's value as a lower-case hex digit, else -1
_DIGIT[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16)


@numba.njit(nogil=True, cache=True)
def _hex_digits(raw, at, width, digit, out):  # pragma: no cover - compiled
    """``out[i]``: the hex digits of string ``i`` after its two-byte prefix, as the bits of an
    integer; False at the first string of another width or prefix (the first string's), or
    when any digit is not lower-case hex (``digit`` -1: branch-free, all bits set)."""
    if at[1] - at[0] != width or width < 2:
        return False
    p0, p1 = raw[at[0]], raw[at[0] + 1]
    bad = 0
    for i in range(out.size):
        s = at[i]
        if at[i + 1] - s != width or raw[s] != p0 or raw[s + 1] != p1:
            return False
        x = 0
        for j in range(s + 2, s + width):
            d = digit[raw[j]]
            bad |= d
            x = (x << 4) | (d & 15)
        out[i] = x
    return bad >= 0


def hex_keys(raw: np.ndarray, at: np.ndarray, width: int) -> np.ndarray | None:
    """(n,) uint64 of each string's hex digits after a common two-byte prefix, one compiled
    pass over the UTF-8 bytes ``raw`` at offsets ``at`` (n + 1); None when a string is not
    ``width`` bytes of that prefix and lower-case hex digits."""
    out = np.empty(len(at) - 1, np.int64)
    ok = len(out) > 0 and _hex_digits(raw, at, width, _DIGIT, out)
    return out.view(np.uint64) if ok else None
