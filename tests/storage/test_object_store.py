"""LanceDB tables in an S3 bucket (moto's S3 server on loopback), snapshots on a local path.

The whole life of a data home: the Dagster ingest job, queries, feedback, factors, a second
ingest and ``prune``, with every table in the bucket and nothing of it on the local disk.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qortex_core.errors import HomeError
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore, home_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from memory_corpus import KITCHEN, PUMPS  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUCKET = "qortex-test"
HOME = f"s3://{BUCKET}/memory/home"
QUERY = "Who services the Orion Pump?"


def test_home_of_keeps_uris_and_expands_paths(monkeypatch):
    assert home_of("s3://bucket/a/") == "s3://bucket/a"
    assert home_of("~/x") == Path.home() / "x"
    monkeypatch.setenv("QORTEX_SNAPSHOT_HOME", "/mnt/snaps")
    assert snap.snapshot_home("s3://b/h") == Path("/mnt/snaps")
    assert snap.snapshot_home("s3://b/h/tenants/acme") == Path("/mnt/snaps/tenants/acme")
    assert snap.snapshot_home("/data/home") == Path("/data/home")
    assert snap.snapshot_home("gs://b/h", "/other") == Path("/other")
    monkeypatch.delenv("QORTEX_SNAPSHOT_HOME")
    with pytest.raises(HomeError, match="QORTEX_SNAPSHOT_HOME"):
        snap.snapshots_dir("s3://b/h")


@pytest.fixture
def s3(monkeypatch, tmp_path):
    """A moto S3 server on 127.0.0.1 with one bucket; the AWS_* settings LanceDB reads."""
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    settings = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "QORTEX_SNAPSHOT_HOME": str(tmp_path / "snapshots-mount"),
        "QORTEX_EXTRACTOR": "offline",
    }
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    client = boto3.client(
        "s3",
        endpoint_url=settings["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


def _keys(client) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _write_source(folder: Path, rows: list[tuple[str, str]]) -> Path:
    (folder / "engineering").mkdir(parents=True, exist_ok=True)
    for title, text in rows:
        name = title.replace(" ", "_") + ".md"
        (folder / "engineering" / name).write_text(f"# {title}\n\n{text}\n")
    return folder


def _ingest(source: Path, tmp_path: Path, embedder) -> dict:
    from pipelines.resources import EmbedderResource
    from qortex_cli.runs.local import run_ingest

    class Shared(EmbedderResource):
        def get(self):
            return embedder

    outcome = run_ingest(
        source, HOME, tmp_path / "dagster", resources={"embedder": Shared()}, progress=False
    )
    return outcome.summary


@pytest.mark.slow
def test_ingest_query_feedback_prune_on_s3(s3, tmp_path, embedder):
    from qortex_core.feedback.factors import load_factors, update_factors
    from qortex_core.query.retriever import Retriever
    from qortex_core.storage.retention import prune_snapshots

    source = _write_source(tmp_path / "source", PUMPS)
    first = _ingest(source, tmp_path, embedder)
    assert first["chunks"] >= len(PUMPS) and first["failed"] == 0
    keys = _keys(s3)
    for table in ("chunks", "extractions", "passages", "concepts", "facts", "embeddings"):
        assert any(k.startswith(f"memory/home/lancedb/{table}.lance/") for k in keys), table
    local = {p.name for p in tmp_path.iterdir()}
    assert local == {"source", "dagster", "snapshots-mount"}  # no table on the local disk
    assert len(snap.list_versions(HOME)) == 1
    assert (tmp_path / "snapshots-mount" / "snapshots" / snap.latest_name(HOME)).is_dir()

    retriever = Retriever.open(HOME, embedder=embedder)
    result = retriever.query(QUERY, top_k=5, mode="hipporag")
    titles = [h.title for h in result.passages]
    assert titles and titles[0].startswith("Orion Pump") and not result.fallback
    top = result.passages[0].id
    for _ in range(5):
        judged = retriever.query(QUERY, top_k=5, mode="hipporag")
        retriever.feedback(judged.query_id, rejected=[top])
    report = update_factors(LanceStore.open(HOME))
    factors, watermark = load_factors(LanceStore.open(HOME))
    assert report.folded == 5 and watermark > 0
    assert any(f < 1.0 for f in factors.values())
    assert any(k.startswith("memory/home/lancedb/feedback_events.lance/") for k in _keys(s3))

    _write_source(source, KITCHEN)  # more documents: a second snapshot
    second = _ingest(source, tmp_path, embedder)
    assert second["chunks"] > first["chunks"] and len(snap.list_versions(HOME)) == 2
    pruned = prune_snapshots(HOME, keep=1)
    assert len(pruned.removed) == 1 and pruned.kept == [snap.latest_name(HOME)]
    assert "feedback_events" in pruned.optimized and "passages" in pruned.optimized
    after = Retriever.open(HOME, embedder=embedder)
    assert after.query("Where does Saffron Rice come from?", top_k=3, mode="dense").passages
    assert load_factors(LanceStore.open(HOME))[0] == factors  # feedback survives the prune

    listed = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "snapshots", "--home", HOME, "--json"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert [i["name"] for i in json.loads(listed.stdout)] == pruned.kept


@pytest.mark.slow
def test_uri_home_without_snapshot_folder_is_a_clear_error(s3, monkeypatch, tmp_path):
    monkeypatch.delenv("QORTEX_SNAPSHOT_HOME")
    proc = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "query", "pump", "--home", HOME],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("qortex: error:") and "QORTEX_SNAPSHOT_HOME" in proc.stderr
    assert not any(tmp_path.iterdir())  # no stray local folder named after the URI
