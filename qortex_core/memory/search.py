"""Search for :class:`~qortex_core.memory.api.Memory`: the retriever when a snapshot exists,
else the fresh tier alone (a home that has only written memories, not yet consolidated)."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from qortex_core.memory.tier import FreshTier
from qortex_core.query import relevance
from qortex_core.query.config import RetrievalConfig


def search_memory(
    mem,
    query: str,
    top_k: int,
    mode: str,
    window: tuple[str | None, str | None],
    domains: list[str] | None,
    profile: str | None,
    min_relevance: float | None,
):
    """One query over the snapshot (if any) and the fresh tier; see :meth:`Memory.search`.

    Without a snapshot the fresh tier answers alone, with the same relevance calibration and
    abstention as the retriever (``no_answer`` when no record reaches ``min_relevance``).
    """
    from qortex_core.query.retriever import QueryResult, validate

    retriever = mem.retriever()
    if retriever is not None:
        return retriever.query(
            query, top_k, mode, domains, profile,
            since=window[0], until=window[1], min_relevance=min_relevance,
        )  # fmt: skip
    clean = validate(query, top_k, mode)
    config = RetrievalConfig()
    minimum = relevance.threshold(min_relevance, config.min_relevance)
    tier = FreshTier(mem.store, _no_passages(), state=mem.state)
    hits = tier.search(mem.embedder.embed([clean])[0], clean, top_k, domains, window)
    empty = QueryResult(clean, "dense", "", [], fallback="no snapshot yet: fresh memories only")
    result = tier.merge(empty, hits, top_k, relevance=relevance.of_fresh(config.relevance))
    best = max((h.relevance or 0.0 for h in result.passages), default=0.0)
    if minimum > 0 and best < minimum:
        note = relevance.abstention_note(best, minimum)
        return replace(result, passages=[], no_answer=True, fallback=note)
    return result


def _no_passages() -> pa.Table:
    return pa.table({k: pa.array([], pa.string()) for k in ("id", "doc_id", "title", "text")})
