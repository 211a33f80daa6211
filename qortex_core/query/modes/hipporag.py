"""``hipporag``: Personalized PageRank over the concept graph, seeded by linked facts.

Final score: min-max PPR + ``dense_fusion`` x min-max dense; the best dense passage first.
Without a linked fact the query is answered densely (HippoRAG 2's fallback).
"""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.seeding import add_dense_term
from qortex_core.query.walk import graph_ranking, no_walk_note, walked


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
        return graph_ranking(ctx, self.name, final)


MODE = HippoRAG()
