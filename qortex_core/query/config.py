"""Retrieval parameters: one frozen dataclass every mode reads through the query context."""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.query import fusion
from qortex_core.query.attribution import AttributionConfig
from qortex_core.query.ppr.solve import PPRConfig, query_threads
from qortex_core.query.relevance import RelevanceConfig


@dataclass(frozen=True)
class FullTextConfig:
    """The lexical channel: BM25 over passages (LanceDB full-text index), and its three uses.

    Attributes:
        enabled: search the snapshot's full-text index at all (False: the ``lexical`` mode
            answers densely and neither use below applies).
        candidates: BM25 hits fetched per query; other passages score 0.
        hybrid_weight: ``hybrid`` fuses dense and graph where its dense side is
            (1 - this) x min-max dense + this x min-max BM25 (0: dense alone).
        seed_weight: teleport mass on passages the query names lexically: the walk's
            passage restart is ``passage_node_weight`` x min-max dense + this x min-max
            BM25 (0: off).
        final_weight: the graph modes' final score adds this x min-max BM25 to min-max PPR
            + ``dense_fusion`` x min-max dense (0: off).
        text_weight: the ``text`` mode's score: (1 - this) x min-max dense + this x min-max
            BM25 (normalised-score fusion; dense alone when BM25 matches nothing).
        text_first: the graph modes lift the best passage by that text score to first place
            and the best dense passage to second (``RetrievalConfig.dense_first`` must be on;
            off: the best dense passage first).
        route_text: ``auto`` sends queries that link no fact, or only weakly, to ``text``
            (dense + BM25) instead of ``dense`` / ``hybrid``.
    """

    enabled: bool = True
    candidates: int = 100
    hybrid_weight: float = 0.0
    seed_weight: float = 0.0
    final_weight: float = 0.0
    text_weight: float = 0.5
    text_first: bool = True
    route_text: bool = True


@dataclass(frozen=True)
class TextWalkConfig:
    """The ``textwalk`` mode (the best text passages seed the walk) and ``auto``'s use of it.

    Attributes:
        seeds: the best passages by the ``text`` score (dense + BM25) that seed the walk, each
            with its min-max text score as restart mass.
        walk_weight: final score = text score + this x min-max PPR mass.
        route_share: ``auto`` answers with ``textwalk`` when at least this share of the
            snapshot's passages are items of a conversation (linked to neighbouring turns,
            :mod:`qortex_core.ingest.sequence`); above 1: never.
        fact_weight: restart mass of the query's linked facts (``hipporag``'s seeding) beside
            the text passages': the two restart vectors, each summing to 1, are added with
            this weight on the facts' (0: text passages only).
    """

    seeds: int = 20
    walk_weight: float = 0.5
    route_share: float = 0.5
    fact_weight: float = 1.0


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
        fact_probes: on a snapshot with a fact index (``GraphConfig.fact_cells``: 200,000 facts
            or more), only the facts of the query's this many nearest cells are scored
            (0: every fact, exact).
        passage_node_weight: weight of min-max dense scores on passage nodes.
        passage_seeds: only the this many passages most similar to the query get that restart
            mass (their min-max over every passage, as before); 0: every passage, as HippoRAG 2.
            Bounds the dense share of the teleport as the corpus grows (at 1M passages every
            passage's share drowned the concept seeds), and keeps the teleport sparse, so a
            large graph's walk is a local push (``PPRConfig.push_min_nodes``).
        specificity: divide phrase seeds by the number of passages containing the phrase
            (for verbatim seeds: the least passage-text frequency among its words, at least
            that count).
        lexical_weight: seed weight of concepts named verbatim in the query (0: off).
        lexical_max_passages: concepts in the text of more passages than this are too common
            to seed lexically.
        dense_fusion: final passage score = min-max PPR + this x min-max dense score (0: PPR only).
        dense_first: the best dense passage ranks first and the walk orders the rest, so the
            graph modes never lose dense retrieval's top hit; when feedback judged that passage
            down, nothing is lifted and the walk ranks (False: rank by the final score alone).
        ppr: damping, tolerance and iteration cap. The certified L1 tolerance is 1e-4, not
            :class:`~qortex_core.query.ppr.solve.PPRConfig`'s 1e-7: on musique_100 every
            top-10 is the same down to 3e-4 (1e-3 changes 2 of 100), and at 100k passages
            the solve takes about 4 matrix products instead of 9. Products of graphs with
            200,000 stored edges or more are split over ``query_threads()`` threads (the
            cores this process may use, at most 4; each row block is computed as a whole
            product would, so the scores are the same): 408 -> 297 ms p50 for a 300k-passage
            hipporag query on 2 cores.
        hybrid: dense + graph fusion (:mod:`qortex_core.query.fusion`) and ``auto``'s routing
            threshold (:func:`qortex_core.query.modes.auto.route`).
        fulltext: the lexical (BM25) channel: the ``lexical`` mode, its share in ``hybrid``
            and its teleport mass in the walk (:class:`FullTextConfig`).
        textwalk: the walk seeded by the best text passages (:class:`TextWalkConfig`).
        recognition_candidates: facts shown to an optional recognition filter that does not say
            itself how many it takes (an LLMRecognizer does: QORTEX_RECOGNITION_CANDIDATES;
            HippoRAG 2: 5).
        relevance: the cosine -> [0, 1] relevance map every hit carries
            (:mod:`qortex_core.query.relevance`).
        min_relevance: a query whose best passage is less relevant than this answers
            ``no_answer`` with no passages (0: never abstain); a query may set its own.
        attribution: in a conversation, a query about one participant whose best matching
            facts are about another answers ``no_answer`` (:mod:`qortex_core.query.attribution`;
            skipped when the query's ``min_relevance`` is 0).
    """

    fact_top_k: int = 3
    fact_threshold: float = 0.2
    fact_context: float = 0.5
    fact_probes: int = 32
    passage_node_weight: float = 0.05
    passage_seeds: int = 1000
    specificity: bool = True
    lexical_weight: float = 0.5
    lexical_max_passages: int = 50
    dense_fusion: float = 0.25
    dense_first: bool = True
    ppr: PPRConfig = PPRConfig(tol=1e-4, threads=query_threads())
    hybrid: fusion.FusionConfig = fusion.FusionConfig()
    recognition_candidates: int = 5
    fulltext: FullTextConfig = FullTextConfig()
    textwalk: TextWalkConfig = TextWalkConfig()
    relevance: RelevanceConfig = RelevanceConfig()
    min_relevance: float = 0.5
    attribution: AttributionConfig = AttributionConfig()
