"""The secret scan (issue 13): every format through files, JSON corpora, a file name, an agent
write (consolidated into the graph), a query to the recognition LLM and the logs (including an
embedding endpoint URL with a password); then every byte under the data home and DAGSTER_HOME,
every log line and every request body the LLM received is searched for every secret value."""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

import pytest
import secret_formats
from recognition_loopback import RecognitionLoopback

from pipelines.resources import EmbedderResource
from qortex_cli.runs.local import run_ingest
from qortex_core.agent.api import open_memory
from qortex_core.embed import OpenAIEmbedder, OpenAIEmbedderConfig
from qortex_core.errors import ConfigError
from qortex_core.llm.client import LLMConfig
from qortex_core.query.recognition import LLMRecognizer, RecognitionConfig
from qortex_core.query.retriever import Retriever
from qortex_core.redact import MARK

KEY = "recognition-loopback-key-0123456789"
EMBEDDERS: dict[str, object] = {}


class SessionEmbedder(EmbedderResource):
    def get(self):
        return EMBEDDERS["session"]


class Collect(logging.Handler):
    """Every record of every logger, formatted as a handler would print it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.getMessage()}")


def _write_sources(source: Path, s: dict[str, str], file_token: str) -> None:
    source.mkdir(parents=True)
    body = "\n\n".join(["Velmora operations notes."] + secret_formats.lines(s))
    (source / "ops.md").write_text(f"# Velmora ops\n\n{body}\n")
    rows = [{"title": "Velmora corpus", "text": t} for t in secret_formats.lines(s)]
    escaped = ", ".join(
        '{"title": "escaped", "text": "%s"}' % t for t in secret_formats.json_escaped(s)
    )
    (source / "corpus.json").write_text(json.dumps(rows)[:-1] + ", " + escaped + "]")
    (source / f"deploy {file_token}.md").write_text("# Deploy\n\nVelmora deploys nightly.\n")


def test_no_secret_in_the_home_dagster_home_logs_or_llm_requests(
    tmp_path: Path, monkeypatch, embedder, capfd
) -> None:
    s = secret_formats.fresh()
    file_token = "ghp_" + secrets.token_hex(18)
    url_password = "urlpw" + secrets.token_hex(8)
    values = {**s, "file_token": file_token, "url_password": url_password}
    source, home = tmp_path / "src", tmp_path / "home"
    _write_sources(source, s, file_token)
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    monkeypatch.setenv("DAGSTER_HOME", "unset-after-the-test")  # run_ingest exports it
    monkeypatch.delenv("DAGSTER_HOME")
    collect = Collect()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(collect)
    root.setLevel(logging.DEBUG)
    try:
        EMBEDDERS["session"] = embedder
        memo = "\n".join(["Velmora agent memo."] + secret_formats.lines(s))  # an agent write
        written = open_memory(home, embedder=embedder).remember(memo)
        assert "Velmora agent memo." in written.text and MARK in written.text
        run_ingest(source, home, resources={"embedder": SessionEmbedder()}, progress=True)
        with RecognitionLoopback({}, api_key=KEY) as srv:
            llm = LLMConfig(model="r", base_url=srv.base_url, api_key=KEY, max_retries=0)
            recognizer = LLMRecognizer(RecognitionConfig(llm))
            retriever = Retriever.open(home, embedder=embedder, recognizer=recognizer)
            query = "\n".join(["Velmora operations notes"] + secret_formats.lines(s))
            retriever.query(query, top_k=3, mode="hipporag")
            bodies = json.dumps([r.body for r in srv.requests()])
            asked = [r.query for r in srv.requests()]
            endpoint = f"http://svc:{url_password}@127.0.0.1:{srv.base_url.split(':')[2]}"
            with pytest.raises(ConfigError) as err:
                OpenAIEmbedder(OpenAIEmbedderConfig(model="m", base_url=endpoint)).embed(["x"])
    finally:
        root.removeHandler(collect)
        root.setLevel(old_level)
    assert asked and all(MARK in q and "Velmora" in q for q in asked)  # the LLM was asked
    logs = "\n".join(collect.lines)
    assert any("HTTP Request" in line for line in collect.lines)  # httpx logged the requests
    out = capfd.readouterr()
    places = {
        "llm requests": bodies,
        "logs": logs,
        "stdout/stderr": out.out + out.err,
        "embedding error": str(err.value),
    }
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.parts[-2:] == ("dagster", "dagster.yaml") for p in files)  # DAGSTER_HOME inside
    stored = b"".join(p.read_bytes() for p in files)
    assert b"Velmora operations notes" in stored  # plain text is findable, so a leak would be
    assert b"Velmora agent memo." in stored
    leaks = [(where, k) for where, text in places.items() for k, v in values.items() if v in text]
    leaks += [
        (str(p.relative_to(home)), k)
        for p in files
        for k, v in values.items()
        if v.encode() in p.read_bytes()
    ]
    assert leaks == []
