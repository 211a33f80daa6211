"""Stage functions skip work when their inputs are unchanged, and redo it when they change."""

from __future__ import annotations

from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, SYNONYMS, LanceStore

DOCS = [
    Passage("Marie Curie was born in Warsaw. She studied at the Sorbonne in Paris.", "Marie Curie"),
    Passage(
        "Pierre Curie married Marie Curie in Sceaux. He taught at the Sorbonne.", "Pierre Curie"
    ),
    Passage("Warsaw is the capital of Poland, on the Vistula River.", "Warsaw"),
]
TABLES = (PASSAGES, CONCEPTS, FACTS, SYNONYMS)


def test_unchanged_inputs_rewrite_nothing_and_changed_inputs_rebuild(tmp_path, embedder):
    store, extractor = LanceStore.open(tmp_path), OfflineExtractor()
    index.build_index(store, tmp_path, DOCS, extractor, embedder)
    first = store.versions()

    index.sync_chunks(store, DOCS)
    index.extract_chunks(store, extractor)
    report = index.embed_index(store, embedder, extractor.cache_key)
    edges = index.build_synonyms(store)
    again = store.versions()
    assert {t: again[t] for t in TABLES} == {t: first[t] for t in TABLES}  # nothing rewritten
    assert (
        report.texts_embedded == 0
        and report.passages == 3
        and report.facts == store.count(FACTS) > 0
    )
    assert edges == store.count(SYNONYMS)

    changed = DOCS[:2] + [
        Passage("Warsaw is the capital of Poland. Chopin grew up in Warsaw.", "Warsaw")
    ]
    index.sync_chunks(store, changed)
    index.extract_chunks(store, extractor)
    report = index.embed_index(store, embedder, extractor.cache_key)
    index.build_synonyms(store)
    after = store.versions()
    assert all(after[t] > again[t] for t in TABLES)  # every derived table rebuilt
    assert 0 < report.texts_embedded < 10  # only the new passage and its new concepts and facts
    names = set(store.read(CONCEPTS)["name"].to_pylist())
    assert "Chopin" in names and "Vistula River" not in names
