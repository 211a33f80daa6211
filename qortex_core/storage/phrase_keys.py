"""The normalised key of a concept name worth matching verbatim in a query (:func:`phrase_key`,
and :func:`phrase_keys` for a whole Arrow column at once): made where a snapshot is built
(each concept's key is stored with it, :data:`PHRASE_KEYS`) and where a query is matched
(:mod:`qortex_core.query.phrases`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage import ids
from qortex_core.storage.arrow_access import large_strings

PHRASE_KEYS = "phrase_keys"  # the snapshot table of each concept's key (column ``key``)

_STOP = frozenset(
    """a an the of in on at to for from by with and or is was were are be been who what which
when where why how whose whom that this these those it its he she they his her their as do does
did than then there here not no yes one two first second new old other same""".split()
)


def phrase_key(name: str, max_words: int = 6) -> str | None:
    """The normalised form of a concept name worth matching verbatim in a query, or None
    (too long, shorter than 3 letters, or only stop words)."""
    key = ids.normalize_phrase(name)
    words = key.split()
    if (
        0 < len(words) <= max_words
        and len(key.replace(" ", "")) >= 3
        and not all(w in _STOP for w in words)
    ):
        return key
    return None


def phrase_keys(names: pa.Array | pa.ChunkedArray, max_words: int = 6) -> pa.Array:
    """:func:`phrase_key` of every name as a large_string column (null for None), computed with
    Arrow kernels for ASCII names and with :func:`phrase_key` itself for the others (Python's
    ``lower`` maps a few non-ASCII letters to ASCII ones, which Arrow's does not)."""
    names = large_strings(names)
    n = len(names)
    # ids.normalize_text on ASCII: lower case, each run of other characters one space, trimmed
    key = pc.replace_substring_regex(pc.ascii_lower(names), pattern="[^a-z0-9]+", replacement=" ")
    key = pc.utf8_trim(key, characters=" ")  # (n,)
    spaces = pc.fill_null(pc.count_substring(key, " "), 0).to_numpy(zero_copy_only=False)  # (n,)
    length = pc.fill_null(pc.utf8_length(key), 0).to_numpy(zero_copy_only=False)  # (n,)
    words = np.where(length > 0, spaces + 1, 0)  # (n,) "".split() has no word
    split = pc.split_pattern(key, pattern=" ")
    stop = pc.is_in(pc.list_flatten(split), value_set=pa.array(sorted(_STOP)))
    parent = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)  # (words,)
    stops = np.bincount(parent[stop.to_numpy(zero_copy_only=False)], minlength=n)  # (n,)
    ascii_ = pc.fill_null(pc.string_is_ascii(names), False).to_numpy(zero_copy_only=False)
    keep = ascii_ & (words > 0) & (words <= max_words) & (length - spaces >= 3) & (stops < words)
    out = pc.if_else(pa.array(keep), key, pa.nulls(n, pa.large_string()))  # (n,)
    other = np.flatnonzero(~ascii_ & pc.is_valid(names).to_numpy(zero_copy_only=False))
    if other.size:  # non-ASCII names: the Python function
        python = [phrase_key(v, max_words) for v in names.take(pa.array(other)).to_pylist()]
        mask = np.zeros(n, bool)
        mask[other] = True
        out = pc.replace_with_mask(out, pa.array(mask), pa.array(python, pa.large_string()))
    return out
