"""Search for :class:`~qortex_core.agent.api.Memory`: the retriever when a snapshot exists,
else the fresh tier alone (a home that has only written memories, not yet consolidated)."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from qortex_core.agent.current import CurrentConfig, by_recency, rerank, with_validity
from qortex_core.memory.records import parse_time
from qortex_core.query import relevance
from qortex_core.query.config import RetrievalConfig
from qortex_core.query.filters import parse_filters
from qortex_core.query.fresh_tier import FreshTier


def search_memory(
    mem,
    query: str,
    top_k: int,
    mode: str,
    window: tuple,
    domains,
    profile: str | None,
    min_relevance: float | None,
    moment: tuple = (None, False),
    filters: dict | None = None,
    asked_at: object = None,
):
    """One query over the snapshot (if any) and the fresh tier; see :meth:`Memory.search`.

    Without a snapshot the fresh tier answers alone, with the same relevance calibration and
    abstention as the retriever (``no_answer`` when no record reaches ``min_relevance``).
    ``moment``: (as_of, include_superseded), see :meth:`FreshTier.at`; without an as_of, the
    time the query names, relative to ``asked_at`` (:func:`~qortex_core.memory.asked_time.
    moment_of`).
    """
    from qortex_core.memory.asked_time import moment_of
    from qortex_core.query.retriever import validate
    from qortex_core.query.validation import MAX_TOP_K

    clean = validate(query, top_k, mode)  # before anything loads
    flt = parse_filters(filters)
    window = (parse_time(window[0], "since"), parse_time(window[1], "until", upper=True))
    domains = [domains] if isinstance(domains, str) else (list(domains) if domains else None)
    as_of = parse_time(moment[0], "as_of") or moment_of(query, parse_time(asked_at, "asked_at"))
    moment = (as_of, bool(moment[1]))
    depth = min(top_k * CurrentConfig().depth, MAX_TOP_K)
    until = _earlier(window[1], moment[0])
    retriever = mem.retriever()
    if retriever is not None:
        retriever.fresh.timelines = mem.supersession.timelines  # one fold per state change
        with retriever.fresh.at(*moment):
            result = retriever.query(
                query, depth, mode, domains, profile,
                since=window[0], until=until, min_relevance=min_relevance, filters=flt,
            )  # fmt: skip
        tier = retriever.fresh
    else:
        tier = FreshTier(mem.store, _no_passages(), state=mem.state)
        tier.timelines = mem.supersession.timelines
        with tier.at(*moment):
            result = _fresh_only(mem, tier, clean, depth, mode, (window[0], until), domains,
                                 min_relevance, flt)  # fmt: skip
    result = rerank(with_validity(result, tier), query, mem.supersession, tier, mem.embedder, top_k)
    return by_recency(result, profile, mem.home, moment[0])


def _earlier(a: str | None, b: str | None) -> str | None:
    """The earlier of two optional ISO times."""
    return b if a is None else a if b is None else min(a, b)


def _fresh_only(mem, tier, clean, top_k, mode, window, domains, min_relevance, flt):
    """The fresh tier alone (a home with no snapshot yet); ``clean``: the validated query."""
    from qortex_core.query.retriever import QueryResult

    config = RetrievalConfig()
    minimum = relevance.threshold(min_relevance, config.min_relevance)
    hits = tier.search(mem.embedder.embed([clean])[0], clean, top_k, domains, window, flt)
    empty = QueryResult(clean, "dense", "", [], fallback="no snapshot yet: fresh memories only")
    result = tier.merge(empty, hits, top_k, relevance=relevance.of_fresh(config.relevance))
    best = max((h.relevance or 0.0 for h in result.passages), default=0.0)
    if minimum > 0 and best < minimum:
        note = relevance.abstention_note(best, minimum)
        return replace(result, passages=[], no_answer=True, fallback=note)
    return result


def _no_passages() -> pa.Table:
    return pa.table({k: pa.array([], pa.string()) for k in ("id", "doc_id", "title", "text")})
