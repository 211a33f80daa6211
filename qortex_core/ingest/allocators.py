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


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc malloc.h)
_GLIBC_DEFAULT = 128 * 1024  # both thresholds' initial value
KEEP_FREED = 256 << 20  # blocks up to this size come from, and go back to, the heap in a run


@functools.lru_cache(maxsize=1)
def _mallopt():  # glibc only; None elsewhere
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    except OSError:
        return None


@contextmanager
def reused_pages(limit: int = KEEP_FREED) -> Iterator[None]:
    """Blocks of up to ``limit`` bytes that glibc's ``malloc`` frees inside the block are kept
    for the next allocation instead of being unmapped (numpy's arrays of more than 32 MB are
    otherwise mapped afresh each time, and the kernel zeroes every page of each: 15 % of a
    100k-passage +10 run's processor time); :func:`give_back` still returns them between
    phases. glibc's thresholds are set back to their initial values after."""
    opt = _mallopt()
    if opt is not None:
        opt(_M_MMAP_THRESHOLD, limit)
        opt(_M_TRIM_THRESHOLD, limit)
    try:
        yield
    finally:
        if opt is not None:
            opt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT)
            opt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT)


def give_back() -> None:
    """Return the free memory both allocators hold to the operating system."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


STARTUP = (50_000, 20, 20)  # thresholds while a command imports its modules (Python: 700, 10, 10)


@contextmanager
def quiet_startup() -> Iterator[None]:
    """Collect cyclic garbage rarely inside the block, the thresholds of before restored after:
    for a command's start, where importing Dagster, LanceDB and the query stack makes long-lived
    objects only and at Python's thresholds the interpreter walked them all six times (0.6 s)
    before a run began. A run inside it sets its own (:func:`batch_collection`)."""
    before = gc.get_threshold()
    gc.set_threshold(*STARTUP)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextmanager
def batch_collection() -> Iterator[None]:
    """Python's default collection thresholds inside the block, over a heap whose objects made
    so far (the imported modules) are frozen out of the collector's walks; the thresholds of
    before are restored after. Young collections stay frequent: a stage's reference cycles that
    hold large buffers are freed as promptly as Python frees them (fewer collections kept a
    100k-passage full build's peak 1 GB higher)."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
