"""The optional LLM recognition filter against a real OpenAI-protocol server on loopback.

The server (:mod:`recognition_loopback`) replays recorded answers per query; the
retriever reads a real LanceDB home indexed from the toy corpus with recorded OpenIE.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION, TOY_QUESTIONS
from recognition_loopback import RecognitionLoopback

from qortex_bench.evaluate import EvalSetup, run_evaluation
from qortex_cli.main import main
from qortex_core.errors import ConfigError, RecognitionError
from qortex_core.llm import LLMConfig
from qortex_core.query.recognition import (
    KEPT_NONE,
    PROMPT_VERSION,
    LLMRecognizer,
    RecognitionConfig,
    make_recognizer,
    match_facts,
)
from qortex_core.query.retriever import RetrievalConfig, Retriever

KEY = "recognition-SECRET-0123456789abcdef"  # no "sk-" prefix: only exact masking can hide it
BRIDGE_FACT = ["Ostrania", "governed from", "Velmora"]
PAINTER_QUESTION = TOY_QUESTIONS[1]["question"]
ENV_NAMES = (
    "QORTEX_RECOGNITION_MODEL",
    "QORTEX_RECOGNITION_BASE_URL",
    "QORTEX_RECOGNITION_API_KEY",
    "QORTEX_LLM_MODEL",
    "QORTEX_LLM_BASE_URL",
    "QORTEX_LLM_API_KEY",
    "OPENAI_API_KEY",
)


@pytest.fixture(scope="module")
def home(_toy_home_session, tmp_path_factory) -> Path:
    """A private copy of the indexed toy home for this module (queries append to its query log)."""
    path = tmp_path_factory.mktemp("recognition") / "home"
    shutil.copytree(_toy_home_session[0], path)
    return path


@pytest.fixture
def server():
    with RecognitionLoopback({}, api_key=KEY) as srv:
        yield srv


def recognizer_for(srv: RecognitionLoopback, **llm) -> LLMRecognizer:
    base = dict(
        model="replay",
        base_url=srv.base_url,
        api_key=KEY,
        concurrency=1,
        max_retries=2,
        validation_retries=1,
        timeout_s=5.0,
        backoff_base_s=0.01,
        prompt_version=PROMPT_VERSION,
    )
    return LLMRecognizer(RecognitionConfig(LLMConfig(**{**base, **llm})))


def ranking(result) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in result.passages]


def test_filter_seeds_only_the_kept_fact_and_its_passage_ranks_first(home, embedder, server):
    # only fact seeds, so the filter alone decides them; the walk alone ranks (no dense-first lift)
    config = RetrievalConfig(lexical_weight=0.0, dense_first=False)
    plain = Retriever.open(home, embedder=embedder, config=config).query(
        BRIDGE_QUESTION, top_k=5, mode="hipporag"
    )
    server.answers[BRIDGE_QUESTION] = [BRIDGE_FACT]
    recognizer = recognizer_for(server)
    filtered = Retriever.open(home, embedder=embedder, config=config, recognizer=recognizer).query(
        BRIDGE_QUESTION, top_k=5, mode="hipporag"
    )

    [request] = server.requests()
    assert (
        request.query == BRIDGE_QUESTION
        and len(request.candidates) == config.recognition_candidates
    )
    assert BRIDGE_FACT in request.candidates
    assert {s.name for s in filtered.seeds} == {"Ostrania", "Velmora"}
    assert {s.via for s in filtered.seeds} == {"(Ostrania, governed from, Velmora)"}
    assert {s.name for s in plain.seeds} - {
        "Ostrania",
        "Velmora",
    }  # unfiltered, other facts seeded too
    assert plain.passages[0].title != "Ostrania" and filtered.passages[0].title == "Ostrania"
    assert filtered.fallback is None and filtered.mode == "hipporag"
    assert recognizer.calls == 1


def test_keeping_no_fact_falls_back_to_dense(home, embedder, server):
    server.answers[BRIDGE_QUESTION] = []
    retriever = Retriever.open(home, embedder=embedder, recognizer=recognizer_for(server))
    result = retriever.query(BRIDGE_QUESTION, top_k=5, mode="hipporag")
    dense = Retriever.open(home, embedder=embedder).query(BRIDGE_QUESTION, top_k=5, mode="dense")
    assert result.mode == "dense" and result.fallback == KEPT_NONE and result.seeds == []
    assert ranking(result) == ranking(dense)
    assert server.count() == 1


def test_failing_endpoint_keeps_unfiltered_facts_and_never_shows_the_key(
    home, embedder, server, caplog
):
    caplog.set_level(logging.DEBUG)
    server.fail = "500"  # the error body echoes the Authorization header
    recognizer = recognizer_for(server, max_retries=2)
    result = Retriever.open(home, embedder=embedder, recognizer=recognizer).query(
        BRIDGE_QUESTION, top_k=5, mode="hipporag"
    )
    plain = Retriever.open(home, embedder=embedder).query(BRIDGE_QUESTION, top_k=5, mode="hipporag")

    assert server.count() == 3 and recognizer.retries == 2 and recognizer.failures == 1
    assert result.fallback.startswith("recognition filter failed: HTTP 500 after 3 request(s)")
    assert "Bearer ***" in result.fallback and "\n" not in result.fallback  # echoed, then masked
    assert ranking(result) == ranking(plain) and result.seeds == plain.seeds
    for text in (result.fallback, repr(recognizer), repr(recognizer.config), caplog.text):
        assert KEY not in text
    # nothing above DEBUG carries a traceback (the openai client's own DEBUG records may)
    assert not [
        r
        for r in caplog.records
        if r.levelno > logging.DEBUG and (r.exc_info or "Traceback" in r.getMessage())
    ]
    with pytest.raises(RecognitionError) as info:
        recognizer.select(BRIDGE_QUESTION, [tuple(BRIDGE_FACT)])
    assert (
        KEY not in str(info.value)
        and info.value.__cause__ is None
        and info.value.__suppress_context__
    )


def test_unknown_and_garbled_triples_are_dropped(server):
    facts = [
        ("Orlan Vesk", "born in", "Ostrania"),
        ("Keldor", "capital", "Brisk"),
        ("Ivo Lark", "paints", "harbour landscapes"),
    ]
    server.answers["q"] = [
        ["Nowhere", "is", "nothing"],
        "garbage",
        ["only", "two"],
        [1, 2, 3],
        ["Ivo Lark", "paints", "harbour landscapes"],
        ["keldor ", "Capital", "BRISK!"],
        ["Orlan Vesc", "born in", "Ostrania"],
        ["Ivo Lark", "paints", "harbour landscapes"],
    ]
    recognizer = recognizer_for(server)
    assert recognizer.select("q", facts) == [
        2,
        1,
        0,
    ]  # exact, normalised, close match; in the answer's order
    assert server.count() == 1  # garbled items are dropped, not re-asked
    assert match_facts(
        [["Keldor", "capitol", "Brisk"], ["Keldor", "has", "nothing at all"]], facts
    ) == [1]


def test_cache_means_a_repeated_query_sends_no_second_request(home, embedder, server):
    server.answers[BRIDGE_QUESTION] = [BRIDGE_FACT]
    recognizer = recognizer_for(server)
    retriever = Retriever.open(home, embedder=embedder, recognizer=recognizer)
    first = retriever.query(BRIDGE_QUESTION, top_k=5, mode="hipporag")
    again = retriever.query(BRIDGE_QUESTION, top_k=5, mode="hipporag")
    assert server.count() == 1 and recognizer.calls == 1 and recognizer.cache_hits == 1
    assert ranking(first) == ranking(again) and first.seeds == again.seeds
    facts = [tuple(BRIDGE_FACT), ("Keldor", "capital", "Brisk")]
    recognizer.select(BRIDGE_QUESTION, facts)
    recognizer.select(BRIDGE_QUESTION, facts[::-1])  # other facts: another question to the LLM
    assert server.count() == 3


def test_default_retriever_sends_nothing_and_ranks_as_without_a_recognizer(
    home, embedder, server, monkeypatch
):
    env = {
        "QORTEX_RECOGNITION_MODEL": "replay",
        "QORTEX_RECOGNITION_BASE_URL": server.base_url,
        "QORTEX_RECOGNITION_API_KEY": KEY,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert isinstance(make_recognizer(), LLMRecognizer) and make_recognizer({}) is None
    default = Retriever.open(home, embedder=embedder)
    none = Retriever.open(home, embedder=embedder, recognizer=None)
    server.unknown = (
        "all"  # a filter that keeps every candidate: with as many candidates as linked facts,
    )
    three = LLMRecognizer(
        RecognitionConfig(recognizer_for(server).config.llm, candidates=3)
    )  # its own count wins
    passthrough = Retriever.open(
        home, embedder=embedder, config=RetrievalConfig(recognition_candidates=7), recognizer=three
    )  # the walk must be the default one
    assert default.recognizer is None
    for question in (BRIDGE_QUESTION, PAINTER_QUESTION):
        for mode in ("auto", "hipporag"):
            sent = server.count()
            got = default.query(question, top_k=8, mode=mode)
            assert server.count() == sent
            assert ranking(got) == ranking(none.query(question, top_k=8, mode=mode))
            through = passthrough.query(question, top_k=8, mode=mode)
            assert ranking(got) == ranking(through) and got.seeds == through.seeds
            assert got.fallback is None and through.fallback is None
    assert (
        server.count() == 2
    )  # the pass-through filter: one request per question, the second mode cached
    assert all(
        len(r.candidates) == 3 for r in server.requests()
    )  # QORTEX_RECOGNITION_CANDIDATES, not the 7


def test_config_from_env_falls_back_to_the_llm_settings():
    cfg = RecognitionConfig.from_env(
        {
            "QORTEX_LLM_BASE_URL": "http://localhost:8000/v1",
            "QORTEX_LLM_API_KEY": KEY,
            "QORTEX_LLM_MODEL": "m",
            "QORTEX_RECOGNITION_TIMEOUT_S": "3",
        }
    )
    assert (cfg.llm.model, cfg.llm.base_url, cfg.llm.api_key, cfg.llm.timeout_s) == (
        "m",
        "http://localhost:8000/v1",
        KEY,
        3.0,
    )
    assert cfg.candidates == 5 and cfg.llm.prompt_version == PROMPT_VERSION and KEY not in repr(cfg)
    own = RecognitionConfig.from_env(
        {
            "QORTEX_RECOGNITION_MODEL": "r",
            "QORTEX_RECOGNITION_BASE_URL": "http://a/v1",
            "QORTEX_LLM_BASE_URL": "http://b/v1",
            "QORTEX_LLM_MODEL": "m",
        }
    )
    assert (own.llm.model, own.llm.base_url) == ("r", "http://a/v1")
    with pytest.raises(ConfigError, match="not configured"):
        RecognitionConfig.from_env({"QORTEX_RECOGNITION_MODEL": "r"})
    with pytest.raises(ConfigError, match="QORTEX_RECOGNITION_TIMEOUT_S"):
        RecognitionConfig.from_env(
            {"QORTEX_LLM_BASE_URL": "http://b/v1", "QORTEX_RECOGNITION_TIMEOUT_S": "soon"}
        )


@pytest.mark.parametrize(
    "argv", [["query", BRIDGE_QUESTION], ["eval", "--questions", "q.json", "--corpus", "c.json"]]
)
def test_cli_recognition_without_configuration_is_one_error_line(argv, home, monkeypatch, capsys):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    assert main([*argv, "--home", str(home), "--recognition"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert (
        line.startswith("qortex: error: recognition filter is not configured")
        and "QORTEX_RECOGNITION_MODEL" in line
    )


def test_cli_query_with_recognition_filters_through_the_endpoint(home, server, monkeypatch, capsys):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QORTEX_RECOGNITION_BASE_URL", server.base_url)
    monkeypatch.setenv("QORTEX_RECOGNITION_API_KEY", KEY)
    server.answers[BRIDGE_QUESTION] = [BRIDGE_FACT]
    assert (
        main(
            [
                "query",
                BRIDGE_QUESTION,
                "--home",
                str(home),
                "--mode",
                "hipporag",
                "--recognition",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert server.count() == 1
    assert {s["via"] for s in out["seeds"] if s["via"]} == {"(Ostrania, governed from, Velmora)"}


def test_eval_reports_whether_the_filter_was_on_and_its_calls(
    toy_dataset, toy_home, toy_report, embedder, server
):
    assert toy_report["recognition"] == {"enabled": False, "llm_calls": 0}
    server.unknown = "all"
    recognizer = recognizer_for(server)
    report = run_evaluation(
        EvalSetup(
            toy_dataset.questions,
            toy_dataset.corpus,
            toy_home,
            toy_dataset.openie,
            "recorded",
            ("dense", "hipporag", "auto"),
        ),
        embedder=embedder,
        recognizer=recognizer,
    )
    assert report["recognition"] == {"enabled": True, "llm_calls": server.count()}
    assert (
        server.count() == report["questions"]
    )  # dense asks nothing; auto reuses hipporag's cached answers


def test_replay_server_runs_by_hand_and_counts_requests(tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({BRIDGE_QUESTION: [BRIDGE_FACT]}))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.recognition_loopback",
            "--answers",
            str(answers),
            "--port",
            "0",
        ],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        recognizer = LLMRecognizer(
            RecognitionConfig(
                LLMConfig(model="replay", base_url=base_url, timeout_s=5.0, max_retries=0)
            )
        )
        facts = [("Orlan Vesk", "born in", "Ostrania"), tuple(BRIDGE_FACT)]
        assert recognizer.select(BRIDGE_QUESTION, facts) == [1]
        assert recognizer.select("a query nobody recorded", facts) == []
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "2 request(s), 1 for queries without a recorded answer" in err


def test_a_custom_recognizer_that_raises_falls_back_to_unfiltered_facts(home, embedder):
    class Broken:
        def select(self, query, facts):
            raise TimeoutError("the model did not answer")

    result = Retriever.open(home, embedder=embedder, recognizer=Broken()).query(
        BRIDGE_QUESTION, top_k=5, mode="hipporag"
    )
    plain = Retriever.open(home, embedder=embedder).query(BRIDGE_QUESTION, top_k=5, mode="hipporag")
    assert result.fallback == "recognition filter failed: TimeoutError"
    assert ranking(result) == ranking(plain) and result.seeds == plain.seeds
