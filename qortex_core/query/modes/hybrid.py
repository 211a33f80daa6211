"""``hybrid``: dense and graph scores with equal say (normalised-score fusion).

The ranking also carries the overlap of the dense and graph top-k as a confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query import fusion
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.walk import graph_ranking, no_walk_note, walked


@dataclass(frozen=True)
class Hybrid:
    name: str = "hybrid"
    summary: str = "dense and graph scores fused, with their top-k agreement as confidence"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        note = no_walk_note(ctx)
        if note is not None:
            return dense_ranking(ctx, note)
        ppr = walked(ctx).node_scores[ctx.view.n_phrases :]  # (n_passages,)
        final, confidence = fusion.fuse(ctx.dense, ppr, ctx.config.hybrid)
        return graph_ranking(ctx, self.name, final, confidence)


MODE = Hybrid()
