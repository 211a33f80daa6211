"""The teleportation_factors asset and its feedback sensor on a real Dagster instance."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterInstance, RunRequest, SkipReason, build_sensor_context

from pipelines.definitions import build_definitions
from pipelines.resources import StoreResource
from pipelines.sensors import make_feedback_sensor
from qortex_cli.runs.local import materialize_factors
from qortex_core.feedback.events import QueryLog, ResultTrace, record_feedback
from qortex_core.feedback.factors import load_factors
from qortex_core.storage.store import LanceStore


def _judge(home, accepted=(), rejected=()):
    store = LanceStore.open(home)
    log = QueryLog(store)
    log.record(
        "q_1",
        "v1",
        [ResultTrace("p_a", "passage", ("c_up",)), ResultTrace("p_b", "passage", ("c_down",))],
    )
    record_feedback(store, log, "q_1", accepted=list(accepted), rejected=list(rejected))


def test_definitions_register_asset_job_and_sensor(tmp_path):
    defs = build_definitions({}, resources={"store": StoreResource(home=str(tmp_path))})
    assert defs.resolve_job_def("factors").asset_layer is not None
    assert "teleportation_factors" in {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert "teleportation_factors" not in {n.name for n in defs.resolve_job_def("ingest").nodes}


def test_sensor_requests_a_run_only_when_events_arrive(tmp_path):
    sensor_def = make_feedback_sensor({})
    store = StoreResource(home=str(tmp_path))
    with DagsterInstance.ephemeral() as instance:
        first = sensor_def(build_sensor_context(instance=instance, resources={"store": store}))
        assert isinstance(first, SkipReason)
        _judge(tmp_path, accepted=["p_a"])
        ctx = build_sensor_context(instance=instance, resources={"store": store})
        request = sensor_def(ctx)
        assert isinstance(request, RunRequest)
        again = sensor_def(
            build_sensor_context(instance=instance, resources={"store": store}, cursor=ctx.cursor)
        )
        assert isinstance(again, SkipReason)
        _judge(tmp_path, rejected=["p_b"])
        newer = sensor_def(
            build_sensor_context(instance=instance, resources={"store": store}, cursor=ctx.cursor)
        )
        assert isinstance(newer, RunRequest) and newer.run_key != request.run_key


def test_materialize_in_process_reports_extremes(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "DAGSTER_HOME", str(tmp_path / "dagster")
    )  # the local instance sets it; restored afterwards
    _judge(tmp_path, accepted=["p_a"], rejected=["p_b"])
    summary = materialize_factors(tmp_path, dagster_home=tmp_path / "dagster")
    assert summary["via"] == "dagster" and summary["folded"] == 2 and not summary["skipped"]
    assert summary["boosted"] == [["c_up", pytest.approx(1.1)]]
    assert summary["suppressed"] == [["c_down", pytest.approx(0.95)]]
    assert load_factors(LanceStore.open(tmp_path))[0] == {
        "c_up": pytest.approx(1.1),
        "c_down": pytest.approx(0.95),
    }
    assert materialize_factors(tmp_path, dagster_home=tmp_path / "dagster")["skipped"]
    instance = DagsterInstance.from_config(str(tmp_path / "dagster"))
    assert instance.get_latest_materialization_event(AssetKey("teleportation_factors")) is not None
