"""Chunks sized by the embedder's own tokenizer: every chunk (with its title) fits the window."""

from __future__ import annotations

import json

import pytest

from qortex_core.embed import (
    OpenAIEmbedder,
    OpenAIEmbedderConfig,
    TokenWindow,
    regex_token_count,
    token_window,
)
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents, chunk_text
from qortex_core.ingest.documents import Document, Section

PARAGRAPH = (
    "The Orion Pump at Velmora station was serviced by Ilse Marrow in 1987; her report "
    "(ref. QX-4471/b, 12 pages) lists seals, impellers and a cracked manifold. "
    "Afterwards the station's chief engineer, Tomasz Wielgosz-Brandt, replaced the "
    "Zürich-made bearings with 3.5 mm ceramic ones and logged 1,204 hours without a fault. "
)


def long_document() -> Document:
    """~30 paragraphs of numbers, names and punctuation (WordPiece-heavy text)."""
    body = "\n\n".join(PARAGRAPH * (1 + n % 3) for n in range(30))
    return Document("ops/orion.md", "ops", "text", (Section("Orion Pump history", body),), "h")


def test_bundled_window_is_its_max_seq_length_less_special_tokens(embedder):
    window = token_window(embedder)
    assert window.max_tokens == 256 - 2  # all-MiniLM-L6-v2 reads 256 WordPieces with [CLS]/[SEP]
    assert window.count("Orion Pump") < window.count("Orion Pump " * 300)  # never truncated
    assert window.count(PARAGRAPH) > regex_token_count(PARAGRAPH)  # WordPiece splits more


def test_long_document_chunks_fit_the_bundled_window(embedder):
    window = token_window(embedder)
    config = ChunkConfig(min(512, window.max_tokens), 64)
    passages = chunk_documents([long_document()], config, window.count)
    lengths = [window.count(p.full_text) for p in passages]
    assert len(passages) > 5
    assert max(lengths) <= window.max_tokens, max(lengths)
    assert max(lengths) >= window.max_tokens * 0.7  # chunks are packed, not needlessly small
    # the regex count alone would have produced chunks past the model's window
    by_regex = chunk_documents([long_document()], ChunkConfig(512, 64))
    assert max(window.count(p.full_text) for p in by_regex) > window.max_tokens
    hf = embedder._load().tokenizer  # the model's own tokenizer agrees (with its 2 specials)
    assert max(len(hf(p.full_text)["input_ids"]) for p in passages) <= 256
    print(json.dumps({"longest_chunk_tokens": max(lengths), "window": window.max_tokens}))


def test_openai_and_custom_windows():
    window = token_window(OpenAIEmbedder(OpenAIEmbedderConfig(model="text-embedding-3-small")))
    assert window.max_tokens == 8191
    small = OpenAIEmbedder(OpenAIEmbedderConfig(model="nomic-embed-text", max_tokens=64))
    window = token_window(small)
    chunks = chunk_text(PARAGRAPH * 4, ChunkConfig(window.max_tokens, 16), window.count)
    assert len(chunks) > 1 and all(window.count(c) <= 64 for c in chunks)


@pytest.mark.parametrize("room", [16, 40])
def test_an_unbreakable_sentence_is_cut_to_fit(room):
    """A sentence with no sentence break, longer than the window, is cut at token boundaries."""
    window = TokenWindow(room, lambda t: 2 * regex_token_count(t), "double")
    text = " ".join(f"word{n}" for n in range(200))
    chunks = chunk_text(text, ChunkConfig(room, room // 4), window.count)
    assert len(chunks) > 1 and all(window.count(c) <= room for c in chunks)
    assert chunks[0].startswith("word0") and chunks[-1].endswith("word199")
