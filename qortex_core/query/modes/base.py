"""The mode protocol: a mode ranks a query's passages from a :class:`QueryContext`.

A mode is an object with a ``name``, a one-line ``summary``, ``in_eval`` (whether
``qortex eval`` runs it by default) and ``rank(ctx) -> Ranking``. The retriever
turns the ranking into hits, concepts, rules and notes; a mode never builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from qortex_core.query.config import RetrievalConfig
from qortex_core.query.scoring import blend_text
from qortex_core.query.seeding import Seeding, seed
from qortex_core.query.snapshot_view import SnapshotView

if TYPE_CHECKING:
    from qortex_core.query.lexical import LexicalIndex
    from qortex_core.query.liveness import Liveness
    from qortex_core.query.recognition import Recognizer


@dataclass(frozen=True)
class Walked:
    """What the graph walk left behind, for the hits' seeds, concepts and rules."""

    node_scores: np.ndarray  # (n_nodes,) PPR mass
    teleport: np.ndarray  # (n_nodes,) restart vector
    seeding: Seeding


@dataclass(frozen=True)
class Ranking:
    """A mode's answer: one score per passage and the named components behind it.

    Attributes:
        mode: the mode that ranked (``auto``: the one it routed to; a fallback: ``dense``).
        scores: (n_passages,) higher is better; ranked after the scoring profile.
        parts: named (n_passages,) components shown in each hit's breakdown.
        walked: set when the graph was walked (seeds, concepts and rules come from it).
        note: a fallback or filter note for the result.
        route: why ``auto`` chose the mode.
        confidence: hybrid's agreement of the dense and graph top-k.
    """

    mode: str
    scores: np.ndarray
    parts: dict[str, np.ndarray]
    walked: Walked | None = None
    note: str | None = None
    route: str | None = None
    confidence: float | None = None


@dataclass
class QueryContext:
    """Everything a mode may read for one query; expensive steps are computed once, on demand.

    Attributes:
        text: the query; vector: (d,) its unit embedding; dense: (n_passages,) cosines.
        view: the snapshot's arrays; walk: the PPR operator; config: retrieval parameters.
        allowed: (n_passages,) domain mask, None when every domain is allowed.
        factors: the learned teleportation factors (n_phrases,), read when a walk seeds.
        preference: the learned (n_passages,) preference, read when dense-first needs it.
        recognizer: optional LLM filter over the linked facts.
        lexical_index: the snapshot's BM25 index (None: the snapshot has none).
        live: what live passages back while some are hidden (forgotten), None when none is:
            nothing else seeds the walk (:mod:`qortex_core.query.liveness`).
        extras: per-query caches other channels add (keyed by channel name).
    """

    text: str
    vector: np.ndarray
    dense: np.ndarray
    view: SnapshotView
    walk: Any
    config: RetrievalConfig
    allowed: np.ndarray | None
    factors: Callable[[], np.ndarray]
    preference: Callable[[], np.ndarray]
    recognizer: Recognizer | None = None
    lexical_index: LexicalIndex | None = None
    live: Liveness | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    _seeding: Seeding | None = None

    def lexical(self) -> np.ndarray | None:
        """(n_passages,) BM25 scores (0: no match), None when the channel is off or absent."""
        if self.lexical_index is None or not self.config.fulltext.enabled:
            return None
        if "lexical" not in self.extras:
            limit = self.config.fulltext.candidates
            self.extras["lexical"] = self.lexical_index.scores(self.text, limit)
        return self.extras["lexical"]

    def text_scores(self) -> np.ndarray:
        """(n_passages,) dense and BM25 fused (``fulltext.text_weight``); dense when BM25 is
        off, absent or matches nothing."""
        if "text" not in self.extras:
            self.extras["text"] = blend_text(
                self.dense, self.lexical(), self.config.fulltext.text_weight
            )  # (n_passages,)
        return self.extras["text"]

    def seeding(self) -> Seeding:
        """The walk's seeding for this query (linked facts, concept weights, teleport)."""
        if self._seeding is None:
            self._seeding = seed(
                self.view,
                self.config,
                self.text,
                self.vector,
                self.dense,
                self.factors,
                self.recognizer,
                self.lexical() if self.config.fulltext.seed_weight > 0 else None,
                self.live,
            )
        return self._seeding


class Mode(Protocol):
    """A retrieval mode (one module under :mod:`qortex_core.query.modes`, exporting ``MODE``)."""

    name: str
    summary: str
    in_eval: bool

    def rank(self, ctx: QueryContext) -> Ranking: ...


def dense_ranking(ctx: QueryContext, note: str | None = None) -> Ranking:
    """Passages by query cosine alone (the dense mode and every fallback to it)."""
    return Ranking("dense", ctx.dense, {"dense": ctx.dense}, note=note)
