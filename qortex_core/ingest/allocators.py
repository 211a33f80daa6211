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
import gc
from contextlib import contextmanager
from typing import Iterator

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


YOUNG_EVERY = 50_000  # allocations between young collections in a batch run (Python: 700)


@contextmanager
def batch_collection(young_every: int = YOUNG_EVERY) -> Iterator[None]:
    """Python's cyclic garbage collector tuned for a batch run inside the block, its previous
    thresholds restored after: the stages make lists of many strings, and at the default
    thresholds a 100k-passage run of 10 new files made 1,344 collections, 8 of them over the
    whole heap (1.2 s); at these, 21 and none (0.3 s). Reference counting frees everything
    else as before."""
    before = gc.get_threshold()
    gc.set_threshold(young_every, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)
