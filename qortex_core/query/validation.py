"""Query input checks: text, top_k, mode (read from the mode registry) and domains."""

from __future__ import annotations

from typing import Sequence

from qortex_core.errors import QueryError
from qortex_core.query import modes
from qortex_core.storage import times

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
    validate_top_k(top_k)
    modes.get(mode)  # QueryError for an unknown mode
    return text.strip()[:MAX_QUERY_CHARS]


def validate_top_k(top_k: object) -> int:
    """``top_k`` if it is an integer from 1 to ``MAX_TOP_K``, else a :class:`QueryError`."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise QueryError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    return top_k


def validate_window(since: object, until: object) -> tuple[str | None, str | None]:
    """``since``/``until`` as ISO 8601 UTC bounds (a bare ``until`` date keeps its whole day),
    or a :class:`QueryError` for an unreadable time or ``since`` after ``until``."""
    bounds = []
    for name, value in (("since", since), ("until", until)):
        try:
            bounds.append(None if value is None else times.parse_bound(value, name == "until"))
        except ValueError as exc:
            raise QueryError(f"{name}: {exc}") from None
    if bounds[0] and bounds[1] and times.to_epoch(bounds[0]) > times.to_epoch(bounds[1]):
        raise QueryError(f"since {bounds[0]} is after until {bounds[1]}")
    return bounds[0], bounds[1]


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
