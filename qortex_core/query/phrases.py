"""Concept names matched verbatim in a query: the longest whole-word matches of a query's
n-grams against an index of the names' keys (:mod:`qortex_core.storage.phrase_keys`)."""

from __future__ import annotations

from typing import Protocol, Sequence

from qortex_core.storage import ids
from qortex_core.storage.phrase_keys import phrase_key


class Lookup(Protocol):
    """Normalised concept name -> phrase index (a dict, or a hashed index over the snapshot)."""

    def get(self, key: str, /) -> int | None: ...


def phrase_lookup(names: Sequence[str], max_words: int = 6) -> dict[str, int]:
    """Normalised concept name -> phrase index, for names worth matching in a query (the first
    phrase of a name wins)."""
    out: dict[str, int] = {}
    for i, name in enumerate(names):
        key = phrase_key(name, max_words)
        if key is not None:
            out.setdefault(key, i)
    return out


def lexical_matches(text: str, lookup: Lookup, max_words: int = 6) -> list[int]:
    """Phrase indices whose names occur as whole word n-grams in ``text``; longest matches win."""
    words = ids.normalize_phrase(text).split()
    covered = [False] * len(words)
    found: list[int] = []
    for n in range(min(max_words, len(words)), 0, -1):
        for start in range(len(words) - n + 1):
            if all(covered[start : start + n]):
                continue
            hit = lookup.get(" ".join(words[start : start + n]))
            if hit is not None:
                found.append(hit)
                covered[start : start + n] = [True] * n
    return found
