"""Shared fixtures: one real bundled embedder per session and a tiny HippoRAG-format dataset.

Other test modules may import from here; keep the names stable: the fixtures ``embedder``
(session), ``toy_dataset``, ``toy_home`` (a private copy of an indexed home) and ``toy_report``;
``write_toy_dataset``, ``openie_document`` and the ``TOY_*`` / ``BRIDGE_*`` data.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests assert behaviour, not speed: a per-example deadline flakes on a loaded machine.
settings.register_profile("qortex", deadline=None)
settings.load_profile("qortex")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault(
    "HF_HUB_DISABLE_PROGRESS_BARS", "1"
)  # as the CLI sets it: in-process CLI runs see its stderr


def _restoring_dagster_home():
    before = os.environ.get("DAGSTER_HOME")
    yield
    if before is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = before


# ``run_ingest`` exports DAGSTER_HOME for the instance it opens: no test sees another's, and no
# module sees what a module-scoped fixture's run exported (autouse fixtures of a scope are set up
# before that scope's other fixtures).
_dagster_home_restored = pytest.fixture(autouse=True)(_restoring_dagster_home)
_dagster_home_restored_per_module = pytest.fixture(autouse=True, scope="module")(
    _restoring_dagster_home
)


# A toy multi-hop corpus of invented names (so the embedder has no prior knowledge).
# The bridge question needs "Ostrania", which never names Orlan Vesk nor says "capital";
# distractors about other countries' capitals say both "capital" and "country".
TOY_CORPUS: list[dict] = [
    {"title": "Orlan Vesk", "text": "Orlan Vesk is a composer. He was born in Ostrania."},
    {"title": "Ostrania", "text": "Ostrania is governed from Velmora, where its parliament sits."},
    {"title": "Dravia", "text": "Dravia is a country whose capital city is Lune."},
    {"title": "Keldor", "text": "The capital of the country Keldor is Brisk."},
    {
        "title": "Tessa Brin",
        "text": "Tessa Brin is a composer who was born in Lune, the capital of Dravia.",
    },
    {"title": "Miravel Hall", "text": "Miravel Hall is a concert venue in the city of Lune."},
    {"title": "Ivo Lark", "text": "Ivo Lark is a painter known for harbour landscapes."},
    {
        "title": "Serra",
        "text": "Serra is a country in the south, and the capital of the country is Mond.",
    },
]

# OpenIE triples per corpus entry (HippoRAG's recorded-LLM format), in corpus order.
TOY_TRIPLES: list[list[list[str]]] = [
    [["Orlan Vesk", "is a", "composer"], ["Orlan Vesk", "born in", "Ostrania"]],
    [["Ostrania", "governed from", "Velmora"], ["parliament", "sits in", "Velmora"]],
    [["Dravia", "capital city", "Lune"]],
    [["Keldor", "capital", "Brisk"]],
    [
        ["Tessa Brin", "is a", "composer"],
        ["Tessa Brin", "born in", "Lune"],
        ["Lune", "capital of", "Dravia"],
    ],
    [["Miravel Hall", "located in", "Lune"]],
    [["Ivo Lark", "paints", "harbour landscapes"]],
    [["Serra", "capital", "Mond"]],
]

BRIDGE_QUESTION = "What is the capital of the country where Orlan Vesk was born?"
BRIDGE_GOLD = ("Orlan Vesk", "Ostrania")  # titles; "Ostrania" is the bridge passage


def _paragraphs(gold_titles: set[str]) -> list[dict]:
    return [
        {
            "idx": n,
            "title": row["title"],
            "paragraph_text": row["text"],
            "is_supporting": row["title"] in gold_titles,
        }
        for n, row in enumerate(TOY_CORPUS)
    ]


TOY_QUESTIONS: list[dict] = [
    {
        "id": "q_bridge",
        "question": BRIDGE_QUESTION,
        "answer": "Velmora",
        "paragraphs": _paragraphs(set(BRIDGE_GOLD)),
    },
    {
        "id": "q_painter",
        "question": "What does the painter Ivo Lark paint?",
        "answer": "harbour landscapes",
        "paragraphs": _paragraphs({"Ivo Lark"}),
    },
]


def openie_document(corpus: list[dict], triples: list[list[list[str]]]) -> dict:
    """The HippoRAG ``openie_results_ner_*.json`` structure for ``corpus``."""
    docs = []
    for n, (row, tri) in enumerate(zip(corpus, triples)):
        entities = sorted({t[0] for t in tri} | {t[2] for t in tri})
        docs.append(
            {
                "idx": n,
                "title": row["title"],
                "text": row["text"],
                "passage": f"{row['title']}\n{row['text']}",
                "extracted_entities": entities,
                "extracted_triples": tri,
            }
        )
    return {"docs": docs, "avg_ent_chars": 10.0, "avg_ent_words": 2.0}


@dataclass(frozen=True)
class ToyDataset:
    """Paths of a toy dataset written to disk."""

    questions: Path
    corpus: Path
    openie: Path


def write_file(folder: Path, name: str, body) -> Path:
    """Write ``body`` (bytes, text, or anything JSON) to ``folder / name``."""
    path = folder / name
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def write_toy_dataset(folder: Path) -> ToyDataset:
    """Write the toy questions, corpus and OpenIE files into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = ToyDataset(
        folder / "toy.json", folder / "toy_corpus.json", folder / "openie_results_ner_toy.json"
    )
    paths.questions.write_text(json.dumps(TOY_QUESTIONS))
    paths.corpus.write_text(json.dumps(TOY_CORPUS))
    paths.openie.write_text(json.dumps(openie_document(TOY_CORPUS, TOY_TRIPLES)))
    return paths


@pytest.fixture(scope="session")
def embedder():
    """The real bundled all-MiniLM-L6-v2, loaded once per session."""
    from qortex_core.embed import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    model.embed(["warm up"])
    return model


@pytest.fixture
def toy_dataset(tmp_path: Path) -> ToyDataset:
    """The toy dataset written under this test's tmp_path."""
    return write_toy_dataset(tmp_path / "data")


@pytest.fixture(scope="session")
def _toy_home_session(tmp_path_factory, embedder) -> tuple[Path, dict]:
    from qortex_bench.evaluate import EvalSetup, run_evaluation

    root = tmp_path_factory.mktemp("toy")
    data = write_toy_dataset(root / "data")
    home = root / "home"
    report = run_evaluation(
        EvalSetup(data.questions, data.corpus, home, data.openie, "recorded"), embedder=embedder
    )
    return home, report


@pytest.fixture
def toy_home(_toy_home_session, tmp_path: Path) -> Path:
    """A private copy of a data home indexed from the toy dataset, with one published snapshot."""
    home = tmp_path / "home"
    shutil.copytree(_toy_home_session[0], home)
    return home


@pytest.fixture(scope="session")
def toy_report(_toy_home_session) -> dict:
    """The report of ``run_evaluation`` on the toy dataset (recorded OpenIE, both modes)."""
    return _toy_home_session[1]


# Modules whose tests start real servers, SIGKILL processes, run the CLI in subprocesses,
# materialise the whole asset graph or read the benchmark data: the `slow` tier. The fast tier
# (`bash scripts/test.sh -m "not slow"`) runs everything else. A module can also mark itself
# with `pytestmark = pytest.mark.slow`.
SLOW_MODULES = {
    "bench/test_eval.py",
    "bench/test_eval_gold.py",
    "bench/test_locomo.py",
    "bench/test_ablation.py",
    "bench/test_bench_query.py",
    "bench/test_locomo_ablation.py",
    "ingest/test_llm_extract.py",
    "ingest/test_secret_scan.py",
    "ingest/test_shards.py",
    "ingest/test_synonyms_minilm.py",
    "memory/test_agent_cli.py",
    "memory/test_agent_consolidate.py",
    "memory/test_memory_cli.py",
    "memory/test_memory_dagster.py",
    "memory/test_memory_factors.py",
    "memory/test_memory_scenario.py",
    "pipelines/test_cli_errors.py",
    "pipelines/test_dask_interrupts.py",
    "pipelines/test_failure_budget.py",
    "pipelines/test_mcp.py",
    "pipelines/test_mcp_memory.py",
    "pipelines/test_mcp_http.py",
    "pipelines/test_mcp_tools.py",
    "pipelines/test_one_home.py",
    "pipelines/test_pipeline_assets.py",
    "pipelines/test_pipeline_cli.py",
    "pipelines/test_pipeline_llm.py",
    "pipelines/test_pipeline_webserver.py",
    "pipelines/test_sharded_pipeline.py",
    "query/test_recognition.py",
    "reliability/test_checks_fail_runs.py",
    "reliability/test_faults_config.py",
    "reliability/test_faults_sources.py",
    "reliability/test_forgetting_reach.py",
    "reliability/test_reliability_concurrency.py",
    "reliability/test_reliability_kill.py",
    "reliability/test_records_concurrency.py",
    "reliability/test_soak.py",
    "reliability/test_reliability_query.py",
    "storage/test_purge.py",
    "storage/test_writer_lock.py",
    "test_imports.py",
}


# Single tests of the slow tier (module path :: function name, every parametrization): each
# takes more than 10 s of a fast-tier run on a 2-core machine.
SLOW_TESTS = {
    "bench/test_scale.py::test_calibration_reads_a_busy_machine_as_slower",
    "memory/test_supersede.py::test_cli_history_and_memories_show_the_links",
    "ops/test_archive.py::test_round_trip_answers_every_mode_alike",
    "query/test_ppr_order.py::test_snapshot_order_does_not_change_answers",
    "reliability/test_faults_arguments.py::test_every_numeric_option_parses_once_or_is_one_line",
}


def pytest_collection_modifyitems(config, items) -> None:
    here = Path(__file__).resolve().parent
    collected: dict[str, set[str]] = {}  # module path -> names of its collected tests
    for item in items:
        module = Path(item.fspath).resolve().relative_to(here).as_posix()
        name = getattr(item, "originalname", item.name)
        collected.setdefault(module, set()).add(name)
        if module in SLOW_MODULES or f"{module}::{name}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    stale = [
        entry
        for entry in sorted(SLOW_TESTS)
        if entry.split("::")[0] in collected
        and entry.split("::")[1] not in collected[entry.split("::")[0]]
    ]
    if stale:  # a renamed test would silently join the fast tier again
        raise pytest.UsageError(f"SLOW_TESTS names tests that do not exist: {', '.join(stale)}")
