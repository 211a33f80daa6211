"""``dense``: passages by the cosine of their embedding to the query's."""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking


@dataclass(frozen=True)
class Dense:
    name: str = "dense"
    summary: str = "passages by embedding cosine to the query"
    in_eval: bool = True

    def rank(self, ctx: QueryContext) -> Ranking:
        return dense_ranking(ctx)


MODE = Dense()
