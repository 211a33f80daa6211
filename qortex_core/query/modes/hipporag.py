"""``hipporag``: Personalized PageRank over the concept graph, seeded by linked facts.

Final score: min-max PPR + ``dense_fusion`` x min-max dense (+ ``fulltext.final_weight`` x
min-max BM25 over that, when set); the best dense passage first.
Without a linked fact the query is answered densely (HippoRAG 2's fallback).
"""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.modes.walk import graph_ranking, no_walk_note, walked
from qortex_core.query.scoring import add_dense_term, min_max


@dataclass(frozen=True)
class HippoRAG:
    name: str = "hipporag"
    summary: str = "graph walk (PPR) from the facts and concepts the query links to"
    in_eval: bool = True

    def rank(self, ctx: QueryContext) -> Ranking:
        note = no_walk_note(ctx)
        if note is not None:
            return dense_ranking(ctx, note)
        ppr = walked(ctx).node_scores[ctx.view.n_phrases :]  # (n_passages,)
        final = add_dense_term(ppr, ctx.dense, ctx.config.dense_fusion)
        weight = ctx.config.fulltext.final_weight
        bm25 = ctx.lexical() if weight > 0 else None
        if bm25 is not None and bm25.max() > 0:  # (n_passages,) + BM25 term
            final = min_max(final) + weight * min_max(bm25)
        ranking = graph_ranking(ctx, self.name, final)
        if bm25 is not None:
            ranking.parts["lexical"] = bm25
        return ranking


MODE = HippoRAG()
