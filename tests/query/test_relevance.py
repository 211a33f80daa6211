"""Relevance in [0, 1] comparable across modes, min_relevance, no_answer, and the CLI line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import BRIDGE_QUESTION

from qortex_bench.abstention import OFFTOPIC_QUERIES, abstention, load_queries
from qortex_cli.main import main
from qortex_core.errors import DatasetError, QueryError
from qortex_core.query import modes, relevance
from qortex_core.query.config import RetrievalConfig
from qortex_core.query.retriever import Retriever

GIBBERISH = "zxqv blorf"
PAINTER = "What does the painter Ivo Lark paint?"


def test_score_is_a_calibrated_logistic_of_cosine():
    config = relevance.RelevanceConfig(center=0.35, width=0.05)
    cos = np.array([-1.0, 0.2, 0.35, 0.5, 1.0])
    rel = relevance.score(cos, config)
    assert rel[2] == pytest.approx(0.5)
    assert np.all(np.diff(rel) > 0) and rel[0] >= 0 and rel[-1] <= 1
    assert rel[1] == pytest.approx(1 / (1 + np.exp(3.0)), rel=1e-5)
    assert relevance.best_of(cos, config) == rel[-1]
    assert relevance.best_of(cos, config, np.array([True, True, False, False, False])) == rel[1]
    assert relevance.best_of(cos, config, np.zeros(5, bool)) == 0.0


def test_best_of_cosines_is_the_best_relevance_without_mapping_every_passage():
    config = relevance.RelevanceConfig(center=0.35, width=0.05)
    cos = np.random.default_rng(1).uniform(-0.3, 0.8, 1000).astype(np.float32)
    allowed = np.random.default_rng(2).random(1000) < 0.1
    every = relevance.score(cos, config)
    assert relevance.best_of(cos, config) == float(every.max())
    assert relevance.best_of(cos, config, allowed) == float(every[allowed].max())
    assert relevance.best_of(cos, config, np.zeros(1000, bool)) == 0.0
    assert relevance.best_of(np.zeros(0, np.float32), config) == 0.0


def test_threshold_validation():
    assert relevance.threshold(None, 0.5) == 0.5
    assert relevance.threshold(0, 0.5) == 0.0
    for bad in (-0.1, 1.5, float("nan"), "high", True):
        with pytest.raises(QueryError, match="min_relevance"):
            relevance.threshold(bad, 0.5)


@pytest.mark.parametrize("mode", modes.names())
def test_gibberish_abstains_and_a_real_question_answers(toy_home, embedder, mode):
    retriever = Retriever.open(toy_home, embedder=embedder)
    nothing = retriever.query(GIBBERISH, top_k=5, mode=mode)
    assert nothing.no_answer and nothing.passages == [] and "no answer" in nothing.fallback
    forced = retriever.query(GIBBERISH, top_k=5, mode=mode, min_relevance=0)
    assert not forced.no_answer and forced.passages
    assert max(h.relevance for h in forced.passages) < RetrievalConfig().min_relevance
    answer = retriever.query(PAINTER, top_k=5, mode=mode)
    assert not answer.no_answer and answer.passages
    assert all(0.0 <= h.relevance <= 1.0 for h in answer.passages)
    assert answer.passages[0].title == "Ivo Lark" and answer.passages[0].relevance >= 0.5


def test_relevance_means_the_same_in_every_mode(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    seen: dict[str, set[float]] = {}
    for mode in modes.names():
        for hit in retriever.query(BRIDGE_QUESTION, top_k=8, mode=mode).passages:
            seen.setdefault(hit.id, set()).add(round(hit.relevance, 6))
    assert len(seen) == 8 and all(len(values) == 1 for values in seen.values())
    # and it is the calibrated cosine of the passage, whatever ranked it
    vector = embedder.embed([BRIDGE_QUESTION])[0]
    cos = retriever.passage_vectors @ vector
    expected = relevance.score(cos, retriever.config.relevance)
    ids = [p["id"] for p in retriever.passages]
    for pid, values in seen.items():
        assert values == {round(float(expected[ids.index(pid)]), 6)}


def test_config_default_and_per_query_threshold(toy_home, embedder):
    strict = Retriever.open(toy_home, embedder=embedder, config=RetrievalConfig(min_relevance=1.0))
    assert strict.query(PAINTER, top_k=3).no_answer
    assert not strict.query(PAINTER, top_k=3, min_relevance=0.5).no_answer
    with pytest.raises(QueryError, match="min_relevance"):
        strict.query(PAINTER, min_relevance=2)


def test_cli_prints_one_line_for_no_answer(toy_home, capsys):
    assert main(["query", GIBBERISH, "--home", str(toy_home)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("no answer: no passage reaches relevance 0.50")
    assert main(["query", GIBBERISH, "--home", str(toy_home), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["no_answer"] is True and data["passages"] == []
    assert main(["query", PAINTER, "--home", str(toy_home), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["no_answer"] is False and data["passages"][0]["relevance"] > 0.5
    assert main(["query", PAINTER, "--home", str(toy_home), "--min-relevance", "3"]) == 2
    assert "min_relevance must be" in capsys.readouterr().err


def test_offtopic_file_and_abstention_shares(toy_home, embedder, tmp_path):
    queries = load_queries(OFFTOPIC_QUERIES)
    assert len(queries) == 50 and len(set(queries)) == 50
    retriever = Retriever.open(toy_home, embedder=embedder)
    report = abstention(retriever, [GIBBERISH, PAINTER], ("dense", "hipporag"))
    for mode in ("dense", "hipporag"):
        assert report[mode]["queries"] == 2 and report[mode]["no_answer"] == 0.5
    empty = tmp_path / "q.txt"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(DatasetError, match="no query"):
        load_queries(empty)
