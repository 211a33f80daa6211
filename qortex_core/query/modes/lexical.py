"""``lexical``: passages by BM25 over their text (LanceDB's full-text index).

Passages the query matches rank first, by BM25; the rest follow by dense cosine, so a
query with few matching words still fills ``top_k``. A snapshot without a full-text
index (built before the channel existed) is answered densely, with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking

NO_INDEX = "the snapshot has no full-text index (re-run ingest): dense retrieval"


def lexical_order(bm25: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """(n,) BM25 matches above every non-match (cosine <= 1 < 2 + BM25), the rest by cosine."""
    return np.where(bm25 > 0, 2.0 + bm25, dense).astype(np.float32)


@dataclass(frozen=True)
class Lexical:
    name: str = "lexical"
    summary: str = "passages by BM25 over their words (full-text index), then by dense cosine"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        bm25 = ctx.lexical()
        if bm25 is None:
            return dense_ranking(ctx, NO_INDEX)
        return Ranking(
            self.name, lexical_order(bm25, ctx.dense), {"lexical": bm25, "dense": ctx.dense}
        )


MODE = Lexical()
