"""Token-aware chunking with overlap that respects paragraph and sentence boundaries.

Tokens are counted with the embedder's own tokenizer when one is given (``count``; the
``chunks`` asset passes the embedder's :class:`~qortex_core.embed.TokenWindow`, so a chunk
and its title fit the model's window). Without one, a simple deterministic tokenizer counts:
a run of word characters or one punctuation mark is one token (``\\w+|[^\\w\\s]``); it runs
about 20% below the WordPiece count of all-MiniLM-L6-v2 on English text.

A section that fits in one chunk becomes exactly one passage with its text
unchanged, so corpus passages keep their content-hash ids. Longer sections are
cut into units (sentences; over-long sentences into token windows), packed into
chunks of at most ``max_tokens``, breaking at paragraph ends where possible,
and each chunk starts with up to ``overlap_tokens`` of the previous one's
trailing sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from qortex_core.errors import ConfigError
from qortex_core.ingest.documents import Document
from qortex_core.storage.model import Passage

TOKEN = re.compile(r"\w+|[^\w\s]")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
Counter = Callable[[str], int]


@dataclass(frozen=True)
class ChunkConfig:
    """Chunk size and overlap in tokens of :data:`TOKEN`.

    Raises:
        ConfigError: ``max_tokens`` < 8 or ``overlap_tokens`` outside ``[0, max_tokens / 2]``.
    """

    max_tokens: int = 512
    overlap_tokens: int = 64

    def __post_init__(self) -> None:
        if self.max_tokens < 8:
            raise ConfigError(f"max_tokens must be at least 8, got {self.max_tokens}")
        if not 0 <= self.overlap_tokens <= self.max_tokens // 2:
            raise ConfigError(
                f"overlap_tokens must be between 0 and max_tokens/2, got {self.overlap_tokens}"
            )


@dataclass(frozen=True)
class _Unit:
    text: str
    tokens: int
    paragraph: int


def count_tokens(text: str) -> int:
    """Number of tokens in ``text``."""
    return sum(1 for _ in TOKEN.finditer(text))


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (split after ``.!?`` before an upper-case letter or digit)."""
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def _windows(sentence: str, size: int) -> list[str]:
    """Cut an over-long sentence at token boundaries into pieces of at most ``size`` tokens."""
    spans = [m.span() for m in TOKEN.finditer(sentence)]
    bounds = [
        (spans[i][0], spans[min(i + size, len(spans)) - 1][1]) for i in range(0, len(spans), size)
    ]
    if len(bounds) > 1 and not re.search(r"\w", sentence[bounds[-1][0] : bounds[-1][1]]):
        bounds[-2:] = [
            (bounds[-2][0], bounds[-1][1])
        ]  # no piece of bare punctuation (size <= max/2, so it fits)
    return [sentence[a:b] for a, b in bounds]


def _fit(piece: str, size: int, count: Counter) -> list[str]:
    """``piece`` halved at token boundaries until every part has at most ``size`` counted tokens."""
    if count(piece) <= size:
        return [piece]
    spans = [m.span() for m in TOKEN.finditer(piece)]
    if len(spans) < 2:
        return [piece]  # one regex token over the window: the embedder truncates it, nothing else
    mid = spans[len(spans) // 2][0]
    return _fit(piece[:mid].rstrip(), size, count) + _fit(piece[mid:], size, count)


def _units(text: str, config: ChunkConfig, count: Counter) -> list[_Unit]:
    piece = max(config.overlap_tokens, config.max_tokens // 4, 1)
    units = []
    for n, paragraph in enumerate(p for p in _PARAGRAPH.split(text) if p.strip()):
        for sentence in split_sentences(paragraph):
            size = count(sentence)
            if size == 0:
                continue
            if size <= config.max_tokens:
                units.append(_Unit(sentence, size, n))
                continue
            for part in _windows(sentence, piece):  # an over-long sentence: windows that fit
                units.extend(_Unit(p, count(p), n) for p in _fit(part, piece, count))
    return units


def _join(units: Sequence[_Unit]) -> str:
    out = units[0].text
    for prev, unit in zip(units, units[1:]):
        out += ("\n\n" if unit.paragraph != prev.paragraph else " ") + unit.text
    return out


def _overlap(units: Sequence[_Unit], budget: int) -> list[_Unit]:
    """Trailing units of a chunk that fit in ``budget`` tokens (never the whole chunk)."""
    kept: list[_Unit] = []
    used = 0
    for unit in reversed(units[1:]):
        if used + unit.tokens > budget:
            break
        kept.insert(0, unit)
        used += unit.tokens
    return kept


def _paragraph_tokens(units: Sequence[_Unit], start: int) -> int:
    para = units[start].paragraph
    return sum(u.tokens for u in units[start:] if u.paragraph == para)


def chunk_text(
    text: str, config: ChunkConfig = ChunkConfig(), count: Counter = count_tokens
) -> list[str]:
    """Cut ``text`` into chunks of at most ``config.max_tokens`` tokens (counted by ``count``).

    A text that fits is returned unchanged.
    """
    if not text.strip():
        return []
    if count(text) <= config.max_tokens:
        return [text]
    units = _units(text, config, count)
    chunks: list[list[_Unit]] = []
    current: list[_Unit] = []
    used = fresh = 0  # fresh: tokens in ``current`` that are not overlap
    for i, unit in enumerate(units):
        starts_paragraph = bool(current) and unit.paragraph != current[-1].paragraph
        overflow = used + unit.tokens > config.max_tokens
        # break early at a paragraph end when the next paragraph would not fit and the chunk is
        # half full
        early = (
            starts_paragraph
            and used + _paragraph_tokens(units, i) > config.max_tokens
            and used >= config.max_tokens // 2
        )
        if current and fresh and (overflow or early):
            chunks.append(current)
            current = _overlap(current, config.overlap_tokens)
            used, fresh = sum(u.tokens for u in current), 0
            while current and used + unit.tokens > config.max_tokens:
                used -= current.pop(0).tokens
        current.append(unit)
        used += unit.tokens
        fresh += unit.tokens
    if fresh:
        chunks.append(current)
    return [_join(c) for c in chunks]


def _section_config(title: str, config: ChunkConfig, count: Counter) -> ChunkConfig:
    """The budget left for a section's text once its title (embedded with it) is counted."""
    if not title:
        return config
    room = max(config.max_tokens - count(title) - 1, 8)  # title, newline, then the chunk
    return ChunkConfig(room, min(config.overlap_tokens, room // 2))


def chunk_document(
    document: Document, config: ChunkConfig = ChunkConfig(), count: Counter = count_tokens
) -> list[Passage]:
    """Passages of one document: each section chunked, keeping the section title."""
    return [
        Passage(chunk, section.title, document.doc_id, document.domain, time=section.time)
        for section in document.sections
        for chunk in chunk_text(section.text, _section_config(section.title, config, count), count)
    ]


def chunk_documents(
    documents: Iterable[Document],
    config: ChunkConfig = ChunkConfig(),
    count: Counter = count_tokens,
) -> list[Passage]:
    """Passages of every document, in document order (tokens counted by ``count``)."""
    return [p for d in documents for p in chunk_document(d, config, count)]
