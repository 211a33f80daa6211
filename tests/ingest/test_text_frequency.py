"""Vectorised phrase text frequency equals the word-by-word count it replaced."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.ingest import text_frequency
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.text_frequency import (
    document_frequency,
    phrase_frequency,
    phrase_text_frequency,
    updated_frequency,
)
from qortex_core.storage import ids


def _reference(passage_texts, phrase_names):
    """The Python count the snapshot stage ran before."""
    df: Counter[str] = Counter()
    for text in passage_texts:
        df.update(set(ids.normalize_phrase(text).split()))
    out = np.zeros(len(phrase_names), np.float32)
    for i, name in enumerate(phrase_names):
        words = ids.normalize_phrase(name).split()
        out[i] = min((df.get(w, 0) for w in words), default=0)
    return out


def test_equals_the_python_count_on_a_synthetic_corpus(monkeypatch):
    monkeypatch.setattr(text_frequency, "_BATCH", 97)  # several counting batches
    passages = SynthCorpus(SynthConfig(passages=400, seed=5)).passages()
    texts = [f"{p.title} {p.text}" for p in passages]
    names = sorted({c.name for ex in OfflineExtractor().extract(passages) for c in ex.concepts})
    names += ["unseen zzzword", "", "  --  ", texts[0].split()[1]]
    got = phrase_text_frequency(texts, names)
    want = _reference(texts, names)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert (want > 1).sum() > 100 and (want == 0).sum() >= 3


def test_equals_the_python_count_on_unicode_and_punctuation():
    texts = [
        "Zoë Saldaña met the KELVIN \u212a team in İstanbul.",
        "ÉCOLE école Ecole; straße STRASSE ǅemal",
        "tab\tseparated\nlines  and__underscores 3.14 x-ray",
        "",
        "ΑΘΗΝΑ Athens athens ATHENS",
    ]
    names = [
        "Zoë",
        "kelvin",
        "istanbul",
        "école",
        "Ecole",
        "strasse",
        "x ray",
        "3 14",
        "Athens",
        "ΑΘΗΝΑ",
        "dzemal",
        "lines and",
        "ǅemal",
        "\u212a",
    ]
    assert np.array_equal(phrase_text_frequency(texts, names), _reference(texts, names))


def test_passage_texts_are_not_kept_in_the_phrase_memo():
    # the memo of normalize_phrase is for concept names (short, recurring); passage texts with
    # non-ASCII characters (curly quotes, accents) must not fill it with whole passages
    texts = [f"Café “{i}” " + "word " * 200 for i in range(300)]  # 300 distinct ~1 KB texts
    ids.normalize_phrase.cache_clear()
    out = phrase_text_frequency(texts, ["caf", "word", "café", "cafe"])
    assert out.tolist() == [300.0, 300.0, 300.0, 0.0]  # "é" is dropped: "café" is "caf"
    assert ids.normalize_phrase.cache_info().currsize <= 4  # the names at most, no passage


def test_a_slice_counts_only_its_own_texts_and_a_null_text_has_no_words():
    texts = pa.array(["alpha beta", None, "beta gamma", "gamma delta", "alpha alpha"])
    got = phrase_text_frequency(texts.slice(1, 3), ["alpha", "beta", "gamma", "delta", "beta x"])
    assert got.tolist() == [0, 1, 2, 1, 0]


def test_frequencies_updated_by_removed_and_added_texts_equal_a_full_count():
    texts = ["The river Thames", "thames barrier", "A river in Río", "barrier reef", "Reef fish"]
    before = document_frequency(texts[:4])
    after = updated_frequency(before, removed=[texts[1], texts[2]], added=[texts[4], "río"])
    final = [texts[0], texts[3], texts[4], "río"]
    want = document_frequency(final)
    assert after.sort_by("word").equals(want.sort_by("word").cast(after.schema))
    assert "in" not in after["word"].to_pylist()  # counted 0 now: dropped
    phrases = ["river thames", "barrier", "reef fish", "rio"]
    np.testing.assert_array_equal(
        phrase_frequency(after, phrases), phrase_text_frequency(final, phrases)
    )


def test_refreshed_frequency_counts_again_only_what_moved_and_equals_a_full_count(monkeypatch):
    passages = SynthCorpus(SynthConfig(passages=300, seed=8)).passages()
    texts = [f"{p.title} {p.text}" for p in passages]
    before, after = texts[:297], texts[2:]  # 2 passages removed, 3 added
    names = sorted({c.name for ex in OfflineExtractor().extract(passages) for c in ex.concepts})
    names += ["unseen zzzword", ""]
    old = phrase_text_frequency(before, names)
    old[:5] = np.nan  # phrases the earlier count did not have
    df, moved = text_frequency.changed_frequency(
        document_frequency(before), before[:2], texts[297:]
    )
    assert df.sort_by("word").equals(document_frequency(after).sort_by("word").cast(df.schema))
    asked = []
    monkeypatch.setattr(
        text_frequency,
        "phrase_frequency",
        lambda d, n: asked.append(len(n)) or phrase_frequency(d, n),
    )
    got = text_frequency.refreshed_frequency(df, pa.array(names), old, moved)
    assert got.dtype == np.float32 and np.array_equal(got, phrase_frequency(df, names))
    assert len(asked) == 1 and 5 <= asked[0] < len(names) // 2  # the others kept theirs
    assert not np.array_equal(old[5:], got[5:])  # some kept phrase did move: counted again
    # a phrase with a moved word whose least df that word does not hold is not counted again
    named = set(moved["word"].to_pylist())
    with_moved = sum(any(w in named for w in ids.normalize_phrase(n).split()) for n in names)
    assert asked[0] < with_moved


def test_a_few_phrases_count_the_same_against_a_large_vocabulary():
    # few words against many: looked up by a scan of the vocabulary, not a hash of it; the
    # whole list the other way
    texts = [f"{p.title} {p.text}" for p in SynthCorpus(SynthConfig(passages=200)).passages()]
    df = document_frequency(texts + ["Río zzz", "río"])
    names = ["river Thames", "rio", "nowhere at all", "", "ZZZ zzz"] + [t[:90] for t in texts]
    flat = pc.list_flatten(text_frequency._words(pa.array(names[:5])))
    assert len(flat) * 4 < df.num_rows  # the scan
    assert len(pc.list_flatten(text_frequency._words(pa.array(names)))) * 4 >= df.num_rows
    want = [
        min(
            (_reference_df(texts + ["Río zzz", "río"], w) for w in ids.normalize_phrase(n).split()),
            default=0,
        )
        for n in names
    ]
    np.testing.assert_array_equal(phrase_frequency(df, names[:5]), np.float32(want[:5]))
    np.testing.assert_array_equal(phrase_frequency(df, names), np.float32(want))


def _reference_df(texts: list[str], word: str) -> int:
    return sum(word in ids.normalize_phrase(t).split() for t in texts)


@pytest.mark.parametrize("seed", range(6))
def test_refreshed_frequency_after_random_changes_equals_a_full_count(seed):
    # small vocabularies: words tie, vanish (df 0) and appear, in removals and additions alike
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]

    def text() -> str:
        return " ".join(rng.choice(vocab, size=int(rng.integers(1, 5))))

    texts = [text() for _ in range(40)]
    names = [text() for _ in range(60)] + ["", "zz unknown"]
    gone = rng.choice(len(texts), size=int(rng.integers(0, 20)), replace=False)
    removed = [texts[i] for i in gone]
    added = [text() for _ in range(int(rng.integers(0, 20)))]
    after = [t for i, t in enumerate(texts) if i not in set(gone)] + added
    df, moved = text_frequency.changed_frequency(document_frequency(texts), removed, added)
    old = phrase_text_frequency(texts, names)
    got = text_frequency.refreshed_frequency(df, pa.array(names), old, moved)
    np.testing.assert_array_equal(got, phrase_text_frequency(after, names))
