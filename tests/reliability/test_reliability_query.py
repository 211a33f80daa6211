"""Bad query input: a typed QueryError in the library, one line and exit 2 in the CLI, long queries truncated and flagged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION

from qortex_cli.main import main
from qortex_core.errors import QueryError, SnapshotError
from qortex_core.query.retriever import MAX_QUERY_CHARS, MAX_TOP_K, Retriever

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def retriever(_toy_home_session, embedder) -> Retriever:
    return Retriever.open(_toy_home_session[0], embedder=embedder)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"text": ""}, "empty"),
        ({"text": " \n\t "}, "empty"),
        ({"text": None}, "empty"),
        ({"text": b"bytes are not text"}, "empty"),
        ({"text": "Orlan \udcff Vesk"}, "not valid UTF-8"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": -3}, "top_k"),
        ({"top_k": MAX_TOP_K + 1}, "top_k"),
        ({"top_k": 10**12}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"mode": "bogus"}, "unknown mode"),
        ({"domains": ["no-such-domain"]}, "unknown domain 'no-such-domain'"),
        ({"domains": "default"}, "list of domain names"),
    ],
)
def test_bad_query_is_a_query_error(retriever, kwargs, fragment):
    args = dict(text=BRIDGE_QUESTION, top_k=5, mode="hipporag", domains=None) | kwargs
    with pytest.raises(QueryError, match=fragment):
        retriever.query(**args)


def test_known_domain_and_max_top_k_are_fine(retriever):
    result = retriever.query(BRIDGE_QUESTION, top_k=MAX_TOP_K, domains=["default"])
    assert 1 <= len(result.passages) <= MAX_TOP_K and all(
        h.domain == "default" for h in result.passages
    )


def test_a_megabyte_query_is_truncated_and_flagged(retriever):
    text = (BRIDGE_QUESTION + " ") * (1_000_000 // (len(BRIDGE_QUESTION) + 1) + 1)
    assert len(text) > 1_000_000
    result = retriever.query(text, top_k=3)
    assert len(result.query) <= MAX_QUERY_CHARS and 1 <= len(result.passages) <= 3
    assert f"query truncated to {MAX_QUERY_CHARS} characters" in result.fallback
    short = retriever.query(BRIDGE_QUESTION, top_k=3)
    assert short.fallback is None or "truncated" not in short.fallback


@pytest.mark.parametrize("version", ["99", "v000099-00000000", "../etc"])
def test_unknown_snapshot_version(_toy_home_session, embedder, version):
    with pytest.raises(SnapshotError):
        Retriever.open(_toy_home_session[0], embedder=embedder, version=version)


@pytest.fixture
def cli(monkeypatch, capsys, embedder):
    """``qortex ARGV`` in this process with the session's embedder (the real model, loaded once)."""
    monkeypatch.setattr("qortex_core.query.retriever.make_embedder", lambda *a: embedder)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--top-k", "1000"], "top_k"),
        (["--top-k", "-1"], "top_k"),
        (["--domain", "nowhere"], "unknown domain"),
        (["--mode", "sideways"], "unknown mode"),
        (["--version", "99"], "no snapshot version 99"),
        (["--version", "../../etc"], "not a snapshot name"),
        (["--tenant", "Not A Tenant"], "bad tenant name"),
    ],
)
def test_cli_bad_query_is_one_line(cli, _toy_home_session, argv, fragment):
    code, out, err = cli("query", BRIDGE_QUESTION, "--home", _toy_home_session[0], *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("qortex: error:") and fragment in lines[0]


def test_cli_invalid_utf8_argv_in_a_real_process(_toy_home_session):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "qortex_cli.main",
            "query",
            b"Orlan \xff\xfe Vesk",
            "--home",
            str(_toy_home_session[0]),
        ],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and proc.stdout == b"", err
    assert "Traceback" not in err and err.strip().splitlines() == [
        "qortex: error: query is not valid UTF-8 text (it holds undecodable bytes)"
    ]
