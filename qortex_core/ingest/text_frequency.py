"""How common each phrase's words are in the passage text, counted with Arrow kernels.

Words are what :func:`qortex_core.storage.ids.normalize_phrase` leaves: lower-case runs of ASCII
letters and digits. ASCII strings are lower-cased and split by Arrow (the same result as Python's
``str.lower`` on ASCII); the non-ASCII ones go through ``normalize_text`` itself, so the words
are the same for every string. Passages are counted in batches: memory is bounded by a batch's
words plus the distinct words seen.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.snapshot_tables import contiguous
from qortex_core.storage import ids

_BATCH = 100_000  # passages per counting batch


def _as_strings(values: Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return contiguous(values)  # combine_chunks would copy a single chunk (0.5 GB at 1M)
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string())


def _byte_map() -> np.ndarray:
    """(256,) uint8: ASCII letters lower-cased, digits kept, every other byte a space."""
    out = np.full(256, ord(" "), np.uint8)
    for c in "abcdefghijklmnopqrstuvwxyz0123456789":
        out[ord(c)] = ord(c)
    for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        out[ord(c)] = ord(c.lower())
    return out


_BYTE_MAP = _byte_map()


def _words(values: pa.Array) -> pa.ListArray:
    """Each string's words, as a list array (no empty words; none for a null string)."""
    values = pc.fill_null(values, "")
    ascii_rows = pc.string_is_ascii(values).to_numpy(zero_copy_only=False)  # (n,)
    if not ascii_rows.all():  # normalize_text's output is ASCII: every row is ASCII below
        others = np.flatnonzero(~ascii_rows)
        fixed = [ids.normalize_text(s) for s in values.take(pa.array(others)).to_pylist()]
        values = pc.replace_with_mask(values, pa.array(~ascii_rows), pa.array(fixed, pa.string()))
    values = pc.cast(values, pa.string())
    _, offsets, data = values.buffers()
    # a slice's buffers are its parent's: map only the slice's own bytes (mapping the whole
    # buffer for each batch made the snapshot's text frequency quadratic in the corpus)
    bounds = np.frombuffer(offsets, np.int32)[values.offset : values.offset + len(values) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    mapped = _BYTE_MAP[raw[bounds[0] : bounds[-1]]]  # (bytes,)
    spaced = pa.Array.from_buffers(
        pa.string(), len(values), [None, pa.py_buffer(bounds - bounds[0]), pa.py_buffer(mapped)]
    )
    parts = pc.ascii_split_whitespace(spaced)  # (n,) lists of words
    flat = pc.list_flatten(parts)
    keep = pc.not_equal(flat, "")
    parent = pc.list_parent_indices(parts).to_numpy()  # (words,) string index of each word
    kept = pc.filter(flat, keep)
    mask = keep.to_numpy(zero_copy_only=False)
    counts = np.bincount(parent[mask], minlength=len(values))  # (n,)
    starts = np.r_[0, np.cumsum(counts)].astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(starts), kept)


def _batch_frequency(words: pa.ListArray) -> pa.Table:
    """(word, df) over one batch of texts: distinct (text, word) pairs counted per word."""
    encoded = pc.dictionary_encode(pc.list_flatten(words))
    n_words = len(encoded.dictionary)
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)  # (occurrences,)
    doc = pc.list_parent_indices(words).to_numpy().astype(np.int64)  # (occurrences,)
    key = np.sort(doc * max(n_words, 1) + code)  # (occurrences,) by text, then word
    distinct = key[np.diff(key, prepend=-1) != 0] % max(n_words, 1)  # (pairs,) word codes
    df = np.bincount(distinct, minlength=n_words)  # (n_words,)
    return pa.table({"word": encoded.dictionary, "df": pa.array(df, pa.int64())})


def document_frequency(texts: Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Table:
    """(word, df): in how many texts each word occurs."""
    strings = _as_strings(texts)
    counts = [
        _batch_frequency(_words(strings.slice(start, _BATCH)))
        for start in range(0, len(strings), _BATCH)
    ]
    if not counts:
        return pa.table({"word": pa.array([], pa.string()), "df": pa.array([], pa.int64())})
    if len(counts) == 1:
        return counts[0]
    merged = pa.concat_tables(counts).group_by("word").aggregate([("df", "sum")])
    return pa.table({"word": merged["word"], "df": merged["df_sum"]})


def updated_frequency(
    df: pa.Table,
    removed: Sequence[str] | pa.Array | pa.ChunkedArray,
    added: Sequence[str] | pa.Array | pa.ChunkedArray,
) -> pa.Table:
    """(word, df) of a text collection from its earlier ``df``, less the ``removed`` texts'
    counts, plus the ``added`` texts': what :func:`document_frequency` of the new collection
    gives (as a set of rows: counts are integers), words counted 0 dropped."""
    return changed_frequency(df, removed, added)[0]


def changed_frequency(
    df: pa.Table,
    removed: Sequence[str] | pa.Array | pa.ChunkedArray,
    added: Sequence[str] | pa.Array | pa.ChunkedArray,
) -> tuple[pa.Table, pa.Table]:
    """:func:`updated_frequency`, and (word, before, after) for every word of the removed and
    added texts: the words whose df may have moved, with their df in ``df`` and in the result
    (0 where a table does not hold the word), for :func:`refreshed_frequency`."""
    gone, new = document_frequency(removed), document_frequency(added)
    words = pc.unique(pa.chunked_array([gone["word"], new["word"]], pa.string()).combine_chunks())
    if len(words) == 0:
        return df, pa.table({"word": words, "before": _counts(0), "after": _counts(0)})
    before, hit = _counts_of(df, words)  # (moved,); (vocabulary,) a moved word's row
    after = before - _counts_of(gone, words)[0] + _counts_of(new, words)[0]  # (moved,)
    moved = pa.table({"word": words, "before": before, "after": after})
    # the vocabulary's other rows as they are, the moved words with their new counts (rows
    # counted 0 dropped): a set of rows, as document_frequency's is
    kept = df.filter(pc.invert(hit)).select(["word", "df"]).cast(_SCHEMA)
    counted = pa.table({"word": words, "df": after}).filter(pa.array(after > 0)).cast(_SCHEMA)
    return pa.concat_tables([kept, counted]), moved


_SCHEMA = pa.schema([("word", pa.string()), ("df", pa.int64())])


def _counts(n: int) -> pa.Array:
    return pa.array(np.zeros(n, np.int64))


def _rows(at: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The (non-null) positions of an ``index_in`` result as int64."""
    return np.asarray(at.to_numpy(), np.int64) if len(at) else np.zeros(0, np.int64)


def _counts_of(df: pa.Table, distinct: pa.Array) -> tuple[np.ndarray, pa.ChunkedArray]:
    """(len(distinct),) int64 each of the ``distinct`` words' df in ``df`` (0 where absent),
    by one scan of ``df`` against a hash of those words (not a hash of ``df``'s vocabulary),
    and the (rows,) mask of ``df``'s rows whose word is one of them."""
    counts = np.zeros(len(distinct), np.int64)
    at = pc.index_in(df["word"], value_set=distinct)  # (rows,) row in distinct or null
    hit = pc.is_valid(at)
    if df.num_rows:
        counts[_rows(at.filter(hit))] = df["df"].filter(hit).to_numpy()
    return counts, hit


def phrase_frequency(
    df: pa.Table, phrase_names: Sequence[str] | pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """(n_phrases,) float32: the least ``df`` among each phrase's words (0: none counted)."""
    words = _words(_as_strings(phrase_names))  # (phrases,) lists of words
    per_word = _word_counts(df, pc.list_flatten(words))  # (words,)
    offsets = words.offsets.to_numpy()  # (phrases+1,)
    out = np.zeros(len(words), np.float32)
    filled = np.flatnonzero(offsets[1:] > offsets[:-1])  # phrases with at least one word
    if len(filled):
        out[filled] = np.minimum.reduceat(per_word, offsets[filled])
    return out


def _word_counts(df: pa.Table, flat: pa.Array) -> np.ndarray:
    """(len(flat),) float64 each word's df (0: not counted). Few words against a large
    vocabulary (a refresh) look up their distinct words by one scan of the vocabulary (a hash
    of those few); otherwise every word is looked up in a hash of the vocabulary."""
    if len(flat) * 4 >= df.num_rows:
        at = pc.index_in(flat, value_set=df["word"])  # (words,) row in df or null
        known = pc.is_valid(at).to_numpy(zero_copy_only=False)
        per_word = np.zeros(len(known), np.float64)  # unknown words count 0
        per_word[known] = df["df"].to_numpy()[_rows(at.drop_null())]
        return per_word
    distinct = pc.unique(flat)
    counts = _counts_of(df, distinct)[0].astype(np.float64)  # (distinct,)
    return counts[_rows(pc.index_in(flat, value_set=distinct))]


def refreshed_frequency(
    df: pa.Table,
    phrase_names: pa.Array | pa.ChunkedArray,
    old: np.ndarray,
    moved: pa.Table,
) -> np.ndarray:
    """:func:`phrase_frequency` of every phrase from ``old`` (each phrase's value in an earlier
    count; NaN where there is none) and ``moved`` (:func:`changed_frequency`'s words whose df
    may have moved, with their df before and after), counting again only the phrases without
    an earlier value and those whose least df a moved word changes.

    A phrase's value is the least df of its words. A moved word changes it only when its new df
    is below that least, or when it held the least and its df moved; otherwise a word that held
    the least still does, with the same df, and no word went below it. The comparisons are made
    in float32, the value's type (rounding to float32 is monotone: the least of the rounded dfs
    is the rounded least)."""
    names = _as_strings(phrase_names)
    words = _words(names)  # (phrases,) lists of words
    at = pc.index_in(pc.list_flatten(words), value_set=moved["word"].combine_chunks())
    hit = pc.is_valid(at).to_numpy(zero_copy_only=False)  # (words,) a moved word
    redo = np.isnan(old)
    if hit.any():
        row = np.asarray(at.drop_null().to_numpy(), np.int64)  # (hits,) its row in moved
        before = moved["before"].to_numpy().astype(np.float32)[row]  # (hits,)
        after = moved["after"].to_numpy().astype(np.float32)[row]  # (hits,)
        phrase = pc.list_parent_indices(words).to_numpy()[hit]  # (hits,) phrase of each
        least = np.asarray(old, np.float32)[phrase]  # (hits,) NaN: counted again anyway
        redo[phrase[(after < least) | ((before == least) & (after != before))]] = True
    out = np.asarray(old, np.float32).copy()
    rows = np.flatnonzero(redo)
    if rows.size:
        out[rows] = phrase_frequency(df, names.take(pa.array(rows)))
    return out


def phrase_text_frequency(
    passage_texts: Sequence[str] | pa.Array | pa.ChunkedArray,
    phrase_names: Sequence[str] | pa.Array | pa.ChunkedArray,
) -> np.ndarray:
    """How common each phrase is in the passage text: the least document frequency among its words.

    An upper bound on the number of passages holding the whole phrase, counted on the passage
    text rather than on extracted concepts, so a generic word ("war", "person") that was
    extracted in one passage still counts as common. 0 for a phrase with no word in any passage.

    Returns:
        (n_phrases,) float32.
    """
    return phrase_frequency(document_frequency(passage_texts), phrase_names)
