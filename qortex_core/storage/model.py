"""The data model: passages, concepts, facts, rules and relation types."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from qortex_core.storage import ids

# A dialogue turn is stored as "Name: text" ("Mary Ann: ..."): the speaker label, group "name".
# The offline extractor skips it; the attribution check reads participants from it.
SPEAKER_LABEL = r"^(?P<name>[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s+"


class RelationType(str, enum.Enum):
    """Typed relation between two concepts; the free-text predicate rides along."""

    RELATED = "related"
    IS_A = "is_a"
    PART_OF = "part_of"
    HAS_PROPERTY = "has_property"
    CAUSES = "causes"
    LOCATED_IN = "located_in"
    TEMPORAL = "temporal"
    CREATED_BY = "created_by"
    SYNONYM = "synonym"


@dataclass(frozen=True)
class Passage:
    """A chunk of a document: the unit that retrieval returns."""

    text: str
    title: str = ""
    doc_id: str = ""
    domain: str = "default"
    # ISO 8601 UTC (:mod:`qortex_core.storage.times`); neither is part of the content id
    time: str | None = field(default=None, compare=False)  # event time
    ingested_at: str | None = field(default=None, compare=False)  # when first stored

    @property
    def full_text(self) -> str:
        """Title and text as embedded and hashed (HippoRAG's ``passage`` field)."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    @property
    def id(self) -> str:
        return ids.passage_id(self.full_text)


@dataclass(frozen=True)
class Concept:
    """A phrase node of the graph."""

    name: str
    description: str = ""
    domain: str = "default"

    @property
    def id(self) -> str:
        return ids.concept_id(self.name)


@dataclass(frozen=True)
class Fact:
    """A (subject, predicate, object) triple between two concepts."""

    subject: str
    predicate: str
    object: str
    relation: RelationType = RelationType.RELATED

    @property
    def id(self) -> str:
        return ids.fact_id(self.subject, self.predicate, self.object)

    @property
    def text(self) -> str:
        """The text that is embedded for query-to-fact linking."""
        return fact_text(self.subject, self.predicate, self.object)


def fact_text(subject: str, predicate: str, obj: str) -> str:
    """Embedded form of a fact: the lower-cased triple as a Python tuple, as HippoRAG 2 embeds it.

    On musique_100 with all-MiniLM-L6-v2 this form links better than "s p o" prose.
    """
    return str((subject.lower(), predicate.lower(), obj.lower()))


@dataclass(frozen=True)
class Rule:
    """A piece of guidance linked to the concepts it is about."""

    text: str
    concepts: tuple[str, ...] = ()
    category: str = "general"
    confidence: float = 1.0

    @property
    def id(self) -> str:
        return ids.rule_id(self.text)


@dataclass(frozen=True)
class Extraction:
    """What one extractor found in one passage."""

    passage_id: str
    concepts: tuple[Concept, ...] = ()
    facts: tuple[Fact, ...] = ()
    rules: tuple[Rule, ...] = ()
    extractor: str = "offline"
    meta: dict = field(default_factory=dict, compare=False, hash=False)
