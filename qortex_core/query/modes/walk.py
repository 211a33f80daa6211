"""The graph walk shared by the graph modes: PPR from the seeding, then the best dense
passage first, or with ``fulltext.text_first`` the best text (dense + BM25) passage first and
the best dense one second.

:func:`no_walk_note` says when a query cannot walk (the mode then ranks densely);
:func:`walked` runs Personalized PageRank once per query; :func:`graph_ranking`
turns a final passage score into a :class:`~qortex_core.query.modes.base.Ranking`.
"""

from __future__ import annotations

import numpy as np

from qortex_core.query.modes.base import QueryContext, Ranking, Walked
from qortex_core.query.ppr.solve import personalized_pagerank
from qortex_core.query.scoring import dense_first

NO_FACTS = "graph has no facts: dense retrieval"


def no_walk_note(ctx: QueryContext) -> str | None:
    """Why this query cannot walk the graph (no facts, no linked fact); None: it can."""
    if not ctx.view.has_facts:
        return NO_FACTS
    seeding = ctx.seeding()
    return seeding.note if seeding.teleport is None else None


def walked(ctx: QueryContext) -> Walked:
    """PPR from the query's teleport vector (computed once per query)."""
    if "walk" not in ctx.extras:
        seeding = ctx.seeding()
        assert seeding.teleport is not None, "walked() needs a seeded query: see no_walk_note"
        scores = personalized_pagerank(
            ctx.walk, seeding.teleport, ctx.config.ppr, seeding.support
        )  # (n_nodes,)
        ctx.extras["walk"] = Walked(scores, seeding.teleport, seeding)
    return ctx.extras["walk"]


def _total(w: Walked, n: int) -> float:
    """The teleport's total mass; the seeding's own teleport is zero on the phrases it did not
    seed, so only those and the passages are added."""
    if w.teleport is not w.seeding.teleport:
        return float(w.teleport.sum())
    phrases = w.teleport[w.seeding.seeded_phrases()].sum(dtype=np.float64)
    return float(phrases + w.teleport[n:].sum(dtype=np.float64))


def graph_ranking(
    ctx: QueryContext, mode: str, final: np.ndarray, confidence: float | None = None
) -> Ranking:
    """The ranking of a walked query: ``final`` with the best dense passage first (config).

    Args:
        final: (n_passages,) the mode's fused passage score.
    """
    w = walked(ctx)
    n = ctx.view.n_phrases
    if ctx.config.dense_first:  # learned feedback vetoes it: a passage judged down stays put
        vetoed = ctx.preference() < 0.5
        final = dense_first(final, ctx.dense, ctx.allowed, vetoed)
        if ctx.config.fulltext.text_first:  # the best text passage above it, dense's second
            final = dense_first(final, ctx.text_scores(), ctx.allowed, vetoed)
    parts = {
        "ppr": w.node_scores[n:],
        "dense": ctx.dense,
        "seed": w.teleport[n:] / max(_total(w, n), 1e-12),
    }
    return Ranking(mode, final, parts, walked=w, note=w.seeding.note, confidence=confidence)
