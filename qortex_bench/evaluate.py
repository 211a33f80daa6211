"""Evaluation on HippoRAG-format multi-hop QA data: build the index, score recall@k per mode.

The data loaders and recall@k live in :mod:`qortex_bench.datasets`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from qortex_bench.datasets import (
    Question,
    load_corpus,
    load_questions,
    match_gold,
    mean_recall,
)
from qortex_core.errors import DatasetError, HomeError, QueryError
from qortex_core.query import modes as query_modes
from qortex_core.storage.model import Passage


@dataclass(frozen=True)
class EvalSetup:
    """What ``qortex eval`` runs: files, extractor, modes, cut-offs and data home."""

    questions: Path
    corpus: Path
    home: Path
    openie: Path | None = None
    extractor: str = "recorded"
    modes: tuple[str, ...] = field(default_factory=query_modes.eval_defaults)
    ks: tuple[int, ...] = (1, 2, 5, 10)
    single_hop: bool = False  # ask the MuSiQue decomposition steps, one hop each


def validate_setup(setup: EvalSetup) -> None:
    """Check modes and cut-offs before any work is done.

    Raises:
        QueryError: no mode, an unknown mode, no cut-off or a cut-off outside 1..MAX_TOP_K.
    """
    from qortex_core.query.validation import MAX_TOP_K

    known = query_modes.names()
    if not setup.modes:
        raise QueryError(f"no retrieval mode given: use one or more of {', '.join(known)}")
    unknown = [m for m in setup.modes if m not in known]
    if unknown:
        raise QueryError(f"unknown mode {unknown[0]!r}: use one or more of {', '.join(known)}")
    if not setup.ks:
        raise QueryError("no recall cut-off given: use e.g. --k 1,2,5,10")
    bad = [
        k
        for k in setup.ks
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_TOP_K
    ]
    if bad:
        raise QueryError(
            f"recall cut-off {bad[0]!r} is out of range: use integers from 1 to {MAX_TOP_K}"
        )


def check_openie_coverage(extractor, passages: Sequence[Passage], path: Path | None) -> int:
    """Number of corpus passages the recorded OpenIE file covers.

    Raises:
        DatasetError: the file covers none of them (it belongs to another corpus).
    """
    covered = sum(extractor.covers(p) for p in passages)
    if passages and covered == 0:
        raise DatasetError(
            f"OpenIE file {path} has no entry for any of the {len(passages)} corpus passages "
            "(match on title + newline + text): is it the OpenIE file of this corpus?"
        )
    return covered


# query_log is left out: it only traces queries (``qortex query`` or ``qortex bench query`` on an
# eval home)
MEMORY_TABLES = ("documents", "feedback_events", "teleportation_factors")


def check_home_is_for_eval(store, home: Path) -> None:
    """Refuse a data home that holds ingested memory: evaluation replaces a home's chunks and
    snapshot.

    Raises:
        HomeError: the home has tables that only ``qortex ingest`` or feedback create.
    """
    found = [name for name in MEMORY_TABLES if store.open_latest(name) is not None]
    if found:
        raise HomeError(
            f"data home {home} holds ingested memory ({', '.join(found)}); qortex eval would "
            "replace "
            "its chunks and latest snapshot: pass another --home"
        )


# stage name -> the timing it counts toward (the report's keys predate the stage sequence)
STAGE_TIMINGS = {
    "documents": "extract_s",  # nothing to read in an eval run: it starts from passages
    "chunks": "extract_s",
    "extractions": "extract_s",
    "embeddings": "embed_s",
    "synonym_edges": "graph_s",
    "graph_snapshot": "graph_s",
}


def _build_index(run, timings: dict[str, float]) -> dict[str, Any]:
    """Every ingestion stage (:data:`qortex_core.ingest.stages.STAGES`); seconds into
    ``timings``."""
    import time

    from qortex_core.ingest.stages import run_stages

    started = [time.perf_counter()]

    def clock(stage: str, _report: object) -> None:
        now = time.perf_counter()
        key = STAGE_TIMINGS[stage]
        timings[key] = timings.get(key, 0.0) + now - started[0]
        started[0] = now

    return run_stages(run, after=clock)


def _make_extractor(setup: EvalSetup):
    """The recorded (OpenIE replay) or offline extractor ``setup`` names.

    Raises:
        DatasetError: ``recorded`` without an OpenIE file, or an unknown extractor.
    """
    from qortex_core.ingest.extract import OfflineExtractor, RecordedExtractor

    if setup.extractor == "recorded":
        if setup.openie is None:
            raise DatasetError("--extractor recorded needs --openie FILE")
        return RecordedExtractor(setup.openie)
    if setup.extractor == "offline":
        return OfflineExtractor()
    raise DatasetError(f"unknown extractor {setup.extractor!r}: use recorded or offline")


def _match(
    setup: EvalSetup, questions: list[Question], passages: list[Passage], extractor
) -> tuple[list[Question], dict, int | None]:
    """Questions with gold matched to corpus ids, the match counts, and OpenIE coverage.

    Raises:
        DatasetError: no gold passage is in the corpus, or the OpenIE file covers none of it.
    """
    questions, matched = match_gold(questions, passages)
    if matched["missing"] == sum(len(q.gold) for q in questions):
        raise DatasetError(
            f"none of the gold passages of {setup.questions} is in the corpus {setup.corpus} "
            "(match on title + text): are they the same dataset?"
        )
    covered = (
        check_openie_coverage(extractor, passages, setup.openie)
        if setup.extractor == "recorded"
        else None
    )
    return questions, matched, covered


def _score(retriever, setup: EvalSetup, questions, vectors, say, timings) -> tuple[dict, dict]:
    """Recall@k of every mode in ``setup.modes`` and how many answers fell back, by mode."""
    import time

    results: dict[str, dict[str, float]] = {}
    fallbacks: dict[str, int] = {}
    top = max(setup.ks)
    for mode in setup.modes:
        t = time.perf_counter()
        rankings = []
        fallbacks[mode] = 0
        for n, (q, v) in enumerate(zip(questions, vectors)):
            res = retriever.search(q.text, v, top_k=top, mode=mode)
            fallbacks[mode] += res.fallback is not None
            rankings.append([h.id for h in res.passages])
            say(f"query {mode}", n + 1, len(questions))
        results[mode] = mean_recall(rankings, questions, setup.ks)
        timings[f"{mode}_ms_per_query"] = 1000 * (time.perf_counter() - t) / len(questions)
    return results, fallbacks


def _index_summary(reports: dict[str, Any]) -> dict[str, int]:
    extract, embedded = reports["extractions"], reports["embeddings"]
    return {
        "extracted": extract.extracted,
        "cached_extractions": extract.cached,
        "failed": extract.failed,
        "concepts": embedded.concepts,
        "facts": embedded.facts,
        "synonym_edges": reports["synonym_edges"].edges,
        "texts_embedded": embedded.texts_embedded,
    }


def run_evaluation(
    setup: EvalSetup, progress=None, retrieval_config=None, embedder=None, recognizer=None
) -> dict:
    """Build the index through the pipeline's stage sequence, then score every mode.

    ``recognizer``: an optional LLM recognition filter (:mod:`qortex_core.query.recognition`)
    for the graph modes. Returns the report ``{"questions", "passages", "results": {mode:
    {recall@k}}, "timings", "recognition", ...}``.
    """
    import time

    from qortex_core.embed import make_embedder
    from qortex_core.ingest.stages import IngestRun
    from qortex_core.query.retriever import RetrievalConfig, Retriever
    from qortex_core.storage.store import LanceStore

    say = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    validate_setup(setup)
    questions = load_questions(setup.questions, setup.single_hop)
    passages = load_corpus(setup.corpus)
    extractor = _make_extractor(setup)
    questions, matched, covered = _match(setup, questions, passages, extractor)
    timings["load_s"] = time.perf_counter() - t0
    embedder = embedder or make_embedder()
    store = LanceStore.open(setup.home)
    check_home_is_for_eval(store, setup.home)
    reports = _build_index(
        IngestRun(store, setup.home, extractor, embedder, passages, progress=say), timings
    )
    config = retrieval_config or RetrievalConfig()
    retriever = Retriever.open(setup.home, embedder=embedder, config=config, recognizer=recognizer)
    t = time.perf_counter()
    vectors = embedder.embed([q.text for q in questions])
    timings["embed_queries_s"] = time.perf_counter() - t
    results, fallbacks = _score(retriever, setup, questions, vectors, say, timings)
    timings["total_s"] = time.perf_counter() - t0
    return {
        "questions": len(questions),
        "single_hop": setup.single_hop,
        "passages": len(passages),
        "results": results,
        "timings": timings,
        "gold_missing_from_corpus": matched["missing"],
        "gold_matched": matched,
        "fallbacks": fallbacks,
        "snapshot": reports["graph_snapshot"].name,
        "index": _index_summary(reports),
        "extractor": extractor.cache_key,
        "embedding_model": embedder.name,
        "openie_covered_passages": covered,
        "recognition": {
            "enabled": recognizer is not None,
            "llm_calls": int(getattr(recognizer, "calls", 0)),
        },
    }
