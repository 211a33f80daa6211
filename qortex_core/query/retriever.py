"""Retrieval: HippoRAG 2 seeding, PPR over the snapshot graph, ranked and explained results.

:class:`Retriever` holds one loaded snapshot (:class:`SnapshotView`), the embedder and the
learned memory; a query builds a :class:`~qortex_core.query.modes.QueryContext`, the
registered mode ranks the passages (:mod:`qortex_core.query.modes`), and :mod:`.hits`
assembles the result.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from qortex_core.embed import Embedder, make_embedder
from qortex_core.feedback.events import FeedbackEvent, ResultTrace, now
from qortex_core.feedback.learned import LearnedFeedback, LearnedFeedbackConfig
from qortex_core.memory.fresh import MemoryState
from qortex_core.query import attribution, hits, modes, profiles, relevance
from qortex_core.query.config import RetrievalConfig
from qortex_core.query.embedder_check import check_embedder
from qortex_core.query.filters import MetadataFilter, Only, parse_filters
from qortex_core.query.fresh_tier import FreshTier
from qortex_core.query.lexical import LexicalIndex
from qortex_core.query.ppr.solve import fast_walk
from qortex_core.query.results import ConceptHit, PassageHit, QueryResult, Seed
from qortex_core.query.scoring import cosine
from qortex_core.query.seeding import Seeding
from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.query.validation import (
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    validate,
    validate_domains,
    validate_window,
)
from qortex_core.storage import ids
from qortex_core.storage import snapshot as snap

if TYPE_CHECKING:
    from qortex_core.query.recognition import Recognizer

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "MODES",
    "ConceptHit",
    "PassageHit",
    "QueryResult",
    "RetrievalConfig",
    "Retriever",
    "Seed",
    "Seeding",
    "validate",
    "validate_domains",
]

MODES = modes.names()  # the registered modes, ``auto`` (the default) first


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class Retriever:
    """Answers queries from one loaded snapshot.

    ``walk`` (the PPR operator) and ``config`` are plain attributes read at each query, so
    a copy of a retriever can swap them (``qortex bench query`` does).
    """

    warning: str | None = None  # set by :meth:`open` when it fell back to an older snapshot

    def __init__(
        self,
        snapshot: snap.Snapshot,
        embedder: Embedder,
        config: RetrievalConfig = RetrievalConfig(),
        store=None,
        tenant: str = "default",
        memory: LearnedFeedbackConfig = LearnedFeedbackConfig(),
        home: str | Path | None = None,
        recognizer: Recognizer | None = None,
        fresh: FreshTier | None = None,
    ) -> None:
        self.snapshot, self.embedder, self.config = snapshot, embedder, config
        self.fresh = fresh  # agent memories: hides forgotten passages, adds unconsolidated ones
        self.recognizer = recognizer  # optional LLM recognition filter over the linked facts
        self.view = SnapshotView.of(snapshot)
        self.recency = profiles.Recency(self.view.passage_times, self.view.n_passages)
        background = np.zeros(self.view.adjacency.shape[0], np.float32)
        background[self.view.n_phrases :] = 1.0  # every teleport holds dense mass on passages
        # symmetric: CG on the mmap'd arrays, no copy; with the snapshot's degrees the
        # adjacency is not summed or checked at open (its pages map in as queries reach them)
        self.walk = fast_walk(self.view.adjacency, background=background, degree=self.view.degree)
        self.home, self.tenant = home, tenant
        phrase_ids = self.view.node_ids[: self.view.n_phrases]
        self.memory = LearnedFeedback(
            store, phrase_ids, self.view.passage_phrases(), tenant, memory
        )
        manifest_path = snapshot.path / "manifest.json" if snapshot.path else None
        self.lexical = LexicalIndex.open(
            getattr(store, "db", None), self.view, snapshot.manifest, manifest_path
        )  # the snapshot's BM25 index (None: store-less or built before the channel)
        # a conversation's question about the wrong participant answers no_answer
        self.attribution = attribution.Checker(self.view, lambda s: self.embedder.embed([s])[0])

    # the snapshot's arrays, as callers and benchmarks read them
    n_phrases = property(lambda self: self.view.n_phrases)
    adjacency = property(lambda self: self.view.adjacency)
    passage_vectors = property(lambda self: self.view.passage_vectors)
    fact_vectors = property(lambda self: self.view.fact_vectors)
    passages = property(lambda self: self.view.passages)

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        embedder: Embedder | None = None,
        config: RetrievalConfig = RetrievalConfig(),
        version: str | None = None,
        verify: bool = True,
        tenant: str | None = None,
        memory: LearnedFeedbackConfig = LearnedFeedbackConfig(),
        recognizer: Recognizer | None = None,
        state: MemoryState | None = None,
    ) -> "Retriever":
        """Load the latest (or a pinned) snapshot under ``home``, with the home's fresh tier.

        A corrupt latest snapshot is skipped for the newest good one before it; ``warning``
        then says so, and every result of :meth:`query` carries it in ``fallback``.
        ``state``: the memories state of an open :class:`~qortex_core.agent.api.Memory`.
        """
        from qortex_core.storage.store import LanceStore, default_home
        from qortex_core.storage.tenants import tenant_home, validate_tenant

        # a tenant's memory lives in its own home
        home = tenant_home(home or default_home(), tenant)
        loaded, problems = (
            snap.load_latest_good(home, verify=verify)
            if version is None
            else (snap.load(home, version, verify=verify), [])
        )
        embedder = embedder or make_embedder()
        check_embedder(loaded, embedder)  # another model's vectors would rank by noise
        store = LanceStore.open_reader(home)  # a read-only home still answers
        retriever = cls(
            loaded,
            embedder,
            config,
            store=store,
            tenant=validate_tenant(tenant),
            memory=memory,
            home=home,
            recognizer=recognizer,
            fresh=FreshTier(store, loaded.tables["passages"], state=state),
        )
        if problems:
            name = loaded.manifest["name"]
            retriever.warning = f"serving older snapshot {name}: " + "; ".join(problems)
        return retriever

    def query(
        self,
        text: str,
        top_k: int = 10,
        mode: str = modes.DEFAULT,
        domains: Sequence[str] | None = None,
        profile: str | None = None,
        *,
        since: str | None = None,
        until: str | None = None,
        min_relevance: float | None = None,
        filters: dict | None = None,
    ) -> QueryResult:
        """Embed ``text`` once, retrieve (see :meth:`search`) and log which concepts each result
        came through.

        ``since``/``until``: keep passages whose event time lies in that window (ISO 8601;
        a bare ``until`` date keeps its whole day); like domains they filter the results,
        never the walk. Fresh records (written, not yet consolidated) are filtered alike.
        ``filters``: keep memories whose metadata passes them (:mod:`~.filters`), before the
        top ``top_k`` are taken, in both tiers.
        ``min_relevance`` (None: ``config.min_relevance``; 0: never): when no allowed passage
        or fresh record is that relevant, the result is ``no_answer`` with no passages.
        """
        clean = validate(text, top_k, mode)  # each input checked once, before the embedding
        flt = parse_filters(filters)
        known = set(self.view.domains.names)
        domains = validate_domains(domains, known | (self.fresh.domains() if self.fresh else set()))
        only = Only(domains, validate_window(since, until), flt)
        minimum = relevance.threshold(min_relevance, self.config.min_relevance)
        vector = self.embedder.embed([clean])[0]
        with _blas_controller().limit(limits=1, user_api="blas"):  # see search()
            result = self._search(clean, vector, top_k, mode, only, profile, minimum)
            if self.fresh is not None:  # the hook: written memories not yet in the snapshot
                found = self.fresh.search(vector, clean, top_k, domains, only.window, flt)
        if self.fresh is not None:
            rel = relevance.of_fresh(self.config.relevance)  # the same calibration
            result = self.fresh.merge(result, found, top_k, relevance=rel)
            result = relevance.settle(result, minimum)
        self.memory.record(
            result.query_id,
            result.snapshot,
            [ResultTrace(h.id, "passage", h.concept_ids) for h in result.passages]
            + [ResultTrace(r.id, "rule", r.concept_ids) for r in result.rules],
        )
        cut = (
            f"query truncated to {MAX_QUERY_CHARS} characters"
            if len(text.strip()) > MAX_QUERY_CHARS
            else None
        )
        notes = [n for n in (self.warning, cut, result.fallback) if n]
        return replace(result, fallback="; ".join(notes)) if notes else result

    def feedback(
        self,
        query_id: str,
        accepted: Sequence[str] = (),
        rejected: Sequence[str] = (),
        partial: Sequence[str] = (),
    ) -> list[FeedbackEvent]:
        """Durably record judgements of results (passage or rule ids) of an earlier :meth:`query`.

        The factors change when the events are folded (``qortex factors update``, the Dagster
        asset, or :meth:`update_factors`); this retriever picks them up without a restart.
        """
        return self.memory.feedback(query_id, accepted, rejected, partial)

    def update_factors(self, force: bool = False):
        """Fold all feedback events into the teleportation factors now (no Dagster needed)."""
        return self.memory.update_factors(force)

    def search(
        self,
        text: str,
        vector: np.ndarray,
        top_k: int = 10,
        mode: str = modes.DEFAULT,
        domains: Sequence[str] | None = None,
        profile: str | profiles.ScoringProfile | None = None,
        *,
        since: str | None = None,
        until: str | None = None,
        min_relevance: float | None = None,
        filters: MetadataFilter | dict | None = None,
    ) -> QueryResult:
        """Retrieve with a precomputed unit query vector (modes: :data:`MODES`)."""
        validate(text, top_k, mode)
        window = validate_window(since, until)
        only = Only(domains, window, parse_filters(filters))
        minimum = relevance.threshold(min_relevance, self.config.min_relevance)
        # one BLAS thread: a query is a few small mat-vecs, and a second thread only spin-waits
        # (12 ms instead of 1.4 ms per 17k x 384 product on a busy 2-core machine)
        with _blas_controller().limit(limits=1, user_api="blas"):
            return self._search(text, vector, top_k, mode, only, profile, minimum)

    def seed(self, text: str, vector: np.ndarray, dense: np.ndarray) -> Seeding:
        """Link facts, filter them (when a recognizer is set) and build the walk's teleport.

        Args:
            text: the query; vector: its unit embedding; dense: (n_passages,) cosines.
        """
        return self.context(text, vector, dense=dense).seeding()

    def context(
        self,
        text: str,
        vector: np.ndarray,
        domains: Sequence[str] | None = None,
        dense: np.ndarray | None = None,
        window: tuple[str | None, str | None] = (None, None),
        filters: MetadataFilter | None = None,
    ) -> modes.QueryContext:
        """The query context a mode ranks from (dense cosines computed here unless given);
        ``window``: the validated (since, until) event-time bounds."""
        if dense is None:
            dense = cosine(self.view.passage_vectors, vector)  # (n_passages,)
        return modes.QueryContext(
            text=text,
            vector=vector,
            dense=dense,
            view=self.view,
            walk=self.walk,
            config=self.config,
            allowed=self._allowed(self.view.allowed(domains, *window), filters),
            factors=self.memory.phrase_factors,
            preference=self.memory.preference,
            recognizer=self.recognizer,
            lexical_index=self.lexical,
            live=self.fresh.liveness(self.view) if self.fresh is not None else None,
        )

    def _search(
        self,
        text: str,
        vector: np.ndarray,
        top_k: int,
        mode: str,
        only: Only,
        profile: str | profiles.ScoringProfile | None,
        minimum: float = 0.0,
    ) -> QueryResult:
        """Rank for a query whose inputs were checked (by :meth:`query` or :meth:`search`)."""
        prof = profiles.get_profile(profile, self.home)
        if self.view.n_passages == 0:  # every memory forgotten: only the fresh tier answers
            return replace(self._abstained(text, mode, prof, "snapshot is empty"), no_answer=False)
        ctx = self.context(text, vector, only.domains, window=only.window, filters=only.filters)
        best = relevance.best_of(ctx.dense, self.config.relevance, ctx.allowed)
        if minimum > 0 and best < minimum:  # abstain before any walk: the same in every mode
            return self._abstained(ctx.text, mode, prof, relevance.abstention_note(best, minimum))
        wrong = self.attribution(ctx.text, self.config.attribution) if minimum > 0 else None
        if wrong is not None:
            return self._abstained(ctx.text, mode, prof, wrong.note)
        ranking = modes.get(mode).rank(ctx)
        return self._result(ctx, ranking, top_k, only.domains, prof)

    def _abstained(
        self, text: str, mode: str, prof: profiles.ScoringProfile, note: str
    ) -> QueryResult:
        """A ``no_answer`` result with no passages and ``note`` as its one line."""
        qid = ids.query_id(text, self.view.name, now().isoformat())
        return QueryResult(
            text, mode, self.view.name, [], fallback=note, query_id=qid, profile=prof.name,
            no_answer=True,
        )  # fmt: skip

    def _result(
        self,
        ctx: modes.QueryContext,
        ranking: modes.Ranking,
        top_k: int,
        domains: Sequence[str] | None,
        prof: profiles.ScoringProfile,
    ) -> QueryResult:
        """Hits, concepts, seeds and rules of a ranking, with its notes; each hit carries the
        relevance of its query cosine (only the hits' cosines are mapped)."""
        view = self.view
        extra: dict = {
            "query_id": ids.query_id(ctx.text, view.name, now().isoformat()),
            "profile": prof.name,
        }
        if ranking.route is not None:
            extra["route"] = ranking.route
        if ranking.confidence is not None:
            extra["confidence"] = ranking.confidence
        final, parts = hits.profiled(
            np.asarray(ranking.scores, dtype=np.float32),
            ranking.parts,
            prof,
            self._components(prof),
        )
        cosines, cfg = ctx.dense, self.config.relevance
        passages = hits.passage_hits(
            view, final, parts, top_k, ctx.allowed, ranking.walked,
            lambda at: relevance.score(cosines[at], cfg),
        )  # fmt: skip
        rules = hits.ranked_rules(view, self.config.fact_threshold, ctx, ranking, top_k, domains)
        if ranking.walked is None:
            return QueryResult(
                ctx.text, ranking.mode, view.name, passages,
                fallback=ranking.note, rules=rules, **extra,
            )  # fmt: skip
        return QueryResult(
            ctx.text, ranking.mode, view.name, passages,
            hits.concept_hits(view, ranking.walked.node_scores, top_k, ctx.live),
            hits.seed_list(view, ranking.walked.seeding),
            rules=rules, factors_version=self.memory.factors_version, fallback=ranking.note,
            **extra,
        )  # fmt: skip

    def _allowed(
        self, mask: np.ndarray | None, filters: MetadataFilter | None = None
    ) -> np.ndarray | None:
        """(n_passages,) ``mask`` without forgotten or superseded passages, and only passages of
        memories ``filters`` keeps (None: all allowed)."""
        if filters is not None:
            kept = np.zeros(self.view.n_passages, bool)
            if self.fresh is not None:  # file passages carry no metadata
                kept = self.fresh.filter_mask(filters)
            mask = kept if mask is None else mask & kept
        return self.fresh.visible(mask) if self.fresh is not None else mask

    def _components(self, prof: profiles.ScoringProfile) -> dict[str, np.ndarray]:
        """(n_passages,) recency (by event time, the profile's half-life; 0 without a time),
        salience and preference for the scoring profile."""
        return {
            "recency": self.recency(prof.recency_half_life_days),
            "salience": self.memory.salience,
            "preference": self.memory.preference(),
        }
