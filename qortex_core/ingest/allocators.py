"""Freed memory handed back to the operating system between the phases of a large stage.

Arrow's allocator (mimalloc) and glibc's ``malloc`` both keep memory a phase freed for the
next allocation of their own; numpy arrays, Python objects and Arrow buffers draw from
different ones, so what one phase freed in one allocator still counts in the process's resident
memory while the next phase allocates from the other. :func:`give_back` returns it: on the 100k
ladder home, after the embedding stage's node tables were built, 315 of 870 MB.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import pyarrow as pa


@functools.lru_cache(maxsize=1)
def _malloc_trim():  # glibc only; None elsewhere (musl, macOS)
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def give_back() -> None:
    """Return the free memory both allocators hold to the operating system."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
