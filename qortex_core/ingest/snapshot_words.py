"""The snapshot's phrase text frequencies, counted on the change when there is a base.

A snapshot stores its passages' word document frequencies (table :data:`WORDS`, ``word``,
``df``). The next build starts from them: the texts of the passages it removed are subtracted,
those it added are counted, and only the phrases' words are looked up again: those of the
phrases that are not the base's and of those with a word whose count moved (the others keep
the base's least count). Counts are integers, so the frequencies are those a full count of the
new passages gives.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.snapshot_base import FULL_FRACTION, Base
from qortex_core.ingest.text_frequency import (
    changed_frequency,
    document_frequency,
    phrase_frequency,
    refreshed_frequency,
)
from qortex_core.storage import id_keys
from qortex_core.storage.store import CONCEPTS

WORDS = "passage_words"  # the snapshot table of the passages' word document frequencies


def passage_texts(passages: pa.Table) -> pa.ChunkedArray:
    """Each passage's counted text: title, a space, text."""
    return pc.binary_join_element_wise(passages["title"], passages["text"], " ")


def _kept(passages: pa.Table, base: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(n,) True where a passage is the base's; (n_base,) True where a base passage is kept.

    The id is the digest of the title and text (``Passage.full_text``), so the same id is the
    same words: the texts are not compared (a title moved into the text only moves a word
    across the separator, which is no word)."""
    at = id_keys.index_in(passages["id"], base["id"])  # (n,) -1: not the base's
    same = at >= 0
    used = np.zeros(base.num_rows, bool)
    used[at[same]] = True
    return same, used


def _base_words(base: Base | None) -> tuple[pa.Table, pa.Table] | None:
    """The base's passages and word frequencies, when it stored them."""
    if base is None or WORDS not in base.snapshot.tables:
        return None
    return base.snapshot.tables["passages"], base.snapshot.tables[WORDS]


def text_frequency(
    passages: pa.Table, concepts: pa.Table, base: Base | None, same_as: np.ndarray | None = None
) -> tuple[np.ndarray, pa.Table]:
    """(n_phrases,) the least passage-text document frequency of each phrase's words, and the
    (word, df) table of the passages (from the base's when it has one and little changed; a
    concept's frequency from the base's where ``same_as``, its row there with the same id and
    name, is not -1)."""
    known = _base_words(base) if passages.num_rows else None
    df, moved = None, None
    if known is not None:
        old, old_df = known
        same, used = _kept(passages, old)
        if (~same).sum() + (~used).sum() <= FULL_FRACTION * passages.num_rows:
            added = passage_texts(passages.filter(pa.array(~same)))
            removed = passage_texts(old.filter(pa.array(~used)))
            df, moved = changed_frequency(old_df, removed, added)
    if df is None:
        texts = passage_texts(passages) if passages.num_rows else pa.array([], pa.string())
        df = document_frequency(texts)
    if concepts.num_rows == 0:
        return np.zeros(0, np.float32), df
    earlier = None
    if moved is not None and base is not None and same_as is not None:
        earlier = _base_frequency(concepts, base, same_as)
    if earlier is None or moved is None:
        return phrase_frequency(df, concepts["name"]), df
    return refreshed_frequency(df, concepts["name"], earlier, moved), df


def _base_frequency(concepts: pa.Table, base: Base, same_as: np.ndarray) -> np.ndarray | None:
    """(n_phrases,) each concept's text frequency in the base where it has the same id and
    name there (``same_as``: that row, -1 none), NaN elsewhere; None when the base has no
    frequencies."""
    old = base.snapshot.arrays.get("phrase_text_frequency")
    keys = base.keys(CONCEPTS)
    if old is None or len(old) != keys.num_rows:
        return None
    out = np.full(concepts.num_rows, np.nan, np.float32)
    same = same_as >= 0
    out[same] = np.asarray(old)[same_as[same]]
    return out
