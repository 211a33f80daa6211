"""The chunks stage in proportion to the change gives the rows the full stage gives: after each
change, the chunks table equals a full chunking of the same documents, also when two documents
hold the same chunk (the row names the later document)."""

from __future__ import annotations

import pytest

from qortex_core.embed import HashEmbedder, HashEmbedderConfig, token_window
from qortex_core.ingest.document_chunks import chunk, chunk_stored
from qortex_core.ingest.documents import Document, Section, read_stored_documents, sync_documents
from qortex_core.storage import key_index
from qortex_core.storage.store import CHUNKS, LanceStore

WINDOW = token_window(HashEmbedder(HashEmbedderConfig(32)))
S1 = Section("Alpha", "Alpha met Beta at the Gamma Station.", "2020-01-01T00:00:00Z")
S2 = Section("Delta", "Delta sails from Orin to Vask.", "2020-01-02T00:00:00Z")
S2_LATER = Section(S2.title, S2.text, "2021-05-05T00:00:00Z")  # the same chunk, another time
S3 = Section("Epsilon", "Epsilon keeps the lighthouse.", None)
S4 = Section("Zeta", "Zeta bakes bread at dawn.", None)
S5 = Section("Eta", "Eta repairs the Zorblat Engine.", None)


def _doc(doc_id: str, *sections: Section) -> Document:
    return Document(doc_id, "d", "corpus", sections, f"hash-{doc_id}-{len(sections)}-{sections}")


def _rows(store: LanceStore) -> set[tuple]:
    rows = store.read(CHUNKS).select(["id", "doc_id", "domain", "time", "title", "text"])
    return {tuple(r.values()) for r in rows.to_pylist()}


def _full_rows(store: LanceStore) -> set[tuple]:
    """What a full chunking of the stored documents keeps: one row per id, the last document's."""
    passages, _ = chunk(WINDOW, read_stored_documents(store))
    unique = {p.id: p for p in passages}
    return {(p.id, p.doc_id, p.domain, p.time, p.title, p.text) for p in unique.values()}


def _step(store: LanceStore, docs: list[Document]) -> str:
    sync_documents(store, docs)
    run = chunk_stored(store, WINDOW, set())
    assert _rows(store) == _full_rows(store)
    assert run.report.total == store.count(CHUNKS)
    return run.mode


@pytest.mark.parametrize("indexed", [False, True])
def test_each_change_gives_the_rows_of_a_full_chunking(tmp_path, monkeypatch, indexed):
    if indexed:  # every write indexed at once: the stage's stamp must follow the index's version
        monkeypatch.setattr(key_index, "MIN_ROWS", 1)
        monkeypatch.setattr(key_index, "UNINDEXED_MAX", 0)
        monkeypatch.setattr(key_index, "MAX_SEGMENTS", 2)
    store = LanceStore.open(tmp_path / "home")
    a, b, c = _doc("a", S1, S2), _doc("b", S3), _doc("c", S4)
    assert _step(store, [a, b, c]) == "full"
    d = _doc("d", S2_LATER)  # a later document makes a's chunk too: the row moves to d
    assert _step(store, [a, b, c, d]) == "incremental"
    b2 = _doc("b", S5)  # changed: its old chunk goes, its new one comes
    assert _step(store, [a, b2, c, d]) == "incremental"
    assert _step(store, [a, b2, c]) == "full"  # d's chunk is shared: only a full run counts
    e = _doc("e", S4)
    assert _step(store, [a, b2, c, e]) == "incremental"  # c's chunk now e's
    assert _step(store, [a, b2, e]) == "incremental"  # c gone: its chunk stays with e
    assert _step(store, [a, b2]) == "full"  # e's chunk was shared
    assert _step(store, [a, b2]) == "unchanged"


def test_a_run_from_passages_in_between_makes_the_next_run_full(tmp_path):
    """The manifest describes the chunks table only while nothing else wrote it."""
    from qortex_core.ingest.chunk_stage import sync_chunks
    from qortex_core.storage.model import Passage

    store = LanceStore.open(tmp_path / "home")
    assert _step(store, [_doc("a", S1), _doc("b", S3)]) == "full"
    sync_chunks(store, [Passage("A passage from elsewhere.", "Elsewhere")], prune=False)
    assert _step(store, [_doc("a", S1), _doc("b", S5)]) == "full"
