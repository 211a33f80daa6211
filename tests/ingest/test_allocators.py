"""A batch run's garbage collection: young collections far apart inside the block, Python's
thresholds back after it (also when the block raises), and cyclic garbage still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from qortex_core.ingest.allocators import YOUNG_EVERY, batch_collection


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_thresholds_are_set_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    with batch_collection():
        assert gc.get_threshold()[0] == YOUNG_EVERY
        node = _Node()
        gone = weakref.ref(node)
        del node
        gc.collect()  # an explicit collection still frees cycles
        assert gone() is None
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), batch_collection(123):
        assert gc.get_threshold()[0] == 123
        raise RuntimeError("a failing run")
    assert gc.get_threshold() == before
