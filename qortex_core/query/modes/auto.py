"""``auto`` (the default): routes each query to another registered mode and says why.

The policy (:func:`route`) reads how well the query links to
the graph: a strong fact -> ``hipporag``; a weak one -> ``text`` (dense + BM25), or
``hybrid`` when the snapshot has no full-text index or ``fulltext.route_text`` is off;
none -> ``text``, else ``dense``. A snapshot that is mostly conversation (at least
``textwalk.route_share`` of its passages are turns linked to their neighbours) is answered by
``textwalk`` (the best text passages seed the walk) whatever the query links to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qortex_core.query import modes
from qortex_core.query.fusion import FusionConfig
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.modes.walk import NO_FACTS

TEXT = "text"
TEXTWALK = "textwalk"


def conversational(ctx: QueryContext) -> bool:
    """Whether ``auto`` answers with ``textwalk``: a BM25 index and a mostly-conversation
    snapshot."""
    share = ctx.view.sequenced
    return share > 0 and share >= ctx.config.textwalk.route_share and ctx.lexical() is not None


_HOW = {
    "dense": "dense retrieval",
    "hybrid": "dense + graph fused",
    "text": "dense + BM25 fused",
    "hipporag": "graph walk",
}


def route(
    best_fact_cosine: float | None,
    config: FusionConfig = FusionConfig(),
    weak: str = "hybrid",
    none: str = "dense",
) -> tuple[str, str]:
    """The mode ``auto`` takes and why: the graph walk when the best linked fact reaches
    ``graph_threshold``, ``weak`` below it, ``none`` when no fact links."""
    if best_fact_cosine is None:
        return none, f"auto: no seed fact linked, {_HOW.get(none, none)}"
    if best_fact_cosine >= config.graph_threshold:
        at = f"{best_fact_cosine:.2f} >= {config.graph_threshold}"
        return "hipporag", f"auto: best fact cosine {at}, graph walk"
    at = f"{best_fact_cosine:.2f} < {config.graph_threshold}"
    return weak, f"auto: best fact cosine {at}, {_HOW.get(weak, weak)}"


@dataclass(frozen=True)
class Auto:
    name: str = "auto"
    summary: str = "routes to hipporag, text, textwalk or dense by the query and the corpus"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        text = ctx.config.fulltext.route_text and ctx.lexical() is not None
        if text and conversational(ctx):
            why = f"auto: {ctx.view.sequenced:.0%} of passages are conversation turns, text + walk"
            return replace(modes.get(TEXTWALK).rank(ctx), route=why)
        if not ctx.view.has_facts:
            if text:
                return replace(modes.get(TEXT).rank(ctx), route=f"auto: {NO_FACTS} + BM25")
            return dense_ranking(ctx, NO_FACTS)
        seeding = ctx.seeding()
        weak, none = (TEXT, TEXT) if text else ("hybrid", "dense")
        name, why = route(seeding.best_cosine, ctx.config.hybrid, weak, none)
        ranking = modes.get(name).rank(ctx)
        note = ranking.note or (None if name == TEXT else seeding.note)
        return replace(ranking, route=why, note=note)


MODE = Auto()
