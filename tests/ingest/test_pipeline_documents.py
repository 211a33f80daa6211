"""Document loading, change tracking and chunking (qortex_core.ingest.documents, qortex_core.ingest.chunking)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qortex_core.errors import ConfigError, DatasetError
from qortex_core.ingest.chunking import TOKEN, ChunkConfig, chunk_document, chunk_text, count_tokens
from qortex_core.ingest.documents import (
    DocumentReport,
    SourceConfig,
    fingerprint,
    load_documents,
    read_stored_documents,
    sync_documents,
)
from qortex_core.storage.model import Passage
from qortex_core.storage.store import LanceStore


def _write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    _write(
        root,
        "science/curie.md",
        "# Marie Curie\n\nMarie Curie was born in Warsaw.\n\n## Work\nShe won two Nobel Prizes.\n",
    )
    _write(root, "science/notes.txt", "The Sorbonne is in Paris.\n")
    _write(root, "top.md", "No heading here. Just text.\n")
    _write(
        root,
        "cooking/corpus.json",
        json.dumps(
            [
                {"title": "Bread", "text": "Bread needs flour."},
                {"title": "Salt", "text": "Salt  keeps   its spaces."},
            ]
        ),
    )
    _write(root, "cooking/lines.jsonl", '{"title": "Yeast", "text": "Yeast makes dough rise."}\n\n')
    return root


def test_domains_titles_and_sections(source: Path) -> None:
    docs = {d.doc_id: d for d in load_documents(SourceConfig(source)).documents}
    assert sorted(docs) == [
        "cooking/corpus.json",
        "cooking/lines.jsonl",
        "science/curie.md",
        "science/notes.txt",
        "top.md",
    ]
    assert (
        docs["science/curie.md"].domain == "science"
        and docs["cooking/corpus.json"].domain == "cooking"
    )
    assert docs["top.md"].domain == "default"
    curie = docs["science/curie.md"].sections
    assert curie[0].title == "Marie Curie"  # the leading H1 is the title, not body text
    assert curie[0].text.split("\n\n") == [
        "Marie Curie was born in Warsaw.",
        "Work She won two Nobel Prizes.",
    ]
    assert docs["science/notes.txt"].sections[0].title == "notes"
    assert [s.title for s in docs["cooking/corpus.json"].sections] == ["Bread", "Salt"]
    assert docs["cooking/corpus.json"].kind == "corpus" and docs["top.md"].kind == "text"


def test_fixed_domain_overrides_folders(source: Path) -> None:
    docs = load_documents(SourceConfig(source, domain="kb")).documents
    assert {d.domain for d in docs} == {"kb"}


def test_corpus_entries_keep_their_passage_ids(source: Path) -> None:
    doc = next(
        d
        for d in load_documents(SourceConfig(source)).documents
        if d.doc_id == "cooking/corpus.json"
    )
    passages = chunk_document(doc)
    assert [p.id for p in passages] == [
        Passage(text="Bread needs flour.", title="Bread").id,
        Passage(text="Salt  keeps   its spaces.", title="Salt").id,
    ]


def test_unusable_files_are_skipped_with_reasons(source: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path, "outside/secret.md", "Secret text.")
    os.symlink(outside, source / "science" / "link.md")
    os.symlink(source / "science" / "notes.txt", source / "inside_link.txt")
    os.symlink(tmp_path / "outside", source / "outdir")
    _write(source, "bin.txt", b"\x00\x01\x02binary")
    _write(source, "latin1.txt", "caf\xe9".encode("latin-1"))
    _write(source, "empty.md", "  \n\n ")
    _write(source, "bad.json", '{"not": "a list"}')
    _write(source, "broken.json", "[{")
    _write(source, "image.png", b"\x89PNG")
    found = load_documents(SourceConfig(source))
    reasons = {s.path: s.reason for s in found.skipped}
    assert "outside" in reasons["science/link.md"] and "outside" in reasons["outdir"]
    assert "binary" in reasons["bin.txt"] and "UTF-8" in reasons["latin1.txt"]
    assert reasons["empty.md"] == "empty file"
    assert "JSON list" in reasons["bad.json"] and "not valid JSON" in reasons["broken.json"]
    assert "unsupported" in reasons["image.png"]
    ids = {d.doc_id for d in found.documents}
    assert "inside_link.txt" in ids and not ids & set(reasons)  # a link inside the root is read


def test_missing_root_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_documents(SourceConfig(tmp_path / "nope"))
    with pytest.raises(DatasetError):
        fingerprint(SourceConfig(tmp_path / "nope"))


def test_fingerprint_follows_listing_and_edits(source: Path) -> None:
    config = SourceConfig(source)
    first = fingerprint(config)
    assert fingerprint(config) == first
    _write(source, "science/notes.txt", "The Sorbonne is in the Latin Quarter of Paris.\n")
    second = fingerprint(config)
    assert second != first
    (source / "top.md").unlink()
    assert fingerprint(config) not in (first, second)


def test_sync_reports_new_changed_deleted(source: Path, tmp_path: Path) -> None:
    store = LanceStore.open(tmp_path / "home")
    config = SourceConfig(source)
    first = sync_documents(store, load_documents(config).documents)
    assert (len(first.new), first.changed, first.deleted, first.unchanged) == (5, (), (), 0)
    _write(source, "science/notes.txt", "The Sorbonne is old.\n")
    (source / "top.md").unlink()
    _write(source, "science/new.md", "A new document.")
    report = sync_documents(store, load_documents(config).documents)
    assert report == DocumentReport(
        total=5,
        new=("science/new.md",),
        changed=("science/notes.txt",),
        deleted=("top.md",),
        unchanged=3,
    )
    stored = read_stored_documents(store)
    assert [d.doc_id for d in stored] == sorted(d.doc_id for d in load_documents(config).documents)
    assert (
        next(d for d in stored if d.doc_id == "science/notes.txt").sections[0].text
        == "The Sorbonne is old."
    )
    assert sync_documents(store, load_documents(config).documents).unchanged == 5


# -- chunking -----------------------------------------------------------------------------
def test_chunk_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        ChunkConfig(max_tokens=4)
    with pytest.raises(ConfigError):
        ChunkConfig(max_tokens=100, overlap_tokens=60)


def test_text_that_fits_is_returned_unchanged() -> None:
    text = "Keep   these  spaces.\n\nAnd this paragraph."
    assert chunk_text(text, ChunkConfig(max_tokens=50, overlap_tokens=5)) == [text]
    assert chunk_text("  \n ") == []


def test_paragraph_boundaries_are_respected() -> None:
    one = "Alpha beta gamma delta. " * 5  # 25 tokens
    two = "Epsilon zeta eta theta. " * 5
    chunks = chunk_text(
        f"{one.strip()}\n\n{two.strip()}", ChunkConfig(max_tokens=40, overlap_tokens=0)
    )
    assert chunks == [one.strip(), two.strip()]


def test_overlap_repeats_trailing_sentences() -> None:
    sentences = [f"Sentence number {n} is here." for n in range(12)]  # 6 tokens each
    chunks = chunk_text(" ".join(sentences), ChunkConfig(max_tokens=30, overlap_tokens=12))
    assert len(chunks) > 2
    for prev, nxt in zip(chunks, chunks[1:]):
        opening = [s for s in sentences if s in nxt][:2]
        assert (
            opening == [s for s in sentences if s in prev][-2:]
        )  # two 6-token sentences fit the 12-token overlap
    assert all(any(s in c for c in chunks) for s in sentences)


@st.composite
def documents_with_unique_words(draw) -> str:
    """Paragraphs of sentences whose words are all distinct, so token positions are unambiguous."""
    shape = draw(
        st.lists(st.lists(st.integers(1, 45), min_size=1, max_size=6), min_size=1, max_size=6)
    )
    counter = iter(range(10**6))
    paragraphs = [
        " ".join(" ".join(f"W{next(counter)}" for _ in range(n)) + "." for n in lengths)
        for lengths in shape
    ]
    return "\n\n".join(paragraphs)


@settings(max_examples=60, deadline=None)
@given(
    text=documents_with_unique_words(),
    max_tokens=st.integers(8, 80),
    overlap_share=st.floats(0, 0.5),
)
def test_chunks_are_bounded_ordered_and_cover_the_text(
    text: str, max_tokens: int, overlap_share: float
) -> None:
    config = ChunkConfig(max_tokens=max_tokens, overlap_tokens=int(max_tokens * overlap_share))
    tokens = TOKEN.findall(text)
    position = {t: i for i, t in enumerate(tokens) if t != "."}
    covered = 0
    for n, chunk in enumerate(chunk_text(text, config)):
        part = TOKEN.findall(chunk)
        assert 0 < len(part) <= config.max_tokens
        first_word = next(i for i, t in enumerate(part) if t != ".")
        start = position[part[first_word]] - first_word
        assert tokens[start : start + len(part)] == part  # a contiguous run of the text, in order
        assert start <= covered  # no gap after the previous chunk
        assert n == 0 or covered - start <= config.overlap_tokens  # bounded overlap
        covered = max(covered, start + len(part))
    assert covered == len(tokens) == count_tokens(text)
