"""``qortex ingest`` and ``qortex bench ingest`` through the real command line entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pipelines.resources as resources
from qortex_cli.main import main
from qortex_core.query.retriever import Retriever


@pytest.fixture
def shared_model(monkeypatch, embedder):
    """Let the commands reuse the session's loaded model instead of loading their own."""
    monkeypatch.setitem(resources._embedders, ("bundled", ""), embedder)
    return embedder


def test_ingest_json_summary_then_unchanged_rerun(tmp_path: Path, capsys, shared_model) -> None:
    src = tmp_path / "src" / "science"
    src.mkdir(parents=True)
    (src / "curie.md").write_text(
        "# Marie Curie\n\nMarie Curie was born in Warsaw. She taught at the Sorbonne in Paris.\n"
    )
    (src / "warsaw.txt").write_text("Warsaw is the capital of Poland.\n")
    (src / "photo.jpg").write_bytes(b"\xff\xd8")
    home = tmp_path / "home"
    assert main(["ingest", str(src.parent), "--home", str(home), "--json"]) == 0
    out = capsys.readouterr()
    first = json.loads(out.out)
    assert {
        k: first[k] for k in ("documents", "chunks", "extracted", "failed", "skipped_files")
    } == {"documents": 2, "chunks": 2, "extracted": 2, "failed": 0, "skipped_files": 1}
    assert (
        first["embedded"] > 2
        and first["snapshot"].startswith("v000001-")
        and all(first["checks"].values())
    )
    assert "qortex: embeddings done" in out.err  # progress on stderr
    assert (
        home / "dagster" / "dagster.yaml"
    ).is_file()  # the local instance was created under the data home

    assert main(["ingest", str(src.parent), "--home", str(home), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["extracted"], second["embedded"], second["llm_calls"]) == (0, 0, 0)
    assert second["snapshot"] == first["snapshot"] and second["snapshot_status"] == "unchanged"
    hits = (
        Retriever.open(home, embedder=shared_model)
        .query("Where was Marie Curie born?", top_k=1)
        .passages
    )
    assert hits[0].title == "Marie Curie"


def test_ingest_reads_each_document_once(tmp_path: Path, monkeypatch, shared_model) -> None:
    """The command checks the source by reading up to its first usable file; the run's
    ``documents`` asset then reads every file once (not the command a whole pass before it)."""
    import qortex_core.ingest.documents as documents

    src = tmp_path / "src"
    src.mkdir()
    for n in range(4):
        (src / f"note{n}.md").write_text(f"# Note {n}\n\nLighthouse {n} stands on cape {n}.\n")
    reads: list[str] = []
    real = documents.read_document

    def counted(path, config, listed=None):
        reads.append(Path(path).name)
        return real(path, config, listed)

    monkeypatch.setattr(documents, "read_document", counted)
    assert main(["ingest", str(src), "--home", str(tmp_path / "home"), "--quiet"]) == 0
    assert sorted(reads) == ["note0.md", "note0.md", "note1.md", "note2.md", "note3.md"]


def test_ingest_missing_source_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["ingest", str(tmp_path / "nope"), "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qortex: error: source not found") and err.count("\n") == 1


def test_bench_ingest_refuses_a_non_model_embedder_one_line_exit_2(
    tmp_path: Path, toy_dataset, capsys
) -> None:
    args = ["bench", "ingest", "--corpus", str(toy_dataset.corpus), "--embedder", "hash:8"]
    assert main([*args, "--workdir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qortex: error: bench ingest needs a local sentence-transformers")
    assert err.count("\n") == 1 and not (tmp_path / "work" / "home").exists()


def test_bench_ingest_reports_stages_overhead_and_rerun(
    tmp_path: Path, toy_dataset, capsys, shared_model
) -> None:
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "ingest",
            "--corpus",
            str(toy_dataset.corpus),
            "--extractor",
            "offline",
            "--limit",
            "5",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["chunks"] == report["passages_in_corpus_slice"] == 5
    assert set(report["first_run"]["stages"]) == {
        "documents",
        "chunks",
        "extractions",
        "embeddings",
        "synonym_edges",
        "graph_snapshot",
    }
    assert (
        report["embedding_vs_plain"]["texts"]
        == report["embedding_vs_plain"]["texts_embedded_by_stage"]
        > 5
    )
    assert report["embedding_vs_plain"]["plain_texts_in_stage_cache"] == 1.0  # the same texts
    assert (
        report["embedding_vs_plain"]["plain_encode_s"] > 0
        and report["first_run"]["passages_per_s"] > 0
    )
    assert (
        report["unchanged_rerun"]["llm_calls"],
        report["unchanged_rerun"]["texts_embedded"],
    ) == (0, 0)


def test_bad_setting_fails_before_any_stage_one_line_exit_2(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("QORTEX_EXTRACTOR", "bogus")
    src = tmp_path / "src"
    src.mkdir()
    (src / "note.md").write_text("Warsaw is in Poland.")
    assert main(["ingest", str(src), "--home", str(tmp_path / "home"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "qortex: error: QORTEX_EXTRACTOR='bogus' is not one of: auto, llm, offline, recorded\n"
    )
    assert not (tmp_path / "home").exists()  # no stage ran: nothing was written


@pytest.mark.parametrize("address", ["garbage", "tcp://127.0.0.1:notaport"])
def test_ingest_on_a_bad_dask_address_is_one_line_exit_2(tmp_path: Path, address: str) -> None:
    # a real `qortex ingest` process: the run fails in the executor (before any step); stderr is
    # one line naming the cause, no Dagster log lines or traceback
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nAlice met Bob in Paris.\n")
    env = {
        **os.environ,
        "QORTEX_EXECUTOR": "dask",
        "QORTEX_DASK_ADDRESS": address,
        "QORTEX_EXTRACTOR": "offline",
        "QORTEX_EMBEDDER": "hash:8",
        "DAGSTER_HOME": str(tmp_path / "dagster"),
    }
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "ingest", str(src), "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"qortex: error: ingest failed: QORTEX_DASK_ADDRESS='{address}'")
    assert done.stderr.count("\n") == 1, done.stderr


def test_the_script_entry_returns_mains_code_and_leaves_the_heap_out_of_the_last_collection(
    capsys,
):
    import gc

    from qortex_cli.main import run

    try:
        assert run(["query", "--no-such-flag"]) == 2  # main's code for a usage error
        assert gc.get_freeze_count() > 0  # the interpreter's last collection skips them
    finally:
        gc.unfreeze()
    assert capsys.readouterr().err.startswith("qortex: error: qortex query")
