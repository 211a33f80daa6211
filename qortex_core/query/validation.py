"""Query input checks: text, top_k, mode (read from the mode registry) and domains."""

from __future__ import annotations

from typing import Sequence

from qortex_core.errors import QueryError
from qortex_core.query import modes

MAX_TOP_K = 100
MAX_QUERY_CHARS = 8192


def validate(text: str, top_k: int, mode: str) -> str:
    """The query text to use, or a :class:`QueryError`."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("query is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError("query is not valid UTF-8 text (it holds undecodable bytes)") from None
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise QueryError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    modes.get(mode)  # QueryError for an unknown mode
    return text.strip()[:MAX_QUERY_CHARS]


def validate_domains(domains: Sequence[str] | None, known: set[str]) -> list[str] | None:
    """``domains`` as a list (None: all), or a :class:`QueryError` for a bare string or an
    unknown domain."""
    if not domains:
        return None
    if isinstance(domains, str) or not all(isinstance(d, str) for d in domains):
        raise QueryError("domains must be a list of domain names")
    unknown = sorted(set(domains) - known)
    if unknown:
        listed = ", ".join(sorted(known)[:20]) or "none"
        raise QueryError(f"unknown domain {unknown[0]!r}: this snapshot has {listed}")
    return list(domains)
