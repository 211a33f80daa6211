"""Current facts first: a query about a subject ranks that subject's statement of the asked
attribute first, the newest one of its kind among near ties, and every hit says when it was true.

A dense vector of "Where does Goran Lindqvist live now?" is mostly the name: every statement
about Goran ranks alike, and which one wins is noise. When some hits are about a subject the
query names (:func:`~qortex_core.memory.statements.same_subject` on the words of the query),
those hits move up by ``subject`` and are ordered by the cosine of their predicate to the query's
(the subject replaced by "someone" on both sides: the attribute asked against the attribute
stated); among those within ``margin`` of the best, the latest event time wins (a statement the
store could not link to its predecessor still loses to it). Queries that name no subject of a
hit are left as they are (no extra embedding).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from qortex_core.memory.records import DOC_PREFIX
from qortex_core.memory.statements import parse

_WORD = re.compile(r"[^\W\d_][\w\-]*", re.UNICODE)


@dataclass(frozen=True)
class CurrentConfig:
    """Attributes:
    subject: added to the relevance of a hit about a subject the query names.
    attribute: weight of the cosine between the query's and the hit's predicates.
    margin: hits of a named subject this close to the best count as ties (newest first).
    depth: hits asked of the retriever per wanted hit (the reranked pool).
    """

    subject: float = 1.0
    attribute: float = 1.0
    margin: float = 0.05
    depth: int = 3


def _named(query: str, hit_text: str) -> bool:
    """The query names the hit's subject (every word of it)."""
    subject = parse(hit_text).subject
    words = {w.lower().removesuffix("'s") for w in _WORD.findall(query)}
    return bool(subject) and subject <= words


def rerank(
    result, query: str, facets, embedder, top_k: int, config: CurrentConfig = CurrentConfig()
):
    """``result`` with its passages reordered as the module docstring says, cut to ``top_k``."""
    from qortex_core.memory.tier import relevance_of

    hits = list(result.passages)
    named = [_named(query, h.text) for h in hits]
    if not any(named):
        return replace(result, passages=hits[:top_k])
    asked = embedder.embed([parse(query).predicate])[0]  # (d,)
    said = facets.facets([h.text for h, n in zip(hits, named) if n])
    fit = iter(float(f.predicate @ asked) for f in said)
    scores = [
        relevance_of(h) + (config.subject + config.attribute * next(fit) if n else 0.0)
        for h, n in zip(hits, named)
    ]
    order = sorted(range(len(hits)), key=lambda i: -scores[i])
    best = scores[order[0]]
    ties = [i for i in order if named[i] and scores[i] >= best - config.margin]
    if len(ties) > 1:
        newest = max(ties, key=lambda i: (hits[i].valid_from or hits[i].time or "", scores[i]))
        order.remove(newest)
        order.insert(0, newest)
    return replace(result, passages=[hits[i] for i in order][:top_k])


def record_of(hit, tier) -> str | None:
    """The written record a hit stands for (a fresh hit's id, a memory passage's document)."""
    if hit.id.startswith("m_"):
        return hit.id
    doc = tier.passage_docs().get(hit.id, "") if tier is not None else ""
    return doc[len(DOC_PREFIX) :] if doc.startswith(DOC_PREFIX) else None


def with_validity(result, tier):
    """Every hit with ``valid_from``, ``valid_until`` and ``superseded_by`` (a file passage:
    true from its event time)."""
    if tier is None:
        return result
    timeline = tier.timelines.of(tier.state)
    out = []
    for hit in result.passages:
        rid = record_of(hit, tier)
        if rid is None:
            out.append(replace(hit, valid_from=hit.time))
            continue
        v = timeline.validity(rid)
        out.append(replace(hit, valid_from=v.valid_from, valid_until=v.valid_until,
                           superseded_by=v.superseded_by))  # fmt: skip
    return replace(result, passages=out)


def current_query(retriever, query: str, top_k: int, moment: tuple[str | None, bool], ask):
    """A retriever's answer as of ``moment`` (as_of, include_superseded): ``ask(depth, as_of)``
    runs the query for ``depth`` hits (``as_of`` bounds the event time); the hits carry their
    validity and are reranked (:func:`rerank`) down to ``top_k``."""
    from qortex_core.memory.facets import FacetStore
    from qortex_core.query.validation import MAX_TOP_K, validate_top_k

    tier = retriever.fresh
    validate_top_k(top_k)  # before the pool is widened to a valid depth
    depth = min(top_k * CurrentConfig().depth, MAX_TOP_K)
    if tier is None:
        return ask(top_k, moment[0])
    with tier.at(*moment):
        result = with_validity(ask(depth, moment[0]), tier)
    if tier.facets is None:  # kept with the tier: a derived text is embedded once a process
        tier.facets = FacetStore(retriever.embedder)
    return rerank(result, query, tier.facets, retriever.embedder, top_k)
