"""The sharded ingest job (QORTEX_SHARDS > 1): shard steps in parallel processes with the
multiprocess executor and on the workers of a dask.distributed cluster on loopback, and the
snapshot equal to a single-process one-shard run's.

Real parts: LanceDB homes under tmp_path, a persistent Dagster instance (SQLite), spawned step
processes, a dask LocalCluster of two worker processes on 127.0.0.1, the offline extractor and
the bundled samples.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dagster import AssetKey, Definitions, execute_job, reconstructable
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._core.execution.api import create_execution_plan
from snapshot_graph import snapshot_graph

from pipelines.dask_executor import StepArgs, run_step
from pipelines.definitions import build_definitions
from qortex_cli.runs.executed import ingest_job
from qortex_cli.runs.local import local_instance, run_ingest
from qortex_core.errors import ConfigError
from qortex_core.ingest.shards import shard_of

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "docs"
SHARDED = ("chunks", "extractions", "embeddings")
SAME = {  # merged asset -> metadata that must equal the one-shard run's
    "chunks": ("chunks", "documents", "new_chunks"),
    "extractions": ("chunks", "extracted", "failed", "llm_calls"),
    "embeddings": ("passages", "concepts", "facts", "rules", "texts_embedded"),
    "synonym_edges": ("synonym_edges",),
    "graph_snapshot": ("nodes", "edges", "status"),
}


def test_sharded_definitions_load_with_checks_and_budget_gate() -> None:
    defs = build_definitions({"QORTEX_SHARDS": "3", "QORTEX_EXECUTOR": "dask"})
    Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("ingest")
    assert job.executor_def.name == "dask"
    names = {n.name for n in job.graph.node_defs}
    assert {f"{s}_s{i}" for s in SHARDED for i in range(3)} | set(SHARDED) <= names
    graph = defs.resolve_asset_graph()
    assert len(graph.asset_check_keys) == 5  # the same checks on the same asset keys
    plan = create_execution_plan(job)
    inputs = {
        step.key: {k for i in step.step_inputs for k in i.dependency_keys}
        for level in plan.get_steps_to_execute_by_level()
        for step in level
    }
    assert inputs["chunks"] == {"chunks_s0", "chunks_s1", "chunks_s2"}
    assert "extractions_within_failure_budget" in inputs["embeddings_s0"]  # the gate holds
    one = build_definitions({}).resolve_job_def("ingest")
    assert not any("_s0" in n.name for n in one.graph.node_defs)  # default: today's graph
    with pytest.raises(ConfigError, match="QORTEX_SHARDS='0'"):
        build_definitions({"QORTEX_SHARDS": "0"})


def test_dask_step_after_a_failed_step_does_not_run() -> None:
    # a failed upstream step leaves an event list without STEP_SUCCESS: the step is not run
    # (were it run, the empty arguments would raise)
    assert run_step([[]], StepArgs(())) == []


def _env(monkeypatch, tmp_path: Path, name: str, embedder: str, **extra: str) -> Path:
    values = {
        "QORTEX_HOME": str(tmp_path / name / "home"),
        "QORTEX_SOURCE_DIR": str(SAMPLES),
        "QORTEX_EXTRACTOR": "offline",
        "QORTEX_EMBEDDER": embedder,
        "DAGSTER_HOME": str(tmp_path / name / "dagster"),
        **extra,
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return tmp_path / name


def _metadata(result) -> dict[str, dict]:
    return {
        e.materialization.asset_key.to_user_string(): {
            k: v.value for k, v in e.materialization.metadata.items()
        }
        for e in result.get_asset_materialization_events()
    }


def _sharded_run(folder: Path) -> dict[str, dict]:
    # Dagster keeps the last reconstructed job per process (an lru_cache on ReconstructableJob):
    # without this, the second test would run the first test's job, executor included
    ReconstructableJob.get_definition.cache_clear()
    ReconstructableJob.get_repository_definition.cache_clear()
    instance = local_instance(folder / "dagster")
    with execute_job(reconstructable(ingest_job), instance, raise_on_error=True) as result:
        assert result.success
        return _metadata(result)


@pytest.mark.parametrize(("executor", "embedder"), [("multiprocess", "hash:64"), ("dask", "")])
def test_sharded_run_on_parallel_workers_equals_single_process_run(
    monkeypatch, tmp_path: Path, executor: str, embedder: str
) -> None:
    assert {shard_of(d, 2) for d in ("science/warsaw.md", "cooking/bread.md")} == {0, 1}
    one = _env(monkeypatch, tmp_path, "one", embedder or "bundled")
    single = run_ingest(SAMPLES, one / "home", one / "dagster", progress=False, env=os.environ)

    many = _env(
        monkeypatch,
        tmp_path,
        "many",
        embedder or "bundled",
        QORTEX_SHARDS="2",
        QORTEX_EXECUTOR=executor,
        QORTEX_MAX_CONCURRENT="2",
    )
    cluster = None
    if executor == "dask":  # two worker processes on loopback; they inherit the env set above
        from dask.distributed import LocalCluster

        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        monkeypatch.setenv("QORTEX_DASK_ADDRESS", cluster.scheduler_address)
    try:
        meta = _sharded_run(many)
    finally:
        if cluster is not None:
            cluster.close()

    workers = {stage: {meta[f"{stage}_s{i}"]["worker"] for i in range(2)} for stage in SHARDED}
    pids = {meta[f"{stage}_s{i}"]["pid"] for stage in SHARDED for i in range(2)}
    assert os.getpid() not in pids  # every shard ran in another process
    assert all(len(w) == 2 for w in workers.values()), workers  # each stage on two workers
    if cluster is not None:  # dask workers on loopback, not step subprocesses
        assert all(w.startswith("tcp://127.0.0.1:") for s in workers.values() for w in s), workers
    assert sum(meta[f"chunks_s{i}"]["chunks"] for i in range(2)) == meta["chunks"]["chunks"]
    for asset, keys in SAME.items():
        assert {k: meta[asset][k] for k in keys} == {k: single.metadata[asset][k] for k in keys}
    assert snapshot_graph(many / "home") == snapshot_graph(one / "home")
    instance = local_instance(many / "dagster")
    assert instance.get_latest_materialization_event(AssetKey("graph_snapshot")) is not None


def test_qortex_ingest_runs_shards_on_the_configured_executor(monkeypatch, tmp_path: Path) -> None:
    # `qortex ingest` (run_ingest) with QORTEX_EXECUTOR=dask and no address: the executor starts
    # a LocalCluster of QORTEX_MAX_CONCURRENT worker processes for the run and closes it after
    one = _env(monkeypatch, tmp_path, "one", "hash:64")
    single = run_ingest(SAMPLES, one / "home", one / "dagster", progress=False)
    many = _env(
        monkeypatch,
        tmp_path,
        "many",
        "hash:64",
        QORTEX_SHARDS="2",
        QORTEX_EXECUTOR="dask",
        QORTEX_MAX_CONCURRENT="2",
    )
    monkeypatch.delenv("QORTEX_HOME")  # the command line names the home and the source
    monkeypatch.delenv("QORTEX_SOURCE_DIR")
    outcome = run_ingest(SAMPLES, many / "home", many / "dagster", progress=False)
    assert "QORTEX_HOME" not in os.environ  # the run's variables were unset again
    workers = {outcome.metadata[f"{s}_s{i}"]["worker"] for s in SHARDED for i in range(2)}
    assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
    keys = ("chunks", "extracted", "concepts", "facts", "synonym_edges", "snapshot_status")
    assert {k: outcome.summary[k] for k in keys} == {k: single.summary[k] for k in keys}
    assert snapshot_graph(many / "home") == snapshot_graph(one / "home")


def test_existing_scheduler_writes_the_command_lines_home(monkeypatch, tmp_path: Path) -> None:
    # workers started elsewhere (their own QORTEX_HOME and QORTEX_SOURCE_DIR): `qortex ingest
    # SRC --home H` must still read SRC and write H, never the workers' home
    from dask.distributed import LocalCluster

    decoy = _env(monkeypatch, tmp_path, "decoy", "hash:16")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.md").write_text("# Alice\n\nAlice met Bob in Paris in May.\n")
    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    try:
        here = _env(monkeypatch, tmp_path, "here", "hash:16", QORTEX_EXECUTOR="dask")
        monkeypatch.setenv("QORTEX_DASK_ADDRESS", cluster.scheduler_address)
        monkeypatch.delenv("QORTEX_HOME")
        monkeypatch.delenv("QORTEX_SOURCE_DIR")
        ReconstructableJob.get_definition.cache_clear()
        outcome = run_ingest(tmp_path / "src", here / "home", here / "dagster", progress=False)
    finally:
        cluster.close()
    assert (outcome.summary["documents"], outcome.summary["snapshot_status"]) == (1, "published")
    assert snapshot_graph(here / "home")  # the snapshot is in the command line's home
    assert not (decoy / "home").exists()  # the workers' own home was never opened
