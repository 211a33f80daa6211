"""The failure budget: a bad API key (HTTP 401) fails the run, publishes nothing, and the previous
snapshot keeps answering; the budget's arithmetic; an unchanged re-run publishes nothing new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from openai_loopback import OpenAILoopback, load_recorded

from pipelines.resources import EmbedderResource
from qortex_cli.runs.local import IngestFailed, run_ingest
from qortex_core.errors import ConfigError
from qortex_core.ingest.budget import FailureBudget, is_permanent, judge
from qortex_core.storage import snapshot as snap

OPENIE = (
    Path(__file__).resolve().parents[3]
    / "shared/benchmarks/musique_100/openie_results_ner_gpt-3.5-turbo-1106.json"
)
EMBEDDERS: dict[str, object] = {}


class SessionEmbedder(EmbedderResource):
    def get(self):
        return EMBEDDERS["session"]


def test_budget_arithmetic():
    budget = FailureBudget()
    assert judge([], 100, budget).passed
    assert judge(["HTTP 429 after 5 request(s): slow down"] * 5, 100, budget).passed  # 5 %
    over = judge(["APITimeoutError after 5 request(s)"] * 6, 100, budget)
    assert not over.passed and "6 of 100" in over.message and "5%" in over.message
    auth = judge(["HTTP 401 after 1 request(s): invalid api key"], 1000, budget)
    assert not auth.passed and auth.permanent == 1 and "retrying will not fix" in auth.message
    assert judge(["HTTP 401 ..."], 1000, FailureBudget(0.05, allow_permanent=True)).passed
    assert FailureBudget.from_env({"QORTEX_ALLOW_PERMANENT_FAILURES": "on"}).allow_permanent
    assert is_permanent("skipped after an earlier HTTP 403: forbidden")
    assert not is_permanent("HTTP 500 after 5 request(s): HTTP 4012 is not a status")
    with pytest.raises(ConfigError):
        FailureBudget.from_env({"QORTEX_MAX_FAILED_SHARE": "lots"})
    assert FailureBudget.from_env({"QORTEX_MAX_FAILED_SHARE": "0.2"}).max_failed_share == 0.2


@pytest.mark.skipif(not OPENIE.exists(), reason=f"benchmark data not found at {OPENIE}")
def test_bad_key_fails_the_run_and_the_previous_snapshot_keeps_answering(
    tmp_path: Path, monkeypatch, embedder
) -> None:
    records = load_recorded(OPENIE, 4)
    source = tmp_path / "src" / "musique"
    source.mkdir(parents=True)
    rows = [{"title": r.title, "text": r.text} for r in records]
    (source / "corpus.json").write_text(json.dumps(rows))
    home, dagster_home = tmp_path / "home", tmp_path / "home" / "dagster"
    EMBEDDERS["session"] = embedder
    resources = {"embedder": SessionEmbedder()}
    for name in ("QORTEX_LLM_API_KEY", "OPENAI_API_KEY", "QORTEX_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))  # run_ingest exports it: restored
    first = run_ingest(source, home, dagster_home, resources, progress=False)
    assert first.summary["snapshot_status"] == "published"
    assert first.summary["extractor"].startswith("offline") and first.summary["llm_calls"] == 0
    assert first.summary["embedder"] == embedder.name
    before = snap.list_versions(home)

    again = run_ingest(source, home, dagster_home, resources, progress=False)
    assert again.summary["snapshot_status"] == "unchanged"  # an unchanged re-run adds nothing
    assert snap.list_versions(home) == before and again.summary["snapshot"] == before[-1]

    with OpenAILoopback(records, api_key="the-right-key-0123456789") as srv:
        monkeypatch.setenv("QORTEX_EXTRACTOR", "auto")  # a key is set: auto picks the LLM
        monkeypatch.setenv("OPENAI_API_KEY", "a-wrong-key-0123456789")
        monkeypatch.setenv("QORTEX_LLM_BASE_URL", srv.base_url)
        with pytest.raises(IngestFailed) as err:
            run_ingest(source, home, dagster_home, resources, progress=False)
        assert srv.count() >= 1 and all(r.outcome == "401" for r in srv.log)
    message = str(err.value)
    assert "4 of 4 chunks failed extraction" in message and "HTTP 401" in message, message
    assert f"{before[-1]} still answers" in message and "\n" not in message
    assert "a-wrong-key" not in message
    assert snap.list_versions(home) == before and snap.latest_name(home) == before[-1]
    runs = DagsterInstance.from_config(str(dagster_home)).get_runs()
    assert [r.status for r in runs][:1] == [DagsterRunStatus.FAILURE]  # red in the UI
