"""A command's garbage collection: rare while it starts (imports), Python's thresholds during
a run over a frozen heap, the thresholds of before back after each block (also when it raises),
and cyclic garbage made during a run still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from qortex_core.ingest.allocators import (
    STARTUP,
    _mallopt,
    batch_collection,
    quiet_startup,
    reused_pages,
)


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_startup_and_run_thresholds_are_set_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    with quiet_startup():
        assert gc.get_threshold() == STARTUP
        with batch_collection():
            assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() > 0
            node = _Node()
            gone = weakref.ref(node)
            del node
            gc.collect()  # made during the run: not frozen, collected
            assert gone() is None
        assert gc.get_threshold() == STARTUP and gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), quiet_startup(), batch_collection():
        raise RuntimeError("a failing run")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def _faults_of_fresh_block() -> int:
    """Minor page faults of allocating, filling and freeing a 64 MB array, after one such
    array was allocated and freed already."""
    import resource

    import numpy as np

    np.ones(8 << 20)  # 64 MB, freed at once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(8 << 20)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(_mallopt() is None, reason="glibc's mallopt is not available")
def test_freed_blocks_are_reused_inside_a_run_and_mapped_afresh_outside():
    assert _faults_of_fresh_block() > 0  # glibc maps a block this large anew each time
    with reused_pages():
        _faults_of_fresh_block()  # the heap grows once
        assert _faults_of_fresh_block() == 0  # then the freed block is the next one
    assert _faults_of_fresh_block() > 0  # thresholds back to glibc's own
