"""The fixed cost of a run: an unchanged run does not probe the published snapshot again, nor
load the embedder's tokenizer (a local model), nor list the source folder twice; a run that
changed something does all of it as before.

Real files, real LanceDB on disk, real Dagster runs; the hash embedder and the offline
extractor."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from qortex_cli.commands.ingest import _check_usable
from qortex_cli.runs.local import run_ingest
from qortex_core.embed import HashEmbedder, HashEmbedderConfig, TokenWindow, token_window
from qortex_core.errors import DatasetError
from qortex_core.ingest.document_chunks import chunk_stored
from qortex_core.ingest.document_stage import sync_source
from qortex_core.ingest.documents import SourceConfig
from qortex_core.ingest.source_listing import list_tree
from qortex_core.ingest.stage_inputs import remembered
from qortex_core.ops import doctor, probe_memo, table_checks
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    EXTRACTIONS,
    FACTS,
    PASSAGES,
    SYNONYMS,
    LanceStore,
)

PAST = time.time() - 3600  # older than the racy window: the stat can be trusted
REPO = Path(__file__).resolve().parents[2]
chunk_asset = importlib.import_module("assets.chunks")  # the module; `assets.chunks` is the asset


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (PAST, PAST))
    return path


def _counted(monkeypatch, module, name: str) -> list[int]:
    """Count the calls of ``module.name`` (still calling it)."""
    calls: list[int] = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.mark.slow
def test_an_unchanged_run_neither_probes_again_nor_loads_the_tokenizer(tmp_path, monkeypatch):
    """The graph_snapshot stage's gate probes each new snapshot once; the probe check and the
    dangling-edge check give what the stage established, and never read again unchanged."""
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:32")
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    source, home = tmp_path / "src", tmp_path / "home"
    for i in range(3):
        _write(source, f"p{i}.md", f"# Karo{i} Venn\n\nKaro{i} Venn met Ilsa Marr at Orin.\n")
    gate = _counted(monkeypatch, doctor, "check_probe")  # the stage's gate
    probes = _counted(monkeypatch, probe_memo, "check_probe")  # the check's own probe
    scans = _counted(monkeypatch, table_checks, "dangling_edges")
    windows = _counted(monkeypatch, chunk_asset, "token_window")
    first = run_ingest(source, home, progress=False)
    assert first.checks["snapshot_answers_probe"] and first.checks["no_dangling_edges"]
    assert (len(gate), len(probes), len(scans), len(windows)) == (1, 0, 0, 1)

    same = run_ingest(source, home, progress=False)
    assert same.summary["snapshot_status"] == "unchanged"
    assert all(same.checks.values()) and same.metadata["chunks"]["mode"] == "unchanged"
    assert (len(gate), len(probes), len(scans), len(windows)) == (1, 0, 0, 1)  # all remembered
    assert same.metadata["chunks"]["max_tokens"] == first.metadata["chunks"]["max_tokens"]

    _write(source, "p3.md", "# Karo3 Venn\n\nKaro3 Venn met Ilsa Marr at Orin.\n")
    grown = run_ingest(source, home, progress=False)
    assert grown.summary["snapshot"] != first.summary["snapshot"]
    assert grown.checks["snapshot_answers_probe"] and grown.checks["no_dangling_edges"]
    assert (len(gate), len(probes), len(scans), len(windows)) == (2, 0, 0, 2)

    store = LanceStore.open(home)  # what the stage remembered is what a scan and a probe find
    assert table_checks.remembered_dangling(store) == table_checks.dangling_edges(store)
    store.set_stage_digest(f"memo:{probe_memo.PROBE_MEMO}", "forgotten []")
    assert probe_memo.remembered_probe(store, home, HashEmbedder(HashEmbedderConfig(32)))[0]
    assert len(probes) == 1  # nothing remembered for it: probed


def test_a_failed_verdict_is_not_remembered(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    verdicts = iter([[False, "no"], [True, "yes"], [False, "never asked"]])
    asked: list[list] = []

    def probe() -> list:
        asked.append(next(verdicts))
        return asked[-1]

    def ask() -> list:
        return remembered(store, "probe", (), probe, "v1", keep=lambda v: v[0])

    assert ask() == [False, "no"] and ask() == [True, "yes"]  # a failure is asked again
    assert ask() == [True, "yes"] and len(asked) == 2  # a pass is remembered


def test_chunks_make_the_window_only_when_there_is_something_to_chunk(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    root = tmp_path / "src"
    _write(root, "a.md", "# Alpha\n\nAlpha met Beta at the Gamma Station.\n")
    sync_source(store, SourceConfig(root))
    made: list[TokenWindow] = []

    def window() -> TokenWindow:
        made.append(token_window(HashEmbedder(HashEmbedderConfig(32))))
        return made[-1]

    first = chunk_stored(store, window, set(), identity="hash3-32")
    again = chunk_stored(store, window, set(), identity="hash3-32")
    assert first.mode == "full" and again.mode == "unchanged" and len(made) == 1
    assert again.sizing == first.sizing  # the sizing those chunks were made with
    other = chunk_stored(store, window, set(), identity="another-model")
    assert other.mode == "full" and len(made) == 2  # another embedder: chunked again


def test_the_listing_sorts_as_paths_sort_with_each_files_stat(tmp_path):
    names = ["a/b.md", "a-c.md", "a.md", "ab/x.md", "a/b/c.md", "Z.md", "a/b-.md", "b.txt"]
    for name in names:
        _write(tmp_path, name, "x")
    _write(tmp_path, "skip.jpg", "x")
    _write(tmp_path, ".hidden/h.md", "x")
    listing = list_tree(tmp_path, (".md", ".txt"))
    assert [Path(f.rel) for f in listing.files] == sorted(Path(n) for n in names)
    assert [s.path for s in listing.skipped] == ["skip.jpg"]
    assert all(f.stat is not None and int(f.stat.st_mtime) == int(PAST) for f in listing.files)


def test_the_command_walks_only_to_the_first_usable_file(tmp_path, monkeypatch):
    import qortex_core.ingest.documents as documents

    for folder in "abcde":
        _write(tmp_path / "src", f"{folder}/note.md", f"# Note {folder}\n\nText {folder}.\n")
    _write(tmp_path / "bad", "empty.md", " ")
    import qortex_core.ingest.source_listing as source_listing

    reads = _counted(monkeypatch, documents, "read_document")
    folders = _counted(monkeypatch, os, "scandir")
    monkeypatch.setattr(source_listing, "PARALLEL_STAT", 1)  # every folder "large"
    ahead = _counted(monkeypatch, source_listing, "_prestat")
    _check_usable(tmp_path / "src")
    assert (len(reads), len(folders)) == (1, 2)  # the root and a/, not every folder
    assert ahead == []  # no folder's files stated ahead: the check stops at the first file
    with pytest.raises(DatasetError, match=r"empty\.md: empty file"):
        _check_usable(tmp_path / "bad")


@pytest.mark.slow
def test_an_unchanged_run_imports_no_model_library(tmp_path):
    """The default embedder is a local model: an unchanged run finds it has nothing to embed,
    chunk or probe without importing torch or sentence-transformers (the first run does)."""
    source, home = tmp_path / "src", tmp_path / "home"
    _write(source, "a.md", "# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n")
    script = (
        "import sys; from qortex_cli.main import main; "
        f"code = main(['ingest', {str(source)!r}, '--home', {str(home)!r}, '--quiet']); "
        "print(code, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QORTEX_", "DAGSTER_"))}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "QORTEX_EXTRACTOR": "offline"}

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[-1].split()

    assert run() == ["0", "True", "True"]  # the first run embeds with the model
    assert run() == ["0", "False", "False"]


def _reference(store: LanceStore, key: str) -> tuple[dict, dict, tuple]:
    """The table checks row by row in Python: what the arrow versions must agree with."""
    from qortex_core.ingest.chunk_stage import extraction_key

    def col(table: str, name: str) -> list:
        rows = store.read(table)
        return rows[name].to_pylist() if rows.num_rows else []

    nodes, passages = set(col(CONCEPTS, "id")), set(col(PASSAGES, "id"))
    facts = zip(col(FACTS, "subject_id"), col(FACTS, "object_id"))
    pairs = zip(col(SYNONYMS, "a"), col(SYNONYMS, "b"))
    dangling = {
        "fact": sum(s not in nodes or o not in nodes for s, o in facts),
        "synonym": sum(a not in nodes or b not in nodes for a, b in pairs),
        "contains": sum(p not in passages for plist in col(CONCEPTS, "passage_ids") for p in plist),
    }
    stored = dict(
        zip(col(EXTRACTIONS, "key"), zip(col(EXTRACTIONS, "status"), col(EXTRACTIONS, "error")))
    )
    states = [stored.get(extraction_key(c, key)) for c in sorted(col(CHUNKS, "id"))]
    status = {
        "ok": sum(s is not None and s[0] == "ok" for s in states),
        "failed": sum(s is not None and s[0] not in (None, "ok") for s in states),
        "missing": sum(s is None or s[0] is None for s in states),
    }
    errors = [str(s[1]) for s in states if s is not None and s[0] != "ok"]
    return dangling, status, (errors, len(states))


# chunk ids of another format (looked up as strings) and of the id format (as integers)
@pytest.mark.parametrize(
    "chunks", [[f"c{i}" for i in (1, 2, 3, 4, 5)], [f"c_{i:016x}" for i in (9, 2, 7, 1, 5)]]
)
def test_the_table_checks_count_what_a_row_by_row_scan_counts(tmp_path, chunks):
    from qortex_core.ingest.chunk_stage import extraction_key

    store, key = LanceStore.open(tmp_path / "home"), "offline/v2"
    empty = table_checks.extraction_status(store, key), table_checks.dangling_edges(store)
    assert empty == ({"ok": 0, "failed": 0, "missing": 0}, {"fact": 0, "synonym": 0, "contains": 0})
    store.upsert(PASSAGES, pa.table({"id": ["p1", "p2"]}))
    store.upsert(
        CONCEPTS, pa.table({"id": ["a", "b", "c"], "passage_ids": [["p1"], ["p2", "gone"], []]})
    )
    store.upsert(
        FACTS,
        pa.table(
            {"id": ["f1", "f2", "f3"], "subject_id": ["a", "x", "b"], "object_id": ["b", "a", "y"]}
        ),
    )
    store.upsert(SYNONYMS, pa.table({"id": ["s1", "s2"], "a": ["a", "c"], "b": ["c", "zz"]}))
    store.upsert(CHUNKS, pa.table({"id": chunks}))
    store.upsert(
        EXTRACTIONS,
        pa.table(
            {
                "key": [extraction_key(c, key) for c in chunks[:4]]
                + [extraction_key(chunks[4], "other/v1")],
                "passage_id": chunks,
                "extractor": [key] * 4 + ["other/v1"],  # c5: only another extractor's row
                "status": ["ok", "failed", "ok", "failed", "failed"],
                "error": [None, "HTTP 401", None, "timeout", "elsewhere"],
            }
        ),
        key="key",
    )
    dangling, status, errors = _reference(store, key)
    assert (
        table_checks.dangling_edges(store) == dangling == {"fact": 2, "synonym": 1, "contains": 1}
    )
    assert table_checks.extraction_status(store, key) == status
    assert table_checks.failed_extraction_errors(store, key) == errors
    assert sorted(errors[0]) == ["HTTP 401", "timeout"] and status["missing"] == 1
    shared = table_checks.extraction_states(store, key)  # the checks' one pass
    assert (shared["status"], (shared["errors"], shared["chunks"])) == (status, errors)


@pytest.mark.slow
def test_the_memories_sensor_runs_the_memory_increment_only(tmp_path, monkeypatch):
    """The sensor's run syncs the written memory and does not list the source folder: a file
    added there waits for the source sensor or the schedule."""
    from dagster import DagsterInstance, RunRequest, build_sensor_context

    from pipelines.definitions import build_definitions
    from pipelines.resources import StoreResource
    from pipelines.sensors import make_memories_sensor
    from qortex_core.agent.api import Memory

    source, home = tmp_path / "src", tmp_path / "home"
    _write(source, "a.md", "# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n")
    env = {
        "QORTEX_HOME": str(home),
        "QORTEX_SOURCE_DIR": str(source),
        "QORTEX_EMBEDDER": "hash:32",
        "QORTEX_EXTRACTOR": "offline",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the resources resolve their EnvVars in the run
    job = build_definitions(env).resolve_job_def("ingest")
    with DagsterInstance.ephemeral() as instance:
        assert job.execute_in_process(instance=instance).success  # the folder, once
        _write(source, "b.md", "# Lune\n\nLune is the capital of Dravia.\n")
        Memory(home, embedder=HashEmbedder(HashEmbedderConfig(32))).remember(
            "Tessa Brin was born in Lune."
        )
        context = build_sensor_context(resources={"store": StoreResource(home=str(home))})
        asked = make_memories_sensor({})(context)
        assert isinstance(asked, RunRequest)
        done = job.execute_in_process(instance=instance, run_config=asked.run_config)
    docs = done.asset_materializations_for_node("documents")[0].metadata
    assert docs["memories"].value == 1 and docs["new_documents"].value == 1  # the memory
    assert docs["files_read"].value == 0 and docs["documents"].value == 2  # b.md waits


def test_a_large_folder_stated_on_two_threads_lists_as_one_thread_does(tmp_path, monkeypatch):
    import qortex_core.ingest.source_listing as source_listing

    for i in range(40):
        _write(tmp_path, f"n{i:02d}.md", "x" * i)  # sizes tell the files apart
    _write(tmp_path, ".hidden.md", "x")
    _write(tmp_path, "skip.jpg", "x")
    _write(tmp_path, "sub/inner.md", "x")
    (tmp_path / "link.md").symlink_to(tmp_path / "n05.md")
    one = list_tree(tmp_path, (".md",))
    threads = []
    original = source_listing._stat_all
    monkeypatch.setattr(source_listing, "PARALLEL_STAT", 8)
    monkeypatch.setattr(source_listing, "usable_cores", lambda cap: 2)  # as on a 2-core machine
    monkeypatch.setattr(
        source_listing,
        "_stat_all",
        lambda entries: (threads.append(threading.current_thread().name), original(entries)),
    )
    two = list_tree(tmp_path, (".md",))
    assert any(name.startswith("source-stat") for name in threads)  # the second thread ran
    assert [f.rel for f in two.files] == [f.rel for f in one.files]
    assert [(f.stat.st_ino, f.stat.st_size) for f in two.files] == [
        (os.stat(f.path).st_ino, os.stat(f.path).st_size) for f in one.files
    ]
    assert two.skipped == one.skipped and [s.path for s in two.skipped] == ["skip.jpg"]
    assert "link.md" in [f.rel for f in two.files] and "sub/inner.md" in [f.rel for f in two.files]
