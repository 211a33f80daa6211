"""Seeding the walk: link facts to the query, filter them, weigh concepts, build the teleport."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from qortex_core.query.config import RetrievalConfig
from qortex_core.query.fact_index import cell_scores
from qortex_core.query.phrases import lexical_matches
from qortex_core.query.scoring import (
    cosine,
    lexical_seeds,
    link_scores,
    min_max,
    phrase_seed_weights,
    teleport_vector,
    top_indices,
)
from qortex_core.query.snapshot_view import SnapshotView

if TYPE_CHECKING:
    from qortex_core.query.liveness import Liveness
    from qortex_core.query.recognition import Recognizer


@dataclass(frozen=True)
class Seeding:
    """What seeding made of one query; ``teleport`` None: no walk, retrieve densely (``note``
    says why)."""

    linked: np.ndarray  # (t,) indices of the facts that seed the walk
    best_cosine: float | None  # raw cosine of the best linked fact (``auto`` routes on it)
    phrase_weights: np.ndarray  # (n_phrases,)
    teleport: np.ndarray | None  # (n_nodes,) restart vector over [phrases | passages]
    note: str | None = None
    seeded: np.ndarray | None = None  # ascending phrases with a weight (None: not kept)
    support: np.ndarray | None = None  # ascending nodes outside which the teleport is zero

    def seeded_phrases(self) -> np.ndarray:
        """Ascending indices of the phrases with a non-zero seed weight."""
        if self.seeded is None:
            return np.flatnonzero(self.phrase_weights != 0)
        return self.seeded[self.phrase_weights[self.seeded] != 0]


@dataclass(frozen=True)
class FactLinks:
    """The facts one query scored (every fact, or a fact index's candidates) and those linked.

    Facts left unscored count as the lowest scores seen, so they are never linked and the
    min-max of the linking scores spans the scored facts.
    """

    at: np.ndarray | None  # (c,) indices of the scored facts; None: every fact, in order
    cosine: np.ndarray  # (c,) raw query cosine
    linking: np.ndarray  # (c,) linking score
    picked: np.ndarray  # (t,) positions in the scored arrays of the linked facts, best first
    n_facts: int

    @property
    def linked(self) -> np.ndarray:
        """(t,) fact indices of the linked facts, best first."""
        return self.picked if self.at is None else self.at[self.picked]

    def weights(self) -> np.ndarray:
        """(t,) min-max linking score of each linked fact (over every fact)."""
        scores = self.linking
        lo, hi = float(scores.min()), float(scores.max())
        if self.at is not None and self.at.size < self.n_facts:  # the unscored facts' fill
            fill = self._fill(scores)
            lo, hi = min(lo, fill), max(hi, fill)
        picked = scores[self.picked]
        return np.ones_like(picked) if hi - lo < 1e-12 else (picked - lo) / (hi - lo)

    @staticmethod
    def _fill(scores: np.ndarray) -> float:
        """The score an unscored fact counts as: the lowest seen, at most 0."""
        return float(scores.min(initial=0.0))

    def full(self) -> tuple[np.ndarray, np.ndarray]:
        """(n_facts,) cosine and linking score of every fact (a recognition filter reads them)."""
        if self.at is None:
            return self.cosine, self.linking
        cos = np.full(self.n_facts, self._fill(self.cosine), np.float32)
        link = np.full(self.n_facts, self._fill(self.linking), np.float32)
        cos[self.at], link[self.at] = self.cosine, self.linking
        return cos, link


def link_facts(
    view: SnapshotView,
    config: RetrievalConfig,
    vector: np.ndarray,
    dense: np.ndarray,
    alive: np.ndarray | None = None,
) -> FactLinks:
    """Score facts against the query and link the best ones above the threshold: through the
    fact index's nearest cells when the snapshot has one, else every fact. ``alive``:
    (n_facts,) False for facts no live passage backs (never linked)."""
    if view.fact_index is not None and config.fact_probes > 0:
        at, scores, link = cell_scores(
            view.fact_index,
            view.fact_vectors,
            view.fact_sources,
            vector,
            dense,
            config.fact_probes,
            config.fact_context,
        )  # (candidates,) each
        n_facts = view.fact_vectors.shape[0]
        return _links(at, scores, link, config, n_facts, None if alive is None else alive[at])
    fact_scores = cosine(view.fact_vectors, vector)  # (n_facts,)
    # (n_facts,) cosine + fact_context x best cosine among each fact's source passages
    linking = (
        link_scores(fact_scores, view.fact_sources.context(dense), config.fact_context)
        if config.fact_context > 0
        else fact_scores
    )
    return _links(None, fact_scores, linking, config, fact_scores.shape[0], alive)


def _links(
    at: np.ndarray | None,
    scores: np.ndarray,
    link: np.ndarray,
    config: RetrievalConfig,
    n_facts: int,
    alive: np.ndarray | None = None,
) -> FactLinks:
    """The ``fact_top_k`` best by linking score whose cosine reaches ``fact_threshold``
    (among the ``alive`` ones, when given)."""
    ranked = link if alive is None else np.where(alive, link, np.float32(-np.inf))
    picked = top_indices(ranked, config.fact_top_k)
    keep = scores[picked] >= config.fact_threshold
    picked = picked[keep if alive is None else keep & alive[picked]]
    return FactLinks(at, scores, link, picked, n_facts)


def phrase_weights(
    view: SnapshotView,
    config: RetrievalConfig,
    text: str,
    linked: np.ndarray,
    linked_weights: np.ndarray,
    alive: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(n_phrases,) seed weight per concept: linked facts' ends plus verbatim matches; and the
    ascending indices of those concepts (the only ones that can carry a weight).

    Args:
        linked: (t,) linked fact indices; linked_weights: (t,) their min-max linking scores.
        alive: (n_phrases,) False for concepts no live passage backs (never matched verbatim).
    """
    weights = phrase_seed_weights(
        linked, linked_weights, view.fact_nodes, view.passage_count, config.specificity
    )  # (n_phrases,)
    idx = np.zeros(0, np.int64)
    if config.lexical_weight > 0:
        idx, values = lexical_seeds(
            lexical_matches(text, view.phrase_index),
            view.text_count,
            config.lexical_weight,
            config.lexical_max_passages,
            config.specificity,
        )  # (k,) each: a few phrases, added in place
        if alive is not None:
            idx, values = idx[alive[idx]], values[alive[idx]]
        weights[idx] += values
    return weights, np.union1d(view.fact_nodes[linked].reshape(-1), idx)


def _recognised(
    recognizer: Recognizer,
    view: SnapshotView,
    config: RetrievalConfig,
    text: str,
    links: FactLinks,
    alive: np.ndarray | None,
) -> tuple[FactLinks, str | None]:
    """The links after the recognition filter, and its note (facts no live passage backs
    never reach the filter)."""
    from qortex_core.query.recognition import filter_linked

    fact_scores, linking = links.full()  # (n_facts,) each
    shown = fact_scores if alive is None else np.where(alive, fact_scores, np.float32(-np.inf))
    linked, note = filter_linked(
        recognizer,
        text,
        linking,
        shown,
        view.facts,
        links.linked,
        config.recognition_candidates,
        config.fact_threshold,
    )
    return FactLinks(None, fact_scores, linking, linked, links.n_facts), note


def seed(
    view: SnapshotView,
    config: RetrievalConfig,
    text: str,
    vector: np.ndarray,
    dense: np.ndarray,
    factors: Callable[[], np.ndarray],
    recognizer: Recognizer | None = None,
    lexical: np.ndarray | None = None,
    live: Liveness | None = None,
) -> Seeding:
    """Link facts, filter them (when a recognizer is set) and build the walk's teleport vector.

    Args:
        text: the query; vector: its unit embedding; dense: (n_passages,) query-to-passage
            cosine; factors: returns the (n_phrases,) learned teleportation factors (1.0
            when none), read only when the walk runs; lexical: (n_passages,) BM25 scores
            that add ``fulltext.seed_weight`` x min-max BM25 to the passages' restart mass.
        live: what live passages back when some are hidden (forgotten): nothing else links,
            seeds or restarts the walk.
    """
    if live is not None:  # a hidden passage lends no context to a fact's linking score
        lowest = float(dense[live.passages].min()) if live.passages.any() else 0.0
        dense = np.where(live.passages, dense, np.float32(lowest))
    links = link_facts(view, config, vector, dense, None if live is None else live.facts)
    note = None  # what the recognition filter did, if it did not filter
    if recognizer is not None and links.linked.size:
        links, note = _recognised(
            recognizer, view, config, text, links, None if live is None else live.facts
        )
    linked = links.linked
    best = float(links.cosine[links.picked].max()) if linked.size else None
    if linked.size == 0:  # HippoRAG 2: no relevant fact -> dense retrieval
        note = note or f"no fact reached cosine {config.fact_threshold}: dense retrieval"
        return Seeding(linked, best, np.zeros(view.n_phrases, np.float32), None, note)
    weights, seeded = phrase_weights(
        view, config, text, linked, links.weights(), None if live is None else live.phrases
    )  # (n_phrases,)
    weights[seeded] *= factors()[seeded]  # zero elsewhere
    teleport = teleport_vector(
        weights, dense, config.passage_node_weight, config.passage_seeds, seeded
    )  # (n_nodes,)
    n = view.n_phrases
    if lexical is not None and config.fulltext.seed_weight > 0 and lexical.max() > 0:
        teleport[n:] += config.fulltext.seed_weight * min_max(lexical)
    if live is not None:
        teleport[n:][~live.passages] = 0.0  # no restart on a forgotten passage
    passages = np.flatnonzero(teleport[n:] != 0)  # (p,) a bool scan: ~8x a float one
    support = np.concatenate([seeded, n + passages])  # (s,) ascending
    return Seeding(linked, best, weights, teleport, note, seeded, support)
