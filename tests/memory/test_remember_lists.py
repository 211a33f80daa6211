"""``remember_many`` with one time and one metadata dict per text (turns of a conversation)."""

from __future__ import annotations

import pytest

import qortex_core
from qortex_core.errors import RecordError
from qortex_core.memory.records import MEMORIES
from qortex_core.storage.store import LanceStore

TEXTS = ["Ann: we adopted a puppy called Miso", "Ben: what breed is Miso?", "Ann: a shiba inu"]


def test_per_text_times_and_metadata_are_stored_in_order(tmp_path, embedder):
    mem = qortex_core.open(tmp_path / "home", embedder=embedder)
    times = [f"2023-05-08T13:56:0{n}Z" for n in range(3)]
    meta = [{"dia_id": f"D1:{n}"} for n in range(1, 4)]
    records = mem.remember_many(TEXTS, time=times, metadata=meta, source="chat")
    assert [r.time for r in records] == times
    assert [r.metadata for r in records] == meta
    assert [mem.get(r.id).metadata["dia_id"] for r in records] == ["D1:1", "D1:2", "D1:3"]
    shared = mem.remember_many(TEXTS[:2], time="2023-06-01", metadata={"k": 1})
    assert [r.metadata for r in shared] == [{"k": 1}] * 2 and shared[0].time == shared[1].time


def test_lists_of_the_wrong_length_or_a_bad_entry_store_nothing(tmp_path, embedder):
    mem = qortex_core.open(tmp_path / "home", embedder=embedder)
    bad = [
        {"time": ["2023-05-08T13:56:00Z"]},  # one time for three texts
        {"metadata": [{}, {}]},
        {"time": ["2023-05-08", "not a date", "2023-05-09"]},
        {"metadata": [{}, {"x": object()}, {}]},
    ]
    for kwargs in bad:
        with pytest.raises(RecordError):
            mem.remember_many(TEXTS, **kwargs)
    assert LanceStore.open(mem.home).open_latest(MEMORIES) is None or (
        LanceStore.open(mem.home).count(MEMORIES) == 0
    )
