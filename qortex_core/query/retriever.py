"""Retrieval: HippoRAG 2 seeding, PPR over the snapshot graph, ranked and explained results.

The query path is a short chain of small array steps; :class:`Retriever` wires
them to a loaded snapshot and an embedder.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from qortex_core.embed import Embedder, make_embedder
from qortex_core.errors import QueryError
from qortex_core.memory.feedback import FeedbackEvent, ResultTrace, now
from qortex_core.memory.fresh import MemoryState
from qortex_core.memory.learned import LearnedMemory, MemoryConfig
from qortex_core.memory.tier import FreshTier
from qortex_core.query import fusion, profiles
from qortex_core.query.ppr import PPRConfig, fast_walk, personalized_pagerank
from qortex_core.query.rules import RuleHit, RuleIndex, rank_rules
from qortex_core.query.seeding import (
    add_dense_term,
    cosine,
    dense_first,
    lexical_matches,
    lexical_seed_weights,
    link_scores,
    min_max,
    passage_context,
    phrase_lookup,
    phrase_seed_weights,
    teleport_vector,
    top_indices,
)
from qortex_core.storage import ids
from qortex_core.storage import snapshot as snap

if TYPE_CHECKING:
    from qortex_core.query.recognition import Recognizer

MODES = ("auto", "hipporag", "hybrid", "dense")
MAX_TOP_K = 100
MAX_QUERY_CHARS = 8192


@dataclass(frozen=True)
class RetrievalConfig:
    """Seeding, walk and ranking parameters.

    HippoRAG 2's defaults except five, chosen on musique_100 with the recorded
    GPT-3.5 OpenIE and all-MiniLM-L6-v2 (see docs/ablation.md): 3 linked facts
    instead of 5, facts linked in the context of their passages, verbatim concept
    seeds, a light dense term in the final score, and the best dense passage first.

    Attributes:
        fact_top_k: facts linked to the query (HippoRAG 2's linking_top_k).
        fact_threshold: raw cosine a fact must reach to seed the walk; none -> dense fallback.
        fact_context: facts are linked by query cosine + this x the best query cosine of the
            passages they were extracted from (0: cosine alone, as HippoRAG 2).
        passage_node_weight: weight of min-max dense scores on passage nodes.
        specificity: divide phrase seeds by the number of passages containing the phrase
            (for verbatim seeds: the least passage-text frequency among its words, at least that count).
        lexical_weight: seed weight of concepts named verbatim in the query (0: off).
        lexical_max_passages: concepts in the text of more passages than this are too common to seed lexically.
        dense_fusion: final passage score = min-max PPR + this x min-max dense score (0: PPR only).
        dense_first: the best dense passage ranks first and the walk orders the rest, so the
            graph modes never lose dense retrieval's top hit; when feedback judged that passage
            down, nothing is lifted and the walk ranks (False: rank by the final score alone).
        ppr: damping, tolerance and iteration cap.
        hybrid: dense + graph fusion and ``auto`` routing (:mod:`qortex_core.query.fusion`).
        recognition_candidates: facts shown to an optional recognition filter that does not say
            itself how many it takes (an LLMRecognizer does: QORTEX_RECOGNITION_CANDIDATES; HippoRAG 2: 5).
    """

    fact_top_k: int = 3
    fact_threshold: float = 0.2
    fact_context: float = 0.5
    passage_node_weight: float = 0.05
    specificity: bool = True
    lexical_weight: float = 0.5
    lexical_max_passages: int = 50
    dense_fusion: float = 0.25
    dense_first: bool = True
    ppr: PPRConfig = PPRConfig()
    hybrid: fusion.FusionConfig = fusion.FusionConfig()
    recognition_candidates: int = 5


@dataclass(frozen=True)
class Seed:
    """A node the walk restarted from, and why."""

    node_id: str
    name: str
    weight: float
    via: str


@dataclass(frozen=True)
class Seeding:
    """What seeding made of one query; ``teleport`` None: no walk, retrieve densely (``note`` says why)."""

    linked: np.ndarray  # (t,) indices of the facts that seed the walk
    best_cosine: float | None  # raw cosine of the best linked fact (``auto`` routes on it)
    phrase_weights: np.ndarray  # (n_phrases,)
    teleport: np.ndarray | None  # (n_nodes,) restart vector over [phrases | passages]
    note: str | None = None


@dataclass(frozen=True)
class PassageHit:
    id: str
    title: str
    text: str
    domain: str
    score: float
    breakdown: dict[str, float]
    seeds: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()
    concept_ids: tuple[str, ...] = ()  # the concepts this hit came through (what feedback adjusts)
    tier: str = "graph"  # "graph": from the snapshot; "fresh": a written memory not yet consolidated
    time: str | None = None  # event time (ISO 8601)
    relevance: float | None = None


@dataclass(frozen=True)
class ConceptHit:
    id: str
    name: str
    score: float


@dataclass(frozen=True)
class QueryResult:
    """Ranked passages and concepts, the seeds of the walk, and any fallback taken."""

    query: str
    mode: str
    snapshot: str
    passages: list[PassageHit]
    concepts: list[ConceptHit] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    fallback: str | None = None
    query_id: str = ""
    rules: list[RuleHit] = field(default_factory=list)
    profile: str = "default"
    route: str | None = None  # why ``auto`` took its mode
    confidence: float | None = None  # hybrid: agreement of the dense and graph top-k
    factors_version: int = 0


def validate(text: str, top_k: int, mode: str) -> str:
    """The query text to use, or a :class:`QueryError`."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("query is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError("query is not valid UTF-8 text (it holds undecodable bytes)") from None
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise QueryError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    if mode not in MODES:
        raise QueryError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    return text.strip()[:MAX_QUERY_CHARS]


def validate_domains(domains: Sequence[str] | None, known: set[str]) -> list[str] | None:
    """``domains`` as a list (None: all), or a :class:`QueryError` for a bare string or an unknown domain."""
    if not domains:
        return None
    if isinstance(domains, str) or not all(isinstance(d, str) for d in domains):
        raise QueryError("domains must be a list of domain names")
    unknown = sorted(set(domains) - known)
    if unknown:
        raise QueryError(
            f"unknown domain {unknown[0]!r}: this snapshot has {', '.join(sorted(known)[:20]) or 'none'}"
        )
    return list(domains)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class Retriever:
    """Answers queries from one loaded snapshot."""

    warning: str | None = None  # set by :meth:`open` when it fell back to an older snapshot

    def __init__(
        self,
        snapshot: snap.Snapshot,
        embedder: Embedder,
        config: RetrievalConfig = RetrievalConfig(),
        store=None,
        tenant: str = "default",
        memory: MemoryConfig = MemoryConfig(),
        home: str | Path | None = None,
        recognizer: Recognizer | None = None,
        fresh: FreshTier | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.fresh = fresh  # agent memories: hides forgotten passages, adds unconsolidated ones
        self.recognizer = (
            recognizer  # optional LLM recognition filter over the linked facts (off: None)
        )
        self.embedder = embedder
        self.config = config
        a = snapshot.arrays
        self.n_phrases = snapshot.n_phrases
        self.adjacency = snapshot.adjacency
        passages = np.zeros(self.adjacency.shape[0], np.float32)
        passages[self.n_phrases :] = (
            1.0  # every hipporag teleport holds dense mass on the passage nodes
        )
        self.walk = fast_walk(
            self.adjacency, background=passages
        )  # symmetric: CG on the mmap'd arrays, no copy
        self.passage_vectors = a["passage_vectors"]
        self.fact_vectors = a["fact_vectors"]
        self.fact_nodes = np.asarray(a["fact_nodes"], dtype=np.int64)
        self.passage_count = np.asarray(a["phrase_passage_count"], dtype=np.float32)
        text_count = np.asarray(
            a.get("phrase_text_frequency", self.passage_count), dtype=np.float32
        )
        # verbatim seeds' specificity: text frequency, never below the passages the concept was extracted from
        self.text_count = np.maximum(text_count, self.passage_count)
        self.fact_passages = (
            np.asarray(a.get("fact_passage_indptr", np.zeros(1, np.int64))),
            np.asarray(a.get("fact_passage_indices", np.zeros(0, np.int32))),
        )
        t = snapshot.tables
        self.node_ids = t["nodes"]["id"].to_pylist()
        self.node_names = t["nodes"]["name"].to_pylist()
        self.passages = t["passages"].to_pylist()
        self.facts = t["facts"]
        self.phrase_index = phrase_lookup(self.node_names[: self.n_phrases])
        self.passage_domains = np.array([p["domain"] for p in self.passages], dtype=object)
        self.phrase_vectors = a.get("phrase_vectors", np.zeros((0, 1), np.float32))
        self.rule_index = RuleIndex.from_table(t.get("rules"))
        self.home, self.tenant = home, tenant
        passage_phrases = self.adjacency[self.n_phrases :, : self.n_phrases].tocsr()
        self.memory = LearnedMemory(
            store, self.node_ids[: self.n_phrases], passage_phrases, tenant, memory
        )
        self.recency = profiles.recency(
            None, len(self.passages), 30.0
        )  # passages carry no time yet

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        embedder: Embedder | None = None,
        config: RetrievalConfig = RetrievalConfig(),
        version: str | None = None,
        verify: bool = True,
        tenant: str | None = None,
        memory: MemoryConfig = MemoryConfig(),
        recognizer: Recognizer | None = None,
        state: MemoryState | None = None,
    ) -> "Retriever":
        """Load the latest (or a pinned) snapshot under ``home``, with the home's fresh tier.

        A corrupt latest snapshot is skipped for the newest good one before it; ``warning``
        then says so, and every result of :meth:`query` carries it in ``fallback``.
        ``state``: the memories state of an open :class:`~qortex_core.memory.api.Memory` to share.
        """
        from qortex_core.storage.store import LanceStore, default_home
        from qortex_core.storage.tenants import tenant_home, validate_tenant

        home = tenant_home(
            home or default_home(), tenant
        )  # a tenant's memory lives in its own home
        loaded, problems = (
            snap.load_latest_good(home, verify=verify)
            if version is None
            else (snap.load(home, version, verify=verify), [])
        )
        store = LanceStore.open(home)
        retriever = cls(
            loaded,
            embedder or make_embedder(),
            config,
            store=store,
            tenant=validate_tenant(tenant),
            memory=memory,
            home=home,
            recognizer=recognizer,
            fresh=FreshTier(store, loaded.tables["passages"], state=state),
        )
        if problems:
            retriever.warning = (
                f"serving older snapshot {loaded.manifest.get('name', '?')}: " + "; ".join(problems)
            )
        return retriever

    def query(
        self,
        text: str,
        top_k: int = 10,
        mode: str = "auto",
        domains: Sequence[str] | None = None,
        profile: str | None = None,
        *,
        since: str | None = None,
        until: str | None = None,
    ) -> QueryResult:
        """Embed ``text`` once, retrieve (see :meth:`search`) and log which concepts each result came through.

        ``since``/``until`` (ISO 8601) filter the fresh tier's records by event time.
        """
        clean = validate(text, top_k, mode)
        known = set(self.passage_domains.tolist()) | (self.fresh.domains() if self.fresh else set())
        domains = validate_domains(domains, known)
        vector = self.embedder.embed([clean])[0]
        result = self.search(clean, vector, top_k, mode, domains, profile)
        if self.fresh is not None:  # written memories not yet in the snapshot, by relevance
            hits = self.fresh.search(vector, clean, top_k, domains, (since, until))
            result = self.fresh.merge(result, hits, top_k)
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
        mode: str = "auto",
        domains: Sequence[str] | None = None,
        profile: str | profiles.ScoringProfile | None = None,
    ) -> QueryResult:
        """Retrieve with a precomputed unit query vector (modes: auto, hipporag, hybrid, dense)."""
        # one BLAS thread: a query is a few small mat-vecs, and a second thread only spin-waits
        # (12 ms instead of 1.4 ms per 17k x 384 product on a busy 2-core machine)
        with _blas_controller().limit(limits=1, user_api="blas"):
            return self._search(text, vector, top_k, mode, domains, profile)

    def _search(
        self,
        text: str,
        vector: np.ndarray,
        top_k: int,
        mode: str,
        domains: Sequence[str] | None,
        profile: str | profiles.ScoringProfile | None,
    ) -> QueryResult:
        validate(text, top_k, mode)
        prof = profiles.get_profile(profile, self.home)
        dense = cosine(self.passage_vectors, vector)  # (n_passages,)
        name = self.snapshot.manifest.get("name", "")
        extra = {"query_id": ids.query_id(text, name, now().isoformat()), "profile": prof.name}
        if mode == "dense" or self.fact_vectors.shape[0] == 0:
            fallback = None if mode == "dense" else "graph has no facts: dense retrieval"
            return self._dense_result(text, vector, dense, top_k, domains, prof, fallback, extra)
        seeding = self.seed(text, vector, dense)
        if mode == "auto":
            mode, extra["route"] = fusion.route(seeding.best_cosine, self.config.hybrid)
        if seeding.teleport is None:
            return self._dense_result(
                text, vector, dense, top_k, domains, prof, seeding.note, extra
            )
        linked, phrase_w, teleport, note = (
            seeding.linked,
            seeding.phrase_weights,
            seeding.teleport,
            seeding.note,
        )
        scores = personalized_pagerank(self.walk, teleport, self.config.ppr)  # (n_nodes,)
        passage_scores = scores[self.n_phrases :]
        seeds = self._seeds(phrase_w, linked)
        final = add_dense_term(passage_scores, dense, self.config.dense_fusion)
        if mode == "hybrid":  # dense and graph with equal say, and how far their top-k agree
            final, extra["confidence"] = fusion.fuse(dense, passage_scores, self.config.hybrid)
        allowed = self._domain_mask(domains)
        if (
            self.config.dense_first
        ):  # learned feedback vetoes it: a passage judged down (preference < 0.5) stays put
            final = dense_first(final, dense, allowed, self.memory.preference() < 0.5)
        hits = self._hits(
            final,
            {
                "ppr": passage_scores,
                "dense": dense,
                "seed": teleport[self.n_phrases :] / max(teleport.sum(), 1e-12),
            },
            top_k,
            allowed,
            scores,
            teleport,
            prof,
        )
        concepts = [
            ConceptHit(self.node_ids[i], self.node_names[i], float(scores[i]))
            for i in top_indices(scores[: self.n_phrases], top_k)
        ]
        rules = rank_rules(
            self.rule_index,
            scores[: self.n_phrases],
            self.node_ids,
            self.node_names,
            top_k,
            domains,
        )
        return QueryResult(
            text,
            mode,
            name,
            hits,
            concepts,
            seeds,
            rules=rules,
            factors_version=self.memory.factors_version,
            fallback=note,
            **extra,
        )

    def seed(self, text: str, vector: np.ndarray, dense: np.ndarray) -> Seeding:
        """Link facts, filter them (when a recognizer is set) and build the walk's teleport vector.

        Args:
            text: the query; vector: its unit embedding; dense: (n_passages,) query-to-passage cosine.
        """
        fact_scores = cosine(self.fact_vectors, vector)  # (n_facts,)
        # (n_facts,) cosine + fact_context x best cosine among each fact's source passages (skipped when off)
        linking = (
            link_scores(
                fact_scores, passage_context(dense, *self.fact_passages), self.config.fact_context
            )
            if self.config.fact_context > 0
            else fact_scores
        )
        linked = top_indices(linking, self.config.fact_top_k)
        linked = linked[fact_scores[linked] >= self.config.fact_threshold]
        note = None  # what the recognition filter did, when it did not simply filter
        if self.recognizer is not None and linked.size:
            from qortex_core.query.recognition import filter_linked

            linked, note = filter_linked(
                self.recognizer,
                text,
                linking,
                fact_scores,
                self.facts,
                linked,
                self.config.recognition_candidates,
                self.config.fact_threshold,
            )
        best = float(fact_scores[linked].max()) if linked.size else None
        if linked.size == 0:  # HippoRAG 2: no relevant fact -> dense retrieval
            note = note or f"no fact reached cosine {self.config.fact_threshold}: dense retrieval"
            return Seeding(linked, best, np.zeros(self.n_phrases, np.float32), None, note)
        phrase_w = phrase_seed_weights(
            linked,
            min_max(linking)[linked],
            self.fact_nodes,
            self.passage_count,
            self.config.specificity,
        )  # (n_phrases,)
        if self.config.lexical_weight > 0:
            phrase_w = phrase_w + lexical_seed_weights(
                lexical_matches(text, self.phrase_index),
                self.text_count,
                self.config.lexical_weight,
                self.config.lexical_max_passages,
                self.config.specificity,
            )
        phrase_w = (
            phrase_w * self.memory.phrase_factors()
        )  # learned teleportation factors (1.0 when none)
        return Seeding(
            linked,
            best,
            phrase_w,
            teleport_vector(phrase_w, dense, self.config.passage_node_weight),
            note,
        )

    def _dense_result(
        self,
        text: str,
        vector: np.ndarray,
        dense: np.ndarray,
        top_k: int,
        domains: Sequence[str] | None,
        prof: profiles.ScoringProfile,
        fallback: str | None,
        extra: dict,
    ) -> QueryResult:
        """Dense ranking; rules scored by the cosine of their concepts to the query."""
        phrase_cos = (
            cosine(self.phrase_vectors, vector)
            if self.phrase_vectors.shape[0] == self.n_phrases
            else np.zeros(self.n_phrases, np.float32)
        )
        rules = rank_rules(
            self.rule_index, phrase_cos, self.node_ids, self.node_names, top_k, domains
        )
        return QueryResult(
            text,
            "dense",
            self.snapshot.manifest.get("name", ""),
            self._hits(dense, {"dense": dense}, top_k, self._domain_mask(domains), profile=prof),
            fallback=fallback,
            rules=rules,
            **extra,
        )

    def _profiled(
        self, ranking: np.ndarray, parts: dict[str, np.ndarray], profile: profiles.ScoringProfile
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Final scores under ``profile`` and the breakdown with every component."""
        final, comps = profiles.combine(
            profile,
            ranking,
            {
                "recency": self.recency,
                "salience": self.memory.salience,
                "preference": self.memory.preference(),
            },
        )
        return final, parts | comps | {"final": final}

    # -- assembly -------------------------------------------------------------------------
    def _seeds(self, phrase_w: np.ndarray, linked: np.ndarray) -> list[Seed]:
        out = []
        fact_text = {}
        for f in linked.tolist():
            row = self.facts.slice(f, 1).to_pylist()[0]
            for node in self.fact_nodes[f]:
                fact_text.setdefault(
                    int(node), f"({row['subject']}, {row['predicate']}, {row['object']})"
                )
        for node in np.flatnonzero(phrase_w).tolist():
            out.append(
                Seed(
                    self.node_ids[node],
                    self.node_names[node],
                    float(phrase_w[node]),
                    fact_text.get(node, ""),
                )
            )
        return sorted(out, key=lambda s: -s.weight)

    def _domain_mask(self, domains: Sequence[str] | None) -> np.ndarray | None:
        """(n_passages,) True for passages in ``domains`` and not forgotten; None: all allowed."""
        mask = np.isin(self.passage_domains, list(domains)) if domains else None
        return self.fresh.visible(mask) if self.fresh is not None else mask

    def _hits(
        self,
        ranking: np.ndarray,
        parts: dict[str, np.ndarray],
        top_k: int,
        allowed: np.ndarray | None,
        node_scores: np.ndarray | None = None,
        teleport: np.ndarray | None = None,
        profile: profiles.ScoringProfile = profiles.BUILTIN["default"],
    ) -> list[PassageHit]:
        ranking, parts = self._profiled(np.asarray(ranking, dtype=np.float32), parts, profile)
        ranking = np.asarray(ranking, dtype=np.float32).copy()
        if allowed is not None:
            ranking[~allowed] = -np.inf
        out = []
        for i in top_indices(ranking, top_k).tolist():
            if not np.isfinite(ranking[i]):
                break
            p = self.passages[i]
            seeds: tuple[str, ...] = ()
            concepts: tuple[str, ...] = ()
            row = self.adjacency.indices[
                self.adjacency.indptr[self.n_phrases + i] : self.adjacency.indptr[
                    self.n_phrases + i + 1
                ]
            ]
            phrases = row[row < self.n_phrases]
            via = phrases[:10]
            if node_scores is not None and teleport is not None:
                seeds = tuple(self.node_names[j] for j in phrases[teleport[phrases] > 0])
                top = phrases[np.argsort(-node_scores[phrases])][:5]
                concepts = tuple(self.node_names[j] for j in top)
                via = phrases[teleport[phrases] > 0] if seeds else top
            out.append(
                PassageHit(
                    p["id"],
                    p["title"],
                    p["text"],
                    p["domain"],
                    float(ranking[i]),
                    {k: float(v[i]) for k, v in parts.items()},
                    seeds,
                    concepts,
                    tuple(self.node_ids[j] for j in via),
                )
            )
        return out
