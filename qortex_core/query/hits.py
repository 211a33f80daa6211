"""Hit assembly: a mode's ranking -> passage hits (scored under a profile), seeds and concepts."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from qortex_core.query import profiles
from qortex_core.query.liveness import Liveness
from qortex_core.query.modes.base import QueryContext, Ranking, Walked
from qortex_core.query.results import ConceptHit, PassageHit, Seed
from qortex_core.query.rules import rank_rules, rule_cosine
from qortex_core.query.scoring import top_indices
from qortex_core.query.seeding import Seeding
from qortex_core.query.snapshot_view import SnapshotView


def profiled(
    ranking: np.ndarray,
    parts: dict[str, np.ndarray],
    profile: profiles.ScoringProfile,
    components: dict[str, np.ndarray],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Final scores under ``profile`` and the breakdown with every component.

    Args:
        components: (n_passages,) recency, salience and preference.
    """
    final, comps = profiles.combine(profile, ranking, components)
    return final, parts | comps | {"final": final}


def _trace(
    view: SnapshotView, i: int, walked: Walked | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Seed names, top concept names and concept ids a passage hit came through."""
    phrases = view.phrases_of(i)
    if walked is None:
        return (), (), tuple(view.node_ids.take(phrases[:10]))
    seeded = phrases[walked.teleport[phrases] > 0]
    seeds = tuple(view.node_names.take(seeded))
    top = phrases[np.argsort(-walked.node_scores[phrases])][:5]
    via = seeded if seeds else top
    return seeds, tuple(view.node_names.take(top)), tuple(view.node_ids.take(via))


def passage_hits(
    view: SnapshotView,
    final: np.ndarray,
    parts: dict[str, np.ndarray],
    top_k: int,
    allowed: np.ndarray | None,
    walked: Walked | None,
    relevance: Callable[[np.ndarray], np.ndarray] | None = None,
) -> list[PassageHit]:
    """The ``top_k`` passages by ``final`` (profiled) among ``allowed``, with their traces;
    ``relevance``: (k,) passage indices -> (k,) relevance in [0, 1]
    (:mod:`qortex_core.query.relevance`), called once for the hits."""
    ranking = np.asarray(final, dtype=np.float32)  # (n_passages,)
    if allowed is not None:
        ranking = np.where(allowed, ranking, np.float32(-np.inf))
    top = top_indices(ranking, top_k)
    finite = np.isfinite(ranking[top])  # (k,) best first: the hits end at the first -inf
    top = top if finite.all() else top[: int(np.argmin(finite))]
    rel = relevance(top) if relevance is not None else np.zeros(top.size, np.float32)  # (k,)
    out = []
    # only the hits' rows are read
    for i, p, r in zip(top.tolist(), view.passages.take(top), rel.tolist()):
        seeds, concepts, via = _trace(view, i, walked)
        out.append(
            PassageHit(
                p["id"],
                p["title"],
                p["text"],
                p["domain"],
                float(ranking[i]),
                {k: float(v[i]) for k, v in parts.items()},
                seeds,
                concepts,
                via,
                time=p.get("time"),
                relevance=float(r),
            )
        )
    return out


def seed_list(view: SnapshotView, seeding: Seeding) -> list[Seed]:
    """The walk's seeds, heaviest first, each with the linked fact that named it."""
    fact_text: dict[int, str] = {}
    for f in seeding.linked.tolist():
        row = view.facts.slice(f, 1).to_pylist()[0]
        for node in view.fact_nodes[f]:
            fact_text.setdefault(
                int(node), f"({row['subject']}, {row['predicate']}, {row['object']})"
            )
    weights = seeding.phrase_weights
    seeded = seeding.seeded_phrases()  # (s,) ascending
    out = [
        Seed(node_id, name, float(weights[n]), fact_text.get(n, ""))
        for n, node_id, name in zip(
            seeded.tolist(), view.node_ids.take(seeded), view.node_names.take(seeded)
        )
    ]
    return sorted(out, key=lambda s: -s.weight)


def concept_hits(
    view: SnapshotView, node_scores: np.ndarray, top_k: int, live: Liveness | None = None
) -> list[ConceptHit]:
    """The ``top_k`` concepts by PPR mass (``live``: only those a live passage backs)."""
    scores = node_scores[: view.n_phrases]  # (n_phrases,)
    if live is not None:
        scores = np.where(live.phrases, scores, -np.inf)
    top = top_indices(scores, top_k)
    top = top[np.isfinite(scores[top])]
    return [
        ConceptHit(node_id, name, float(node_scores[i]))
        for i, node_id, name in zip(
            top.tolist(), view.node_ids.take(top), view.node_names.take(top)
        )
    ]


def ranked_rules(
    view: SnapshotView,
    floor: float,
    ctx: QueryContext,
    ranking: Ranking,
    top_k: int,
    domains: Sequence[str] | None,
) -> list:
    """Rules by the walk's concept scores, or by concept cosine (at least ``floor``) when
    nothing was walked."""
    index = view.rule_index
    scores = (
        rule_cosine(index, view.phrase_vectors, view.n_phrases, ctx.vector, floor)
        if ranking.walked is None
        else ranking.walked.node_scores[: view.n_phrases]
    )
    return rank_rules(index, scores, view.node_ids, view.node_names, top_k, domains, live=ctx.live)
