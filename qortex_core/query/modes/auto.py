"""``auto`` (the default): routes each query to another registered mode and says why.

The policy (:func:`qortex_core.query.fusion.route`) reads how well the query links to
the graph: a strong fact -> ``hipporag``, a weak one -> ``hybrid``, none -> ``dense``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qortex_core.query import fusion, modes
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.walk import NO_FACTS


@dataclass(frozen=True)
class Auto:
    name: str = "auto"
    summary: str = "routes to hipporag, hybrid or dense by how well the query links to the graph"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        if not ctx.view.has_facts:
            return dense_ranking(ctx, NO_FACTS)
        seeding = ctx.seeding()
        name, why = fusion.route(seeding.best_cosine, ctx.config.hybrid)
        ranking = modes.get(name).rank(ctx)
        return replace(ranking, route=why, note=ranking.note or seeding.note)


MODE = Auto()
