"""Checks fail runs (issue 35, item 16): a snapshot that fails its probe is never published and the
run exits non-zero; a home whose only memories are forgotten consolidates to a valid empty
snapshot that keeps answering; ``doctor --no-probe`` still sees a snapshot whose vectors do not
match the configured embedder. Real CLI runs in this process, LanceDB and snapshots on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults import error_line, published, run_cli

import pipelines.resources as resources
from qortex_core.embed import BUNDLED_MODEL, EmbedderWrapper, bundled_model_path
from qortex_core.ops.doctor import DoctorConfig, diagnose


@pytest.fixture
def shared_model(monkeypatch, embedder):
    """The pipeline's embedder resource reuses the session's loaded model."""
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    return embedder


class DriftedWidth(EmbedderWrapper):
    """The model swapped under the same name: it says it makes 999-d vectors, the stored ones
    are 384-d."""

    @property
    def dim(self) -> int:
        return 999

    def embed(self, texts):
        return self.inner.embed(texts)


def _remember_and_forget(capsys, home: Path, text: str) -> str:
    made = run_cli(capsys, "remember", text, "--home", home, "--json")
    assert made.code == 0, made.stderr
    rid = json.loads(made.stdout)["id"]
    assert run_cli(capsys, "forget", rid, "--home", home).code == 0
    return rid


def _query(capsys, home: Path, text: str) -> dict:
    asked = run_cli(capsys, "query", text, "--home", home, "--json", "--min-relevance", "0")
    assert asked.code == 0 and "Traceback" not in asked.stderr, asked.stderr
    return json.loads(asked.stdout)


def test_forgetting_the_only_memory_then_consolidating_keeps_queries_answering(
    tmp_path, capsys, shared_model
):
    home = tmp_path / "home"
    _remember_and_forget(capsys, home, "The Zorblat Engine was repaired by Inga Moss.")
    done = run_cli(capsys, "consolidate", "--home", home)
    assert done.code == 0 and "FAILED" not in done.stderr, done.stderr
    assert _query(capsys, home, "Who repaired the Zorblat Engine?")["passages"] == []
    for probe in (True, False):  # the empty snapshot is healthy, with and without the probe
        report = diagnose(home, shared_model, DoctorConfig(probe=probe))
        assert report.healthy, report.problems
    assert run_cli(capsys, "remember", "Bread is baked at dawn by Tomas.", "--home", home).code == 0
    hits = _query(capsys, home, "Who bakes the bread?")["passages"]
    assert hits and hits[0]["tier"] == "fresh" and "Tomas" in hits[0]["text"]


def test_forgetting_every_memory_of_a_published_home_publishes_an_empty_snapshot(
    tmp_path, capsys, shared_model
):
    """The variant with a good snapshot first: it holds the memory, which is then forgotten."""
    home = tmp_path / "home"
    made = run_cli(capsys, "remember", "Velmora hosts the Ostranian parliament.", "--home", home)
    assert made.code == 0, made.stderr
    assert run_cli(capsys, "consolidate", "--home", home).code == 0
    first = published(home)[0]
    rid = run_cli(capsys, "memories", "--home", home, "--json").stdout
    run_cli(capsys, "forget", json.loads(rid)[0]["id"], "--home", home)
    done = run_cli(capsys, "consolidate", "--home", home)
    assert done.code == 0 and "FAILED" not in done.stderr, done.stderr
    latest, folders = published(home)
    assert latest != first and latest in folders
    answer = _query(capsys, home, "Where does the Ostranian parliament sit?")
    assert answer["passages"] == [] and answer["snapshot"] == latest


@pytest.mark.parametrize("command", ["consolidate", "ingest"])
def test_a_snapshot_that_fails_its_probe_is_not_published(
    tmp_path, capsys, monkeypatch, embedder, command
):
    src = tmp_path / "src"
    src.mkdir()
    (src / "vesk.md").write_text("# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n")
    home = tmp_path / "home"
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    assert run_cli(capsys, "ingest", src, "--home", home, "--quiet").code == 0
    before = published(home)
    (src / "lune.md").write_text("# Lune\n\nLune is the capital of Dravia.\n")
    run_cli(capsys, "remember", "Tessa Brin was born in Lune.", "--home", home)
    monkeypatch.setitem(resources._embedders, ("bundled", ""), DriftedWidth(embedder))
    args = ("ingest", src) if command == "ingest" else ("consolidate",)
    failed = run_cli(capsys, *args, "--home", home, "--quiet")
    error_line(failed, 2, "probe", "not published", "999-d")
    assert published(home) == before  # LATEST and the folders as they were
    assert not [p for p in (home / "snapshots").iterdir() if p.name.startswith(".tmp")]
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    hits = _query(capsys, home, "Where was Orlan Vesk born?")["passages"]
    assert hits and hits[0]["title"] == "Orlan Vesk"  # the last good snapshot answers


def _renamed_model(folder: Path, width: int) -> Path:
    """The bundled model's files under ``folder`` (same name), its pooling layer declaring
    ``width``."""
    source = Path(bundled_model_path())
    target = folder / BUNDLED_MODEL
    for path in source.rglob("*"):
        out = target / path.relative_to(source)
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
        elif path.name == "config.json" and path.parent.name == "1_Pooling":
            config = json.loads(path.read_text())
            out.write_text(json.dumps(dict(config, word_embedding_dimension=width)))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.symlink_to(path)
    return target


@pytest.mark.parametrize("which", ["another model", "same name, another width"])
def test_doctor_without_the_probe_sees_vectors_of_another_embedder(
    tmp_path, capsys, monkeypatch, shared_model, which
):
    home = tmp_path / "home"
    assert run_cli(capsys, "remember", "Lune is the capital of Dravia.", "--home", home).code == 0
    assert run_cli(capsys, "consolidate", "--home", home).code == 0
    assert run_cli(capsys, "doctor", "--no-probe", "--home", home).code == 0
    spec = "hash:64" if which == "another model" else f"st:{_renamed_model(tmp_path, 512)}"
    monkeypatch.setenv("QORTEX_EMBEDDER", spec)
    found = run_cli(capsys, "doctor", "--no-probe", "--home", home)
    assert found.code == 1 and "Traceback" not in found.stderr
    line = next(x for x in found.stdout.splitlines() if "embedder:" in x)
    assert line.lstrip().startswith("PROBLEM") and "(384-d)" in line
    assert ("hash3-64" in line) if which == "another model" else ("512-d" in line)
