"""One home: the CLI's runs land in the instance `qortex ui` serves; odd home paths work or are
refused before anything is written; a second writer fails fast naming the first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus

from pipelines.resources import EmbedderResource
from qortex_cli.commands.ui import ui_command
from qortex_cli.main import main
from qortex_cli.runs.local import run_ingest
from qortex_core.errors import ConfigError

EMBEDDERS: dict[str, object] = {}
HOLD = """
import sys, time
from qortex_core.storage.writer_lock import writer_lock
with writer_lock(sys.argv[1], "qortex ingest"):
    print("held", flush=True)
    time.sleep(60)
"""


class SessionEmbedder(EmbedderResource):
    def get(self):
        return EMBEDDERS["session"]


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "pump.md").write_text("# Orion Pump\n\nIlse Marrow services the Orion Pump.\n")
    return source


@pytest.mark.parametrize("odd", ["what?home", "100%home", "a#b"])
def test_a_home_dagster_cannot_open_is_refused_before_anything_is_written(tmp_path, odd):
    source = _source(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match="DAGSTER_HOME") as err:
        run_ingest(source, tmp_path / odd / "home", progress=False)
    assert "\n" not in str(err.value) and odd.strip("home") in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created anywhere


def test_cli_ingest_runs_show_in_the_ui_instance_for_a_home_with_spaces_and_unicode(
    tmp_path, monkeypatch, embedder
):
    source = _source(tmp_path)
    home = tmp_path / "my home ünï"
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    monkeypatch.setenv("DAGSTER_HOME", "unset-after-the-test")  # run_ingest exports it
    monkeypatch.delenv("DAGSTER_HOME")
    EMBEDDERS["session"] = embedder
    outcome = run_ingest(source, home, resources={"embedder": SessionEmbedder()}, progress=False)
    assert outcome.summary["documents"] == 1
    argv, env = ui_command(home, home / "dagster", "127.0.0.1", 3999)
    assert env["DAGSTER_HOME"] == str(home / "dagster") and env["QORTEX_HOME"] == str(home)
    assert argv[1:5] == ["-m", "dagster", "dev", "-m"]
    instance = DagsterInstance.from_config(env["DAGSTER_HOME"])  # what `qortex ui` serves
    runs = instance.get_runs()
    assert [r.run_id for r in runs] == [outcome.run_id]
    assert runs[0].status == DagsterRunStatus.SUCCESS
    event = instance.get_latest_materialization_event(AssetKey("chunks"))
    assert event.asset_materialization.metadata["dagster/row_count"].value == 1


def test_missing_snapshot_names_the_home_and_how_to_choose_another(tmp_path, capsys):
    assert main(["query", "anything", "--home", str(tmp_path / "elsewhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("qortex: error:") and str(tmp_path / "elsewhere") in err
    assert "--home" in err and "QORTEX_HOME" in err and "\n" not in err


def test_a_second_writer_fails_fast_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", "unset-after-the-test")  # run_ingest exports it
    monkeypatch.delenv("DAGSTER_HOME")
    source, home = _source(tmp_path), tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        assert main(["ingest", str(source), "--home", str(home), "--quiet"]) == 2
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err.strip()
    assert err.startswith("qortex: error:") and "\n" not in err
    assert f"pid {proc.pid}" in err and "qortex ingest" in err
    assert not (home / "lancedb").exists()  # the second writer wrote nothing
