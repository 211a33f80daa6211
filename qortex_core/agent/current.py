"""Current facts first: a query about a subject ranks that subject's statement of the asked
attribute first, its newest statement of that attribute among near ties, and every hit says when
it was true.

A dense vector of "Where does Goran Lindqvist live now?" is mostly the name: every statement
about Goran ranks alike, and which one wins is noise. When some hits are about a subject the
query names (:func:`~qortex_core.memory.statements.same_subject` on the words of the query),
those hits move up by ``subject`` and are ordered by how well they answer the asked attribute:
the query's predicate (the subject replaced by "someone") against the hit's predicate, its
masked predicate ("someone lives in X") and its values ("Lyon": what kind of answer it gives).
Then the newest statement of the same attribute as the best one takes its place: a statement
that fits the question nearly as well and whose values are of the best one's kind (their frames
held a common value, :meth:`~qortex_core.memory.supersede.SubjectIndex.kin`), or, with no
values on either side, whose attribute score clears ``kin_score``. So a statement the store could
not link to its predecessor at write time still loses to its successor. Queries that name no
subject of a hit are left as they are (no extra embedding).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace

import numpy as np

from qortex_core.memory.records import DOC_PREFIX
from qortex_core.memory.statements import is_statement, parse

_MAX_CHAIN = 32  # statements of one chain a hit inherits its fit from
_WORD = re.compile(r"[^\W\d_][\w\-]*", re.UNICODE)


@dataclass(frozen=True)
class CurrentConfig:
    """Attributes:
    subject: added to the relevance of a hit about a subject the query names.
    relevance: weight of the retriever's relevance among those hits.
    masked, values: weights of the query's fit to the masked predicate and to the values,
        beside the predicate's (the fit is their weighted mean).
    margin: a newer statement of the best one's attribute fitting this much less still wins.
    kin_score: the attribute score two value-less statements need to count as one attribute.
    depth: hits asked of the retriever per wanted hit (the reranked pool).
    """

    subject: float = 1.0
    relevance: float = 0.0
    masked: float = 0.5
    values: float = 0.5
    margin: float = 0.15
    kin_score: float = 0.5
    depth: int = 3


def _named(query: str, hit_text: str) -> bool:
    """The hit is a statement (:func:`~qortex_core.memory.statements.is_statement`) and the
    query names its subject (every word of it)."""
    if not is_statement(hit_text):
        return False
    subject = parse(hit_text).subject
    words = {w.lower().removesuffix("'s") for w in _WORD.findall(query)}
    return bool(subject) and subject <= words


def _fit(facet, asked, config: CurrentConfig) -> float:
    """How well a statement answers the asked attribute: the weighted mean of the cosines of
    the query's predicate to its predicate, masked predicate and values (0 without values)."""
    total = float(facet.predicate @ asked) + config.masked * float(facet.masked @ asked)
    if facet.values is not None:
        total += config.values * float(facet.values @ asked)
    return total / (1.0 + config.masked + config.values)


def _earlier_texts(rid: str | None, tier) -> list[str]:
    """Texts of the records ``rid`` superseded, directly or through others (oldest last)."""
    if rid is None or tier is None:
        return []
    timeline = tier.timelines.of(tier.state)
    out, todo, seen = [], [rid], {rid}
    while todo and len(seen) < _MAX_CHAIN:
        for older in timeline.predecessors(todo.pop()):
            if older not in seen and older in tier.state.current:
                seen.add(older)
                todo.append(older)
                out.append(tier.state.current[older]["text"])
    return out


def rerank(result, query: str, supersession, tier, embedder, top_k: int,
           config: CurrentConfig = CurrentConfig()):  # fmt: skip
    """``result`` with its passages reordered as the module docstring says, cut to ``top_k``.
    ``supersession``: a :class:`~qortex_core.memory.supersede.Supersession` (facets and the
    subject index); ``tier``: the fresh tier whose state and timeline the hits come from (None:
    no timeline, no index). A hit fits the question as well as the best of the statements it
    superseded: the attribute is its chain's, however the newest statement phrased it."""
    from qortex_core.query.fresh_tier import relevance_of

    hits = list(result.passages)
    named = [_named(query, h.text) for h in hits]
    if not any(named):
        return replace(result, passages=hits[:top_k])
    asked = parse(query)
    asked_vec = embedder.embed([asked.predicate])[0]  # (d,)
    mine = [i for i, n in enumerate(named) if n]
    facets = dict(zip(mine, supersession.facets.facets([hits[i].text for i in mine])))
    fits = {}
    for i, facet in facets.items():
        earlier = supersession.facets.facets(_earlier_texts(record_of(hits[i], tier), tier))
        fits[i] = max(_fit(f, asked_vec, config) for f in [facet, *earlier])
    state = tier.state if tier is not None else None
    scores = [
        config.relevance * relevance_of(h) + (config.subject + fits[i] if i in fits else 0.0)
        for i, h in enumerate(hits)
    ]
    order = sorted(range(len(hits)), key=lambda i: -scores[i])
    best = order[0]
    if best in facets:
        newer = _successor(best, hits, facets, fits, supersession, state, config)
        if newer is not None:
            order.remove(newer)
            order.insert(0, newer)
    return replace(result, passages=[hits[i] for i in order][:top_k])


def _when(hit) -> str:
    return hit.valid_from or hit.time or ""


def _successor(best: int, hits, facets, fits, supersession, state, config) -> int | None:
    """The newest hit that states the attribute of hit ``best`` and fits the question within
    ``margin`` of it (None: none newer)."""
    from qortex_core.memory.supersede import attribute_score

    index = getattr(supersession, "index", None)
    if index is not None and state is not None:
        index.sync(state)
    top = facets[best]
    found = None
    for i, facet in facets.items():
        if _when(hits[i]) <= _when(hits[found if found is not None else best]):
            continue
        if fits[i] < fits[best] - config.margin:
            continue
        a, b = facet.statement, top.statement
        if a.phrases and b.phrases:
            same = index is not None and index.kin(a, b)
        elif not a.phrases and not b.phrases:
            same = attribute_score(facet, top, hits[i].text) >= config.kin_score
        else:
            same = False
        if same:
            found = i
    return found


def by_recency(result, profile, home, as_of: str | None = None):
    """``result`` reordered by its scoring profile's recency (unchanged when the profile gives
    recency no weight): each hit's ``relevance x w_relevance + recency x w_recency``, where
    recency halves every ``recency_half_life_days`` of event time before the moment asked
    (``as_of``, else the newest event time among the hits: a memory of last year's events
    still tells its newest from its oldest). Hits without a time have recency 0."""
    from qortex_core.query.fresh_tier import relevance_of
    from qortex_core.query.profiles import get_profile, recency
    from qortex_core.storage.times import to_epoch

    prof = get_profile(profile, home)
    hits = list(result.passages)
    if prof.recency <= 0 or len(hits) < 2:
        return result
    epochs = np.array([to_epoch(_when(h) or None) for h in hits], dtype=np.float64)  # (n,)
    known = epochs[np.isfinite(epochs)]
    if not known.size:
        return result
    top = to_epoch(as_of) if as_of else float(known.max())
    at = dt.datetime.fromtimestamp(top, dt.timezone.utc)
    fresh = recency(epochs, len(hits), prof.recency_half_life_days, at)  # (n,)
    score = [prof.relevance * relevance_of(h) + prof.recency * float(r)
             for h, r in zip(hits, fresh)]  # fmt: skip
    order = sorted(range(len(hits)), key=lambda i: -score[i])
    return replace(result, passages=[hits[i] for i in order])


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


def current_query(
    retriever, query: str, top_k: int, moment: tuple[str | None, bool], ask, profile=None
):
    """A retriever's answer as of ``moment`` (as_of, include_superseded): ``ask(depth, as_of)``
    runs the query for ``depth`` hits (``as_of`` bounds the event time); the hits carry their
    validity, are reranked (:func:`rerank`) down to ``top_k`` and ordered by the ``profile``'s
    recency (:func:`by_recency`)."""
    from qortex_core.memory.supersede import Supersession
    from qortex_core.query.validation import MAX_TOP_K, validate_top_k

    tier = retriever.fresh
    validate_top_k(top_k)  # before the pool is widened to a valid depth
    depth = min(top_k * CurrentConfig().depth, MAX_TOP_K)
    if tier is None:
        return ask(top_k, moment[0])
    with tier.at(*moment):
        result = with_validity(ask(depth, moment[0]), tier)
    if tier.supersession is None:  # kept with the tier: a derived text is embedded once
        tier.supersession = Supersession(retriever.embedder)
    result = rerank(result, query, tier.supersession, tier, retriever.embedder, top_k)
    return by_recency(result, profile, retriever.home, moment[0])
