"""What a query returns: ranked passage and concept hits, the walk's seeds, rules and notes."""

from __future__ import annotations

from dataclasses import dataclass, field

from qortex_core.jsonable import JsonRecord
from qortex_core.query.rules import RuleHit


@dataclass(frozen=True)
class Seed(JsonRecord):
    """A node the walk restarted from, and why."""

    node_id: str
    name: str
    weight: float
    via: str


@dataclass(frozen=True)
class PassageHit(JsonRecord):
    """One ranked passage, its score and the components behind it."""

    id: str
    title: str
    text: str
    domain: str
    score: float
    breakdown: dict[str, float]
    seeds: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()
    concept_ids: tuple[str, ...] = ()  # the concepts this hit came through (what feedback adjusts)
    time: str | None = None  # event time, ISO 8601 UTC (None: the passage has none)
    tier: str = "graph"  # "graph": the snapshot; "fresh": a written memory not yet consolidated
    # [0, 1], comparable across modes and tiers (:mod:`qortex_core.query.relevance`)
    relevance: float | None = None
    valid_from: str | None = None  # true from (its event time)
    valid_until: str | None = None  # until a later statement of the same attribute replaced it
    superseded_by: str | None = None  # the record of that statement


@dataclass(frozen=True)
class ConceptHit(JsonRecord):
    """One ranked concept (graph modes)."""

    id: str
    name: str
    score: float


@dataclass(frozen=True)
class QueryResult(JsonRecord):
    """Ranked passages and concepts, the seeds of the walk, and any fallback taken."""

    query: str
    mode: str
    snapshot: str
    passages: list[PassageHit]
    concepts: list[ConceptHit] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    fallback: str | None = None
    query_id: str = ""
    rules: list[RuleHit] = field(default_factory=list)
    profile: str = "default"
    route: str | None = None  # why ``auto`` took its mode
    confidence: float | None = None  # hybrid: agreement of the dense and graph top-k
    factors_version: int = 0
    no_answer: bool = False  # nothing reached min_relevance: passages is empty
