"""``hybrid``: the text side (dense, optionally with BM25) and the graph with equal say.

Normalised-score fusion of min-max text and min-max PPR (weights in
:class:`qortex_core.query.fusion.FusionConfig`); the text side is min-max dense, or, with
``fulltext.hybrid_weight`` w > 0, (1 - w) x min-max dense + w x min-max BM25. The ranking
also carries the overlap of the text and graph top-k as a confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query import fusion
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.modes.walk import graph_ranking, no_walk_note, walked
from qortex_core.query.scoring import blend_text


def text_scores(ctx: QueryContext) -> tuple[np.ndarray, np.ndarray | None]:
    """(n_passages,) hybrid's text side, and the BM25 scores when they took part."""
    weight = ctx.config.fulltext.hybrid_weight
    bm25 = ctx.lexical() if weight > 0 else None
    if bm25 is None or bm25.max() <= 0:
        return ctx.dense, None
    return blend_text(ctx.dense, bm25, weight), bm25


@dataclass(frozen=True)
class Hybrid:
    name: str = "hybrid"
    summary: str = "dense (+ BM25) and graph scores fused, with their top-k agreement"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        note = no_walk_note(ctx)
        if note is not None:
            return dense_ranking(ctx, note)
        ppr = walked(ctx).node_scores[ctx.view.n_phrases :]  # (n_passages,)
        text, bm25 = text_scores(ctx)
        final, confidence = fusion.fuse(text, ppr, ctx.config.hybrid)
        ranking = graph_ranking(ctx, self.name, final, confidence)
        if bm25 is not None:
            ranking.parts["lexical"] = bm25
        return ranking


MODE = Hybrid()
