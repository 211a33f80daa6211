"""Search for :class:`~qortex_core.memory.api.Memory`: the retriever when a snapshot exists,
else the fresh tier alone (a home that has only written memories, not yet consolidated)."""

from __future__ import annotations

import pyarrow as pa

from qortex_core.errors import QueryError
from qortex_core.memory.tier import FreshTier, relevance_of


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
    """One query over the snapshot (if any) and the fresh tier; see :meth:`Memory.search`."""
    from qortex_core.query.retriever import QueryResult, validate

    if min_relevance is not None and not (
        isinstance(min_relevance, (int, float)) and 0.0 <= min_relevance <= 1.0
    ):
        raise QueryError(f"min_relevance must be a number in [0, 1], got {min_relevance!r}")
    retriever = mem.retriever()
    if retriever is not None:
        result = retriever.query(
            query, top_k, mode, domains, profile, since=window[0], until=window[1]
        )
    else:
        clean = validate(query, top_k, mode)
        tier = FreshTier(mem.store, _no_passages(), state=mem.state)
        vector = mem.embedder.embed([clean])[0]
        hits = tier.search(vector, clean, top_k, domains, window)
        empty = QueryResult(clean, "dense", "", [], fallback="no snapshot yet: fresh memories only")
        result = tier.merge(empty, hits, top_k)
    if min_relevance is not None:
        from dataclasses import replace

        kept = [h for h in result.passages if relevance_of(h) >= min_relevance]
        result = replace(result, passages=kept)
    return result


def _no_passages() -> pa.Table:
    return pa.table({k: pa.array([], pa.string()) for k in ("id", "doc_id", "title", "text")})
