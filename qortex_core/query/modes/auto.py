"""``auto`` (the default): routes each query to another registered mode and says why.

The policy (:func:`qortex_core.query.fusion.route`) reads how well the query links to
the graph: a strong fact -> ``hipporag``; a weak one -> ``text`` (dense + BM25), or
``hybrid`` when the snapshot has no full-text index or ``fulltext.route_text`` is off;
none -> ``text``, else ``dense``. A snapshot that is mostly conversation (at least
``textwalk.route_share`` of its passages are turns linked to their neighbours) is answered by
``textwalk`` (the best text passages seed the walk) whatever the query links to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qortex_core.query import fusion, modes
from qortex_core.query.modes.base import QueryContext, Ranking, dense_ranking
from qortex_core.query.walk import NO_FACTS

TEXT = "text"
TEXTWALK = "textwalk"


def conversational(ctx: QueryContext) -> bool:
    """Whether ``auto`` answers with ``textwalk``: a BM25 index and a mostly-conversation
    snapshot."""
    share = ctx.view.sequenced
    return share > 0 and share >= ctx.config.textwalk.route_share and ctx.lexical() is not None


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
        name, why = fusion.route(seeding.best_cosine, ctx.config.hybrid, weak, none)
        ranking = modes.get(name).rank(ctx)
        note = ranking.note or (None if name == TEXT else seeding.note)
        return replace(ranking, route=why, note=note)


MODE = Auto()
