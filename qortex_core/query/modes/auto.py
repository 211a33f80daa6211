"""``auto`` (the default): routes each query to another registered mode and says why.

The policy (:func:`qortex_core.query.fusion.route`) reads how well the query links to
the graph: a strong fact -> ``hipporag``; a weak one -> ``text`` (dense + BM25), or
``hybrid`` when the snapshot has no full-text index or ``fulltext.route_text`` is off;
none -> ``text``, else ``dense``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qortex_core.query import fusion, modes
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.walk import NO_FACTS

TEXT = "text"


@dataclass(frozen=True)
class Auto:
    name: str = "auto"
    summary: str = "routes to hipporag, text or dense by how well the query links to the graph"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        text = ctx.config.fulltext.route_text and ctx.lexical() is not None
        if not ctx.view.has_facts:
            if text:
                return replace(modes.get(TEXT).rank(ctx), route=f"auto: {NO_FACTS} + BM25")
            return dense_ranking(ctx, NO_FACTS)
        seeding = ctx.seeding()
        weak, none = (TEXT, TEXT) if text else ("hybrid", "dense")
        name, why = fusion.route(seeding.best_cosine, ctx.config.hybrid, weak, none)
        ranking = modes.get(name).rank(ctx)
        note = ranking.note or (None if name == TEXT else seeding.note)
        return replace(ranking, route=why, note=note)


MODE = Auto()
