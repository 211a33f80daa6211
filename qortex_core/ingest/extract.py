"""Extractors: the Protocol, a deterministic offline extractor and recorded OpenIE replay."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from qortex_core.errors import DatasetError
from qortex_core.storage import ids
from qortex_core.storage.model import SPEAKER_LABEL, Concept, Extraction, Fact, Passage, Rule
from qortex_core.storage.source_files import read_bounded

OPENIE_MAX_BYTES = 4 << 30  # an OpenIE file larger than 4 GiB is refused, not read


class Extractor(Protocol):
    """Finds concepts, facts and rules in passages."""

    @property
    def cache_key(self) -> str:
        """Names the extractor, model and prompt version: part of the extraction cache key."""

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        """One :class:`Extraction` per passage, in order."""


def clean_triple(triple: object) -> tuple[str, str, str] | None:
    """A usable (subject, predicate, object) or None for malformed input."""
    if not isinstance(triple, (list, tuple)) or len(triple) != 3:
        return None
    parts = tuple(" ".join(str(p).split()) for p in triple)
    if not all(isinstance(p, (str, int, float)) for p in triple):
        return None
    if not ids.normalize_phrase(parts[0]) or not ids.normalize_phrase(parts[2]):
        return None
    return parts  # type: ignore[return-value]


def extraction_from_triples(
    passage: Passage,
    triples: Sequence[tuple[str, str, str]],
    extractor: str,
    rules: Sequence[Rule] = (),
) -> Extraction:
    """Extraction whose concepts are the triples' subjects and objects (HippoRAG 2's phrase
    nodes)."""
    facts: dict[str, Fact] = {}
    concepts: dict[str, Concept] = {}
    for s, p, o in triples:
        fact = Fact(s, p, o)
        facts.setdefault(fact.id, fact)
        for name in (s, o):
            concept = Concept(name, domain=passage.domain)
            concepts.setdefault(concept.id, concept)
    return Extraction(
        passage.id, tuple(concepts.values()), tuple(facts.values()), tuple(rules), extractor
    )


# -- offline ------------------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-.&]*[\w]|[A-Za-z0-9]")
_CONNECTORS = {"of", "the", "de", "la", "von", "van", "for", "du", "del", "der", "le", "di", "da"}
_STOP_CAPS = {
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "He",
    "She",
    "It",
    "They",
    "His",
    "Her",
    "Its",
    "Their",
    "This",
    "That",
    "These",
    "Those",
    "There",
    "After",
    "Before",
    "During",
    "As",
    "By",
    "For",
    "From",
    "With",
    "When",
    "While",
    "Although",
    "However",
    "But",
    "And",
    "Or",
    "If",
    "Since",
    "Following",
    "We",
    "I",
    "You",
    "Our",
    "Some",
    "Many",
    "Most",
    "All",
    "Also",
    "Then",
    "Later",
}
_SPEAKER_LABEL = re.compile(SPEAKER_LABEL)
_RULE_CUES = re.compile(
    r"\b(should|must|always|never|do not|don't|avoid|prefer|required|recommended)\b", re.I
)


def _spans(sentence: str) -> list[tuple[int, int, str]]:
    """Capitalised multi-word names and numbers, with their token positions."""
    tokens = _TOKEN.findall(sentence)
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok[0].isdigit() or (tok[0].isupper() and tok not in _STOP_CAPS):
            j = i + 1
            while j < len(tokens) and (
                tokens[j][0].isupper()
                or tokens[j][0].isdigit()
                or (tokens[j] in _CONNECTORS and j + 1 < len(tokens) and tokens[j + 1][0].isupper())
            ):
                j += 1
            spans.append((i, j, " ".join(tokens[i:j])))
            i = j
        else:
            i += 1
    return spans


@dataclass(frozen=True)
class OfflineConfig:
    """Knobs of the offline extractor."""

    max_predicate_words: int = 6
    version: str = "2"  # 2: a turn's speaker label is not read as a mention


class OfflineExtractor:
    """Deterministic, network-free extraction: capitalised names, numbers and the words between
    them.

    Facts link consecutive names within a sentence (the predicate is the words
    between them) and link the passage title to each name it introduces.
    Sentences with advice cues ("should", "never", ...) become rules. A dialogue turn's
    speaker label (``Caroline: Sure, ...``) is who speaks, not a mention: it is left out, so
    it neither becomes the subject of whatever name follows nor merges with the first word
    (``Caroline Sure``). Facts about a speaker come from extractors that state them.
    """

    def __init__(self, config: OfflineConfig = OfflineConfig()) -> None:
        self.config = config

    @property
    def cache_key(self) -> str:
        return f"offline/v{self.config.version}"

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        return [self._one(p) for p in passages]

    def _one(self, passage: Passage) -> Extraction:
        triples: list[tuple[str, str, str]] = []
        rules: list[Rule] = []
        title = " ".join(passage.title.split())
        for sentence in _SENTENCE.split(_SPEAKER_LABEL.sub("", passage.text, count=1)):
            tokens = _TOKEN.findall(sentence)
            spans = [s for s in _spans(sentence) if ids.normalize_phrase(s[2])]
            names = [s[2] for s in spans]
            for (_, end, left), (start, _, right) in zip(spans, spans[1:]):
                between = tokens[end:start]
                predicate = (
                    " ".join(between)
                    if 0 < len(between) <= self.config.max_predicate_words
                    else "related to"
                )
                if ids.normalize_phrase(left) != ids.normalize_phrase(right):
                    triples.append((left, predicate, right))
            if title:
                for name in names:
                    if ids.normalize_phrase(name) != ids.normalize_phrase(title):
                        triples.append((title, "mentions", name))
            if _RULE_CUES.search(sentence) and names:
                rules.append(
                    Rule(" ".join(sentence.split()), tuple(dict.fromkeys(names)), "guidance", 0.6)
                )
        return extraction_from_triples(passage, triples, self.cache_key, rules)


# -- recorded -----------------------------------------------------------------------------
def load_openie(path: str | Path) -> dict[str, list[tuple[str, str, str]]]:
    """Read a HippoRAG ``openie_results_ner_*.json`` file: passage text -> triples.

    Raises:
        DatasetError: the file is missing, not JSON or not in the OpenIE format.
    """
    path = Path(path)
    try:
        if not path.exists():
            raise FileNotFoundError(path)
        data = json.loads(read_bounded(path, OPENIE_MAX_BYTES).data.decode("utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"OpenIE file not found: {path}") from None
    except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError, read_bounded's
        raise DatasetError(f"OpenIE file {path} is not readable JSON: {exc}") from None
    except RecursionError:
        raise DatasetError(f"OpenIE file {path} is JSON nested too deeply to parse") from None
    docs = data.get("docs") if isinstance(data, dict) else None
    if not isinstance(docs, list) or not docs:
        raise DatasetError(f"OpenIE file {path} has no 'docs' list")
    out: dict[str, list[tuple[str, str, str]]] = {}
    for n, doc in enumerate(docs):
        if not isinstance(doc, dict) or not isinstance(doc.get("passage"), str):
            raise DatasetError(f"OpenIE file {path}: entry {n} has no 'passage' text")
        raw = doc.get("extracted_triples") or []
        if not isinstance(raw, list):
            raise DatasetError(f"OpenIE file {path}: entry {n} 'extracted_triples' is not a list")
        out[doc["passage"]] = [t for t in (clean_triple(x) for x in raw) if t is not None]
    return out


class RecordedExtractor:
    """Replays recorded LLM OpenIE output; passages it lacks go to a fallback extractor."""

    def __init__(self, path: str | Path, fallback: Extractor | None = None) -> None:
        self.path = Path(path)
        self._records = load_openie(self.path)
        # the cache key follows the content, so an edited file with the same name is extracted again
        self._content = ids.digest(self.path.read_text(encoding="utf-8"))
        self.fallback = fallback or OfflineExtractor()
        self.misses = 0

    @property
    def cache_key(self) -> str:
        return f"recorded/{self._content}"

    def covers(self, passage: Passage) -> bool:
        """Whether the recorded file has an entry for ``passage`` (else it goes to the fallback)."""
        return passage.full_text in self._records

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        out = []
        for passage in passages:
            triples = self._records.get(passage.full_text)
            if triples is None:
                self.misses += 1
                out.append(self.fallback.extract([passage])[0])
            else:
                out.append(extraction_from_triples(passage, triples, self.cache_key))
        return out


class WithRecordedFacts:
    """A base extractor's output plus recorded facts about each passage.

    For sources that come with their own extracted statements keyed by passage text, such
    as LoCoMo's per-speaker observations of a conversation (``(speaker, "observed",
    sentence)``, one per turn it cites): the base extractor still reads every passage,
    and the recorded facts and their concepts are added to what it found. Passages the
    record lacks get the base extraction alone.
    """

    def __init__(
        self, base: Extractor, facts: dict[str, Sequence[tuple[str, str, str]]], name: str
    ) -> None:
        self.base, self.name = base, name
        self._facts = {
            text: [t for t in (clean_triple(x) for x in triples) if t is not None]
            for text, triples in facts.items()
        }
        content = json.dumps(sorted(self._facts.items()), ensure_ascii=False)
        self._key = f"{base.cache_key}+{name}/{ids.digest(content)}"

    @property
    def cache_key(self) -> str:
        return self._key

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        out = []
        for passage, found in zip(passages, self.base.extract(passages)):
            triples = self._facts.get(passage.full_text) or self._facts.get(passage.text)
            if not triples:
                out.append(found)
                continue
            added = extraction_from_triples(passage, triples, self._key)
            out.append(
                Extraction(
                    passage.id,
                    _union(found.concepts, added.concepts),
                    _union(found.facts, added.facts),
                    found.rules,
                    self._key,
                )
            )
        return out


def _union(first: Sequence, second: Sequence) -> tuple:
    """Items of ``first``, then those of ``second`` whose id is new."""
    out = {item.id: item for item in first}
    for item in second:
        out.setdefault(item.id, item)
    return tuple(out.values())
