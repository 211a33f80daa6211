"""Content-hash identifiers: the one place ids are made.

Every id is a short prefix plus a BLAKE2b digest of normalised content, so the
same content always gets the same id on every machine and in every run.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Iterable

_NON_ALNUM = re.compile(r"[^a-z0-9 ]")
_SPACES = re.compile(r"\s+")


def digest(*parts: str, size: int = 8) -> str:
    """Hex digest of the given parts, joined unambiguously."""
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def normalize_text(text: str) -> str:
    """Lower-case, keep letters, digits and single spaces (HippoRAG's text processing).

    For whole passages; :func:`normalize_phrase` is the same, memoised for names.
    """
    return _SPACES.sub(" ", _NON_ALNUM.sub(" ", text.lower())).strip()


@functools.lru_cache(maxsize=1 << 16)  # names recur across passages; bounded memory
def normalize_phrase(text: str) -> str:
    """:func:`normalize_text` of a name (memoised: never call it on passage texts, which would
    keep up to 65,536 of them alive)."""
    return normalize_text(text)


def passage_id(text: str) -> str:
    """Id of a passage (chunk) from its full text (title included)."""
    return "p_" + digest(text)


def document_id(source: str) -> str:
    """Id of a source document from its location (path or corpus key)."""
    return "d_" + digest(source)


@functools.lru_cache(maxsize=1 << 16)
def concept_id(name: str) -> str:
    """Id of a concept from its normalised name."""
    return "c_" + digest(normalize_phrase(name))


def fact_id(subject: str, predicate: str, obj: str) -> str:
    """Id of a (subject, predicate, object) fact from its normalised parts."""
    return fact_id_normalized(
        normalize_phrase(subject), normalize_phrase(predicate), normalize_phrase(obj)
    )


def fact_id_normalized(subject: str, predicate: str, obj: str) -> str:
    """:func:`fact_id` of parts already passed through :func:`normalize_phrase` (bulk callers
    normalise each distinct string once)."""
    return "f_" + digest(subject, predicate, obj)


def rule_id(text: str) -> str:
    """Id of a rule from its text."""
    return "r_" + digest(" ".join(text.split()))


def query_id(text: str, snapshot: str, when: str) -> str:
    """Id of one asked query: its text, the snapshot it ran on and when (ISO time)."""
    return "q_" + digest(" ".join(text.split()), snapshot, when)


def event_id(query: str, result: str, kind: str) -> str:
    """Id of one judgement: a repeated (query, result, kind) is the same event, recorded once."""
    return "ev_" + digest(query, result, kind)


def embedding_key(model: str, text: str) -> str:
    """Cache key of one embedding: the model name and the exact text."""
    return "e_" + digest(model, text, size=12)


def embedding_keys(model: str, texts: Iterable[str]) -> list[str]:
    """:func:`embedding_key` of each text; the model's part is hashed once and copied."""
    head = hashlib.blake2b(digest_size=12)
    name = model.encode("utf-8", "surrogatepass")
    head.update(len(name).to_bytes(8, "little"))
    head.update(name)
    keys = []
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        h = head.copy()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
        keys.append("e_" + h.hexdigest())
    return keys


def memory_id(text: str, created_at: str, nonce: str) -> str:
    """Id of one written memory: its first text, when it was written and a nonce (two writes of the
    same text are two records until consolidation merges them)."""
    return "m_" + digest(" ".join(text.split()), created_at, nonce)


def revision_key(record: str, revision: int, created_at: str, nonce: str) -> str:
    """Key of one row of the append-only memories table."""
    return "mr_" + digest(record, str(revision), created_at, nonce, size=12)
