"""The ingest pipeline with the LLM extractor against a real OpenAI-protocol server on loopback.

The server replays recorded GPT-3.5 OpenIE and injects a 429, a 500, a timeout
and invalid JSON. Through Dagster: every chunk ends extracted or recorded as
failed, the failure is visible in metadata and an asset check, the next run
retries only the failed chunk, and a run after that calls nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize
from openai_loopback import OpenAILoopback, load_recorded

from assets import INGEST_ASSETS
from pipelines.checks import INGEST_CHECKS
from pipelines.resources import EmbedderResource, ExtractorResource, SourceResource, StoreResource
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import FACTS, LanceStore

OPENIE = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "benchmarks"
    / "musique_100"
    / "openie_results_ner_gpt-3.5-turbo-1106.json"
)
KEY = "loopback-pipeline-key-0123456789"
EMBEDDERS: dict[str, object] = {}

pytestmark = pytest.mark.skipif(not OPENIE.exists(), reason=f"benchmark data not found at {OPENIE}")


class SessionEmbedder(EmbedderResource):
    def get(self):
        return EMBEDDERS["session"]


def _materialize(resources: dict, instance: DagsterInstance) -> tuple[dict, dict]:
    result = materialize(
        list(INGEST_ASSETS) + list(INGEST_CHECKS), resources=resources, instance=instance
    )
    assert result.success
    metadata = {
        e.materialization.asset_key.to_user_string(): {
            k: v.value for k, v in e.materialization.metadata.items()
        }
        for e in result.get_asset_materialization_events()
    }
    return metadata, {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_llm_pipeline_survives_faults_records_failures_and_retries_only_them(
    tmp_path: Path, monkeypatch, embedder
) -> None:
    records = load_recorded(OPENIE, 4)
    source = tmp_path / "src" / "musique"
    source.mkdir(parents=True)
    (source / "corpus.json").write_text(
        json.dumps([{"title": r.title, "text": r.text} for r in records])
    )
    for name, value in (
        ("QORTEX_LLM_TIMEOUT_S", "1.5"),
        ("QORTEX_LLM_MAX_RETRIES", "3"),
        ("QORTEX_LLM_CONCURRENCY", "2"),
        ("QORTEX_LLM_PRICE_IN_PER_1K", "0.001"),
        ("QORTEX_LLM_PRICE_OUT_PER_1K", "0.002"),
        ("QORTEX_MAX_FAILED_SHARE", "0.5"),  # 1 transient failure of 4 stays within budget
    ):
        monkeypatch.setenv(name, value)
    EMBEDDERS["session"] = embedder
    home = tmp_path / "home"
    instance = DagsterInstance.ephemeral()
    with OpenAILoopback(records, api_key=KEY, timeout_sleep_s=2.5) as srv:
        resources = {
            "store": StoreResource(home=str(home)),
            "source": SourceResource(path=str(source.parent)),
            "embedder": SessionEmbedder(),
            "extractor": ExtractorResource(
                kind="llm", model="gpt-3.5-turbo-1106", base_url=srv.base_url, api_key=KEY
            ),
        }
        srv.script(records[0].title, ["429", "500"])
        srv.script(records[1].title, ["timeout"])
        srv.always(records[2].title, "invalid_json")

        meta, checks = _materialize(resources, instance)
        ex = meta["extractions"]
        assert (ex["chunks"], ex["extracted"], ex["failed"]) == (4, 3, 1)
        assert ex["llm_calls"] >= 4 and ex["prompt_tokens"] > 0 and ex["estimated_cost_usd"] > 0
        assert checks["every_chunk_accounted"] is True and checks["no_failed_extractions"] is False
        assert checks["within_failure_budget"] is True  # transient, below budget: run succeeds
        assert (
            srv.count(records[0].title) >= 3 and srv.count(records[1].title) >= 2
        )  # faults were retried
        facts = LanceStore.open(home).read(FACTS)
        subjects = {s.lower() for s in facts["subject"].to_pylist()}
        assert {
            t[0].lower() for t in records[0].triples
        } <= subjects  # the recorded extraction arrived
        assert (
            snap.load(home).manifest["counts"]["passages"] == 4
        )  # the failed chunk is still a passage

        srv.always(records[2].title, None)
        srv.reset_log()
        meta, checks = _materialize(resources, instance)
        assert (
            srv.count() == srv.count(records[2].title) >= 1
        )  # only the failed chunk is asked again
        assert (
            meta["extractions"]["extracted"],
            meta["extractions"]["failed"],
            meta["extractions"]["cache_hits"],
        ) == (1, 0, 3)
        assert checks["no_failed_extractions"] is True

        srv.reset_log()
        meta, _ = _materialize(resources, instance)
        assert srv.count() == 0 and meta["extractions"]["llm_calls"] == 0
        assert meta["embeddings"]["texts_embedded"] == 0

    # the API key is in no Dagster event or run record, no metadata value and no file under the data home
    runs = instance.get_runs()
    assert len(runs) == 3
    for run in runs:
        assert KEY not in repr(run) and KEY not in repr(instance.all_logs(run.run_id))
    assert KEY not in json.dumps(meta, default=str)
    assert [p for p in home.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()] == []
