"""The extractions stage writes its rows in groups (appends, or an upsert where a key is
already stored), and keeps what it extracted when a later batch raises."""

from __future__ import annotations

from typing import Sequence

import pyarrow.compute as pc
import pytest

from qortex_core.ingest import chunk_stage
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage.model import Extraction, Passage
from qortex_core.storage.store import EXTRACTIONS, LanceStore

DOCS = [Passage(f"Ada Lovelace met Person{i} Smith in London.", f"Note {i}") for i in range(10)]


class Failing:
    """The offline extractor, until ``after`` passages; then a batch raises."""

    def __init__(self, after: int) -> None:
        self.inner, self.after, self.seen = OfflineExtractor(), after, 0

    @property
    def cache_key(self) -> str:
        return self.inner.cache_key

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        if self.seen + len(passages) > self.after:
            raise RuntimeError("extractor gave up")
        self.seen += len(passages)
        return self.inner.extract(passages)


class Marking:
    """The offline extractor, with every result marked failed (the LLM extractor's error rows)."""

    def __init__(self) -> None:
        self.inner = OfflineExtractor()

    @property
    def cache_key(self) -> str:
        return self.inner.cache_key

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        out = self.inner.extract(passages)
        for ex in out:
            ex.meta.update(status="failed", error="server said no")
        return out


def test_rows_are_written_in_groups_not_a_version_per_batch(tmp_path):
    store = LanceStore.open(tmp_path)
    index.sync_chunks(store, DOCS)
    before = store.versions().get(EXTRACTIONS, 0)
    report = index.extract_chunks(store, OfflineExtractor(), batch=2)
    assert report.extracted == 10 and store.count(EXTRACTIONS) == 10
    assert store.versions()[EXTRACTIONS] - before <= 2  # five batches, one write


def test_what_was_extracted_is_kept_when_a_later_batch_raises(tmp_path):
    store = LanceStore.open(tmp_path)
    index.sync_chunks(store, DOCS)
    with pytest.raises(RuntimeError, match="gave up"):
        index.extract_chunks(store, Failing(after=6), batch=3)
    assert store.count(EXTRACTIONS) == 6  # the two batches that finished
    report = index.extract_chunks(store, OfflineExtractor(), batch=3)
    assert (report.extracted, report.cached) == (4, 6)
    assert store.count(EXTRACTIONS) == 10


def test_failed_rows_are_replaced_not_duplicated(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_stage, "WRITE_ROWS", 4)  # several groups, some already stored
    store = LanceStore.open(tmp_path)
    index.sync_chunks(store, DOCS)
    report = index.extract_chunks(store, Marking(), batch=2)
    assert report.failed == 10 and store.count(EXTRACTIONS) == 10
    report = index.extract_chunks(store, OfflineExtractor(), batch=2)
    assert report.extracted == 10
    rows = store.read(EXTRACTIONS)
    assert rows.num_rows == 10 and len(pc.unique(rows["key"])) == 10
    assert set(rows["status"].to_pylist()) == {"ok"}
