"""``text``: the two text channels fused, no graph: dense cosine and BM25.

Normalised-score fusion: (1 - w) x min-max dense + w x min-max BM25, w =
``fulltext.text_weight`` (0.5). Min-max rather than reciprocal-rank fusion (k = 60): RRF
throws away how far apart the scores are; measured while choosing, it ranked lower on the five
LoCoMo conversations (R@2 / R@5 37.1 / 51.5 against 46.2 / 58.3) and on musique_100 (45.6 /
57.8 against 45.9 / 58.8). BM25 scores only its best ``fulltext.candidates`` passages (the
rest score 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.modes.lexical import NO_INDEX


@dataclass(frozen=True)
class Text:
    name: str = "text"
    summary: str = "dense cosine and BM25 fused (normalised scores), no graph"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        bm25 = ctx.lexical()
        if bm25 is None:
            return dense_ranking(ctx, NO_INDEX)
        return Ranking(self.name, ctx.text_scores(), {"dense": ctx.dense, "lexical": bm25})


MODE = Text()
