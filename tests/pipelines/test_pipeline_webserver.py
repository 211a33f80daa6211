"""The real Dagster webserver on loopback: list the assets and launch the ingest job through GraphQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WEBSERVER = Path(sys.executable).parent / "dagster-webserver"
INGEST_ASSETS = {
    "documents",
    "chunks",
    "extractions",
    "embeddings",
    "synonym_edges",
    "graph_snapshot",
}

LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
STATUS = """query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"""
MATERIALIZATIONS = (
    """{ assetNodes { assetKey { path } assetMaterializations(limit: 1) { runId } } }"""
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(url: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload
    return payload["data"]


def _wait_up(url: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"dagster-webserver exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=5):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    pytest.fail(f"dagster-webserver did not come up: {log.read_text()[-2000:]}")


@pytest.fixture
def webserver(tmp_path: Path):
    """``dagster-webserver -w workspace.yaml`` on a free loopback port with a temp instance and data home."""
    dagster_home, source, home = (
        tmp_path / "dagster",
        tmp_path / "src" / "science",
        tmp_path / "home",
    )
    dagster_home.mkdir()
    source.mkdir(parents=True)
    (source / "warsaw.md").write_text(
        "# Warsaw\n\nWarsaw is the capital of Poland. Marie Curie was born in Warsaw.\n"
    )
    (source / "paris.md").write_text(
        "# Paris\n\nParis is the capital of France. The Sorbonne is in Paris.\n"
    )
    # runs launch at once (DefaultRunCoordinator) so the test needs no daemon; the repo's dagster.yaml queues them
    (dagster_home / "dagster.yaml").write_text(
        f"storage:\n  sqlite:\n    base_dir: {dagster_home}\n"
        "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: DefaultRunCoordinator\n"
        "telemetry:\n  enabled: false\n"
    )
    env = dict(
        os.environ,
        DAGSTER_HOME=str(dagster_home),
        QORTEX_HOME=str(home),
        QORTEX_SOURCE_DIR=str(source.parent),
        QORTEX_EXTRACTOR="offline",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    port = _free_port()
    log = tmp_path / "webserver.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(WEBSERVER), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc, log)
        yield url, home
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_webserver_lists_assets_and_runs_ingest(webserver) -> None:
    url, home = webserver
    nodes = _graphql(url, MATERIALIZATIONS)["assetNodes"]
    assert INGEST_ASSETS <= {"/".join(n["assetKey"]["path"]) for n in nodes}

    selector = {
        "repositoryLocationName": "qortex",
        "repositoryName": "__repository__",
        "jobName": "ingest",
    }
    launched = _graphql(url, LAUNCH, {"p": {"selector": selector, "runConfigData": {}}})[
        "launchRun"
    ]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline, status = time.monotonic() + 420, ""
    while time.monotonic() < deadline:
        status = _graphql(url, STATUS, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
    assert status == "SUCCESS"

    done = {
        "/".join(n["assetKey"]["path"]): n["assetMaterializations"]
        for n in _graphql(url, MATERIALIZATIONS)["assetNodes"]
    }
    assert all(done[key] and done[key][0]["runId"] == run_id for key in INGEST_ASSETS)
    assert (home / "snapshots" / "LATEST").read_text().strip().startswith("v000001-")
