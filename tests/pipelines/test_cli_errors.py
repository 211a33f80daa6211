"""The CLI on bad input: one ``qortex: error:`` line on stderr, exit 2, no traceback, nothing stored lost."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION, TOY_CORPUS, ToyDataset, openie_document, write_file

from qortex_core.storage import snapshot as snap

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def run_subprocess(argv: list, cwd: Path, env: dict) -> Outcome:
    """Run the real CLI entry point in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "qortex_cli", *map(str, argv)],
        cwd=cwd,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def qortex(tmp_path, monkeypatch, capsys):
    """Run ``qortex ARGV`` in this process through ``qortex_cli.main.main`` (``subprocess=True``: a real process).

    In-process runs keep the many cases fast; an exception escaping ``main`` fails the test just as a
    traceback would. ``$QORTEX_HOME`` points into tmp_path so no test touches a real home.
    """
    base_env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "QORTEX_HOME": str(tmp_path / "default-home"),
    }

    def run(*argv, env: dict | None = None, subprocess: bool = False) -> Outcome:
        full_env = dict(base_env, **(env or {}))
        if subprocess:
            return run_subprocess(list(argv), tmp_path, full_env)
        from qortex_cli import main as cli

        with monkeypatch.context() as m:
            m.chdir(tmp_path)
            for key, value in full_env.items():
                m.setenv(key, value)
            capsys.readouterr()
            code = cli.main([str(a) for a in argv])
            out = capsys.readouterr()
        return Outcome(code, out.out, out.err)

    return run


def assert_user_error(proc: Outcome, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line ``qortex: error: ...`` containing ``fragments``.

    Progress lines (indented, on stderr) may come before the error line.
    """
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [
        line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("  ")
    ]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("qortex: error: "), lines[0]
    assert proc.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def eval_args(data: ToyDataset, home: Path, **override: str | Path | None) -> list:
    args = {
        "--questions": data.questions,
        "--corpus": data.corpus,
        "--openie": data.openie,
        "--home": home,
    }
    args.update({f"--{k}": v for k, v in override.items()})
    return ["eval"] + [x for k, v in args.items() if v is not None for x in (k, v)]


# -- eval: bad files ----------------------------------------------------------------------
BAD_EVAL = {
    # case: (which file, its content, expected fragment of the message)
    "questions not json": ("questions", "{not json", "not valid JSON"),
    "questions empty file": ("questions", "", "not valid JSON"),
    "questions empty list": ("questions", [], "non-empty JSON list"),
    "questions wrong fields": ("questions", [{"query": "x", "docs": []}], "no 'question' text"),
    "questions is the corpus": ("questions", TOY_CORPUS, "no 'question' text"),
    "corpus not json": ("corpus", '[{"title": ', "not valid JSON"),
    "corpus empty list": ("corpus", [], "non-empty JSON list"),
    "corpus wrong fields": (
        "corpus",
        [{"name": "x", "body": "y"}],
        "needs string 'title' and 'text'",
    ),
    "corpus binary": ("corpus", b"\x00\xff\xfe\x81", "not readable text"),
    "openie not json": ("openie", "nope", "not readable JSON"),
    "openie empty docs": ("openie", {"docs": []}, "no 'docs' list"),
    "openie wrong fields": ("openie", {"docs": [{"text": "x"}]}, "no 'passage' text"),
    "openie of another corpus": (
        "openie",
        openie_document([{"title": "X", "text": "Y"}], [[["X", "is", "Y"]]]),
        "no entry for any of the 8 corpus passages",
    ),
}


IN_A_PROCESS = {
    "questions not json",
    "openie wrong fields",
}  # the rest run through main() in this process


@pytest.mark.parametrize("case", sorted(BAD_EVAL))
def test_eval_bad_file(qortex, tmp_path, toy_dataset, case):
    which, body, fragment = BAD_EVAL[case]
    path = write_file(tmp_path, f"bad_{which}.json", body)
    home = tmp_path / "home"
    proc = qortex(*eval_args(toy_dataset, home, **{which: path}), subprocess=case in IN_A_PROCESS)
    assert_user_error(proc, fragment, str(path))
    assert not home.exists(), "a failed eval must not create the data home"


@pytest.mark.parametrize("which", ["questions", "corpus", "openie"])
def test_eval_missing_file(qortex, tmp_path, toy_dataset, which):
    missing = tmp_path / f"missing_{which}.json"
    assert_user_error(
        qortex(
            *eval_args(toy_dataset, tmp_path / "home", **{which: missing}),
            subprocess=which == "corpus",
        ),
        "not found",
        str(missing),
    )


@pytest.mark.parametrize(
    "override, fragment",
    [
        ({"modes": "dense,bogus"}, "unknown mode 'bogus'"),
        ({"k": "0,5"}, "out of range"),
        ({"k": ","}, "no recall cut-off"),
        ({"extractor": "recorded", "openie": None}, "needs --openie"),
    ],
)
def test_eval_bad_options(qortex, tmp_path, toy_dataset, override, fragment):
    assert_user_error(qortex(*eval_args(toy_dataset, tmp_path / "home", **override)), fragment)


def test_eval_report_path_in_a_missing_folder(qortex, tmp_path, toy_dataset):
    out = tmp_path / "no" / "such" / "report.json"
    proc = qortex(*eval_args(toy_dataset, tmp_path / "home", json=out))
    assert_user_error(proc, "cannot write the report")
    assert not (tmp_path / "home").exists()


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs Linux sysfs")
def test_eval_report_that_cannot_be_written(qortex, tmp_path, toy_dataset):
    """The write fails after the run (sysfs refuses new files, even to root): one line, exit 2."""
    proc = qortex(
        *eval_args(
            toy_dataset, tmp_path / "home", json="/sys/qortex-report.json", modes="dense", k="1"
        )
    )
    assert_user_error(proc, "/sys/qortex-report.json")


# -- data home ----------------------------------------------------------------------------
def home_cases(tmp_path: Path) -> dict[str, Path]:
    afile = tmp_path / "a-file"
    afile.write_text("I am a file")
    lancedb_file = tmp_path / "lancedb-is-a-file"
    lancedb_file.mkdir()
    (lancedb_file / "lancedb").write_text("not a folder")
    return {
        "home is a file": afile,
        "home under a file": afile / "sub",
        "lancedb folder is a file": lancedb_file,
    }


@pytest.mark.parametrize(
    "case", ["home is a file", "home under a file", "lancedb folder is a file"]
)
def test_eval_unusable_home(qortex, tmp_path, toy_dataset, case):
    home = home_cases(tmp_path)[case]
    assert_user_error(
        qortex(*eval_args(toy_dataset, home), subprocess=case == "home is a file"), "home"
    )
    assert (tmp_path / "a-file").read_text() == "I am a file"


@pytest.mark.parametrize("case", ["home is a file", "home under a file"])
def test_query_unusable_home(qortex, tmp_path, case):
    home = home_cases(tmp_path)[case]
    assert_user_error(qortex("query", "anything", "--home", home), "not a directory")


def test_query_without_snapshot(qortex, tmp_path):
    assert_user_error(
        qortex("query", "anything", "--home", tmp_path / "missing", subprocess=True),
        "no snapshot published",
    )
    (tmp_path / "empty").mkdir()
    assert_user_error(
        qortex("query", "anything", "--home", tmp_path / "empty"), "no snapshot published"
    )
    # $QORTEX_HOME is the default home
    assert_user_error(qortex("query", "anything"), "no snapshot published", "default-home")


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["query", ""], "query is empty"),
        (["query", "  \n\t "], "query is empty"),
        (["query", "x", "--top-k", "0"], "top_k"),
        (["query", "x", "--mode", "bogus"], "unknown mode"),
    ],
)
def test_bad_query(qortex, toy_home, tmp_path, argv, fragment):
    assert_user_error(qortex(*argv, "--home", toy_home, subprocess=argv == ["query", ""]), fragment)


def test_query_on_a_damaged_snapshot(qortex, toy_home, tmp_path):
    latest = snap.snapshots_dir(toy_home) / snap.latest_name(toy_home)
    data = latest / "adj_data.npy"
    data.write_bytes(data.read_bytes()[:-16])
    assert_user_error(qortex("query", "x", "--home", toy_home), "checksum mismatch in adj_data.npy")


# -- ingest -------------------------------------------------------------------------------
def test_ingest_bad_sources(qortex, tmp_path, toy_home):
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "blank.md").write_text("\n\n")
    (junk / "broken.json").write_text("[{")
    (junk / "picture.png").write_bytes(b"\x89PNG")
    before = snap.latest_name(toy_home)
    assert_user_error(qortex("ingest", tmp_path / "nope", "--home", toy_home), "source not found")
    assert_user_error(
        qortex("ingest", junk / "blank.md", "--home", toy_home), "no usable", "empty file"
    )
    assert_user_error(
        qortex("ingest", empty, "--home", toy_home, subprocess=True),
        "no usable",
        "nothing was changed",
    )
    assert_user_error(qortex("ingest", junk, "--home", toy_home), "no usable")
    assert snap.latest_name(toy_home) == before


# -- nothing stored is lost ---------------------------------------------------------------
def stored_state(home: Path) -> tuple[str, list[str], dict[str, int]]:
    from qortex_core.storage.store import LanceStore

    return snap.latest_name(home), snap.list_versions(home), LanceStore.open(home).versions()


def answer_ids(home: Path, embedder) -> list[str]:
    """The passages the latest snapshot returns for the bridge question (a non-empty answer)."""
    from qortex_core.query.retriever import Retriever

    ids = [
        h.id
        for h in Retriever.open(home, embedder=embedder).query(BRIDGE_QUESTION, top_k=3).passages
    ]
    assert len(ids) == 3
    return ids


def test_failed_attempts_keep_the_published_snapshot(
    qortex, toy_home, toy_dataset, tmp_path, embedder
):
    before = stored_state(toy_home)
    answer = answer_ids(toy_home, embedder)
    bad_questions = write_file(tmp_path, "bad_questions.json", [])
    bad_openie = write_file(tmp_path, "bad_openie.json", {"docs": "x"})
    for argv in (
        eval_args(toy_dataset, toy_home, questions=bad_questions),
        eval_args(toy_dataset, toy_home, openie=bad_openie),
        eval_args(toy_dataset, toy_home, k="0"),
        ["ingest", tmp_path / "missing-source", "--home", toy_home],
        ["query", "", "--home", toy_home],
    ):
        assert_user_error(qortex(*argv))
    assert stored_state(toy_home) == before
    assert answer_ids(toy_home, embedder) == answer


def test_eval_failing_midway_keeps_the_published_snapshot(
    qortex, toy_home, toy_dataset, tmp_path, embedder
):
    """An embedder that fails after the chunks were synced: the published snapshot still answers."""
    latest, versions, _ = stored_state(toy_home)
    answer = answer_ids(toy_home, embedder)
    proc = qortex(
        *eval_args(toy_dataset, toy_home), env={"QORTEX_EMBEDDER": f"st:{tmp_path / 'no-model'}"}
    )
    assert_user_error(proc, "no-model")
    assert snap.latest_name(toy_home) == latest and snap.list_versions(toy_home) == versions
    assert answer_ids(toy_home, embedder) == answer


def test_ingest_failing_midway_keeps_the_published_snapshot(qortex, toy_home, tmp_path, embedder):
    """The Dagster ingest job fails at its embeddings step: one error line, LATEST unchanged and answering."""
    source = tmp_path / "notes"
    source.mkdir()
    (source / "pump.md").write_text(
        "# Pump\n\nThe Orion Pump is serviced by Mara Lind every spring.\n"
    )
    latest, versions, _ = stored_state(toy_home)
    answer = answer_ids(toy_home, embedder)
    proc = qortex(
        "ingest",
        source,
        "--home",
        toy_home,
        "--quiet",
        env={"QORTEX_EMBEDDER": f"st:{tmp_path / 'no-model'}"},
        subprocess=True,
    )
    assert_user_error(proc, "no-model")
    assert snap.latest_name(toy_home) == latest and snap.list_versions(toy_home) == versions
    assert answer_ids(toy_home, embedder) == answer
