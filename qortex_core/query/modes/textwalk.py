"""``textwalk``: the best text passages and the linked facts seed the graph walk; text and walk
fused.

The ``text`` score (dense + BM25) picks the ``textwalk.seeds`` best passages; each restarts
the walk with its min-max text score. Beside them, the facts the query links to (the seeding
``hipporag`` walks from) restart it with ``textwalk.fact_weight`` times as much mass in all
(1: as much as the passages). Personalized PageRank spreads that mass through the concepts
those passages and facts contain and, in a conversation, to the neighbouring turns
(:mod:`qortex_core.ingest.sequence`): the reply to the turn the query names, the question
it answers. Final score: text score + ``textwalk.walk_weight`` x min-max PPR.

The text seeds need no extracted fact that names the question's detail; the fact seeds add
what an extractor stated about the conversation (LoCoMo's recorded observations: recall@5
56.1 -> 57.7 on the five conversations, offline facts alone: 60.1 -> 60.2; docs/ablation.md).
On musique_100, where the linked facts carry the bridge, ``hipporag`` stays the better walk,
so ``auto`` takes ``textwalk`` only for a snapshot that is mostly conversation
(``textwalk.route_share``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.modes.lexical import NO_INDEX
from qortex_core.query.ppr.solve import personalized_pagerank
from qortex_core.query.scoring import min_max, top_indices


def text_teleport(
    text: np.ndarray, n_phrases: int, seeds: int, alive: np.ndarray | None = None
) -> np.ndarray:
    """(n_phrases + n_passages,) restart vector: min-max ``text`` on its ``seeds`` best passages.

    Args:
        text: (n_passages,) the text score.
        alive: (n_passages,) False for hidden (forgotten) passages, which never seed.
    """
    teleport = np.zeros(n_phrases + text.size, np.float32)
    if alive is None:
        best = top_indices(text, seeds)  # (seeds,)
    else:
        best = top_indices(np.where(alive, text, -np.inf), seeds)
        best = best[alive[best]]
    teleport[n_phrases + best] = min_max(text)[best] + np.float32(1e-6)  # the worst seed too
    return teleport


def with_fact_seeds(teleport: np.ndarray, facts: np.ndarray | None, weight: float) -> np.ndarray:
    """(n_nodes,) ``teleport`` and the linked facts' restart vector, each summing to 1, added
    with ``weight`` on the facts' (``teleport`` alone when no fact was linked)."""
    if facts is None or float(facts.sum()) <= 0:
        return teleport
    total = float(teleport.sum())
    out = teleport / total if total > 0 else np.zeros_like(teleport)
    return (out + np.float32(weight) * facts / np.float32(facts.sum())).astype(np.float32)


@dataclass(frozen=True)
class TextWalk:
    name: str = "textwalk"
    summary: str = "the best dense + BM25 passages seed the graph walk; text and walk fused"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        bm25 = ctx.lexical()
        if bm25 is None:
            return dense_ranking(ctx, NO_INDEX)
        text = ctx.text_scores()  # (n_passages,)
        cfg = ctx.config.textwalk
        alive = None if ctx.live is None else ctx.live.passages
        teleport = text_teleport(text, ctx.view.n_phrases, cfg.seeds, alive)
        if cfg.fact_weight > 0 and ctx.view.has_facts:
            teleport = with_fact_seeds(teleport, ctx.seeding().teleport, cfg.fact_weight)
        ppr = personalized_pagerank(ctx.walk, teleport, ctx.config.ppr)[ctx.view.n_phrases :]
        final = text + np.float32(cfg.walk_weight) * min_max(ppr)  # (n_passages,)
        parts = {"text": text, "ppr": ppr, "dense": ctx.dense, "lexical": bm25}
        return Ranking(self.name, final.astype(np.float32), parts)


MODE = TextWalk()
