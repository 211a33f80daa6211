"""Seeding the walk: link facts to the query, filter them, weigh concepts, build the teleport."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from qortex_core.query.config import RetrievalConfig
from qortex_core.query.fact_index import cell_scores
from qortex_core.query.seeding import (
    cosine,
    lexical_matches,
    lexical_seed_weights,
    link_scores,
    min_max,
    phrase_seed_weights,
    teleport_vector,
    top_indices,
)
from qortex_core.query.snapshot_view import SnapshotView

if TYPE_CHECKING:
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


def link_facts(
    view: SnapshotView, config: RetrievalConfig, vector: np.ndarray, dense: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw fact cosines, linking scores and the linked facts above the threshold.

    Returns:
        (n_facts,) cosine, (n_facts,) linking score, (t,) linked fact indices, best first.
    """
    if view.fact_index is not None and config.fact_probes > 0:
        return _linked_by_cells(view, config, vector, dense)
    fact_scores = cosine(view.fact_vectors, vector)  # (n_facts,)
    # (n_facts,) cosine + fact_context x best cosine among each fact's source passages
    linking = (
        link_scores(fact_scores, view.fact_sources.context(dense), config.fact_context)
        if config.fact_context > 0
        else fact_scores
    )
    linked = top_indices(linking, config.fact_top_k)
    return fact_scores, linking, linked[fact_scores[linked] >= config.fact_threshold]


def _linked_by_cells(
    view: SnapshotView, config: RetrievalConfig, vector: np.ndarray, dense: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`link_facts` over the fact index's candidates; every other fact gets the lowest
    scores seen, so it is never linked and the min-max of the linking scores spans the
    scored facts."""
    assert view.fact_index is not None
    at, scores, link = cell_scores(
        view.fact_index,
        view.fact_vectors,
        view.fact_sources,
        vector,
        dense,
        config.fact_probes,
        config.fact_context,
    )  # (candidates,) each
    n = view.fact_vectors.shape[0]
    fact_scores = np.full(n, scores.min(initial=0.0), np.float32)  # (n_facts,)
    linking = np.full(n, link.min(initial=0.0), np.float32)
    fact_scores[at], linking[at] = scores, link
    linked = at[top_indices(link, config.fact_top_k)]
    return fact_scores, linking, linked[fact_scores[linked] >= config.fact_threshold]


def phrase_weights(
    view: SnapshotView,
    config: RetrievalConfig,
    text: str,
    linked: np.ndarray,
    linking: np.ndarray,
) -> np.ndarray:
    """(n_phrases,) seed weight per concept: linked facts' ends plus verbatim matches."""
    weights = phrase_seed_weights(
        linked, min_max(linking)[linked], view.fact_nodes, view.passage_count, config.specificity
    )  # (n_phrases,)
    if config.lexical_weight > 0:
        weights = weights + lexical_seed_weights(
            lexical_matches(text, view.phrase_index),
            view.text_count,
            config.lexical_weight,
            config.lexical_max_passages,
            config.specificity,
        )
    return weights


def seed(
    view: SnapshotView,
    config: RetrievalConfig,
    text: str,
    vector: np.ndarray,
    dense: np.ndarray,
    factors: Callable[[], np.ndarray],
    recognizer: Recognizer | None = None,
    lexical: np.ndarray | None = None,
) -> Seeding:
    """Link facts, filter them (when a recognizer is set) and build the walk's teleport vector.

    Args:
        text: the query; vector: its unit embedding; dense: (n_passages,) query-to-passage
            cosine; factors: returns the (n_phrases,) learned teleportation factors (1.0
            when none), read only when the walk runs; lexical: (n_passages,) BM25 scores
            that add ``fulltext.seed_weight`` x min-max BM25 to the passages' restart mass.
    """
    fact_scores, linking, linked = link_facts(view, config, vector, dense)
    note = None  # what the recognition filter did, when it did not simply filter
    if recognizer is not None and linked.size:
        from qortex_core.query.recognition import filter_linked

        linked, note = filter_linked(
            recognizer,
            text,
            linking,
            fact_scores,
            view.facts,
            linked,
            config.recognition_candidates,
            config.fact_threshold,
        )
    best = float(fact_scores[linked].max()) if linked.size else None
    if linked.size == 0:  # HippoRAG 2: no relevant fact -> dense retrieval
        note = note or f"no fact reached cosine {config.fact_threshold}: dense retrieval"
        return Seeding(linked, best, np.zeros(view.n_phrases, np.float32), None, note)
    weights = phrase_weights(view, config, text, linked, linking) * factors()  # (n_phrases,)
    teleport = teleport_vector(weights, dense, config.passage_node_weight)  # (n_nodes,)
    if lexical is not None and config.fulltext.seed_weight > 0 and lexical.max() > 0:
        teleport[view.n_phrases :] += config.fulltext.seed_weight * min_max(lexical)
    return Seeding(linked, best, weights, teleport, note)
