"""What graph exploration answers (:mod:`qortex_core.query.explore`): frozen, JSON-ready records.

Every type has ``to_dict()`` and ``from_dict()`` (:class:`~qortex_core.jsonable.JsonRecord`):
plain dicts, lists, strings and finite numbers (times are ISO 8601 strings), so
``json.dumps(x.to_dict())`` always works.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qortex_core.jsonable import JsonRecord


@dataclass(frozen=True)
class Resolved(JsonRecord):
    """Which concept a name given by the caller stands for.

    Attributes:
        query: the name as given.
        name: the concept's name in the snapshot; concept_id: its id.
        how: ``exact`` (the normalised name matched) or ``nearest`` (the closest concept
            embedding).
        score: cosine between the name's and the concept's embeddings (1.0 when exact).
    """

    query: str
    name: str
    concept_id: str
    how: str
    score: float


@dataclass(frozen=True)
class Neighbor(JsonRecord):
    """A concept near the resolved one.

    Attributes:
        depth: hops from the resolved concept (1: adjacent).
        via: the concept one hop nearer that reached it (the resolved one at depth 1).
        relation: the predicates of the facts linking ``via`` and this concept ("; " joined),
            ``synonym`` for a synonym edge, ``related`` otherwise.
        weight: the weight of that edge in the graph.
    """

    name: str
    concept_id: str
    depth: int
    via: str
    relation: str
    weight: float


@dataclass(frozen=True)
class Neighborhood(JsonRecord):
    """:meth:`Explorer.neighbors`' answer: the resolved concept and its neighbours, nearest and
    strongest first."""

    resolved: Resolved
    neighbors: list[Neighbor]
    snapshot: str
    truncated: bool = False  # more concepts lay within the depth than ``limit``


@dataclass(frozen=True)
class PassageRef(JsonRecord):
    """A passage of the snapshot: where a fact was stated or a concept mentioned."""

    id: str
    title: str
    text: str
    time: str | None
    domain: str


@dataclass(frozen=True)
class PathStep(JsonRecord):
    """One node of a path; ``edge`` names the edge from the step before (empty for the first).

    ``kind`` is ``concept`` or ``passage``; a passage step means both its neighbours on the path
    are mentioned in it (``passage`` then holds it).
    """

    name: str
    node_id: str
    kind: str
    edge: str = ""
    passage: PassageRef | None = None


@dataclass(frozen=True)
class GraphPath(JsonRecord):
    """:meth:`Explorer.path`'s answer: a shortest path (fewest edges) or ``found`` False."""

    json_extras = ("length",)  # to_dict() adds it

    source: Resolved
    target: Resolved
    found: bool
    steps: list[PathStep]
    snapshot: str
    max_len: int

    @property
    def length(self) -> int:
        """Edges on the path (0 when none was found or both names resolved to one concept)."""
        return max(len(self.steps) - 1, 0)


@dataclass(frozen=True)
class FactRef(JsonRecord):
    """A fact about a concept and the passages that state it (with their event times)."""

    fact_id: str
    subject: str
    predicate: str
    object: str
    passages: list[PassageRef] = field(default_factory=list)


@dataclass(frozen=True)
class EntityInfo(JsonRecord):
    """:meth:`Explorer.entity`'s answer: the facts about a concept and where it is mentioned.

    Attributes:
        facts: facts whose subject or object is the concept, most stated first.
        mentioned_in: passages that mention the concept, newest event time first.
        degree: concepts adjacent to it.
    """

    resolved: Resolved
    facts: list[FactRef]
    mentioned_in: list[PassageRef]
    degree: int
    snapshot: str
