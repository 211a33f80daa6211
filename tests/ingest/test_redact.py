"""Secret redaction: each kind of secret is removed, prose is kept, an ingested home holds none."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
import secret_formats

from qortex_core.errors import ConfigError
from qortex_core.ingest import stages as index
from qortex_core.ingest.chunking import chunk_documents
from qortex_core.ingest.documents import (
    SourceConfig,
    load_documents,
    read_stored_documents,
    sync_documents,
)
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.query.retriever import Retriever
from qortex_core.redact import MARK, RedactionConfig, has_secret, redact
from qortex_core.storage.store import CHUNKS, PASSAGES, LanceStore


def fresh_secrets() -> dict[str, str]:
    """Unique secret values (random each run, so a match in the home cannot be a coincidence)."""
    hexa = secrets.token_hex(24)
    upper = secrets.token_hex(8).upper()
    return {
        "openai": "sk-proj-" + hexa,
        "aws": "AKIA" + upper[:16],
        "github": "ghp_" + secrets.token_hex(18),
        "slack": "xoxb-" + secrets.token_hex(12),
        "assigned": "v4lue" + secrets.token_hex(6),
        "bearer": "tok" + secrets.token_hex(14),
        "url_password": "pw" + secrets.token_hex(5),
        "key_body": "MIIE" + secrets.token_hex(20),
    }


def secret_document(s: dict[str, str]) -> str:
    return f"""# Velmora deployment

Orlan Vesk runs the Velmora service for Ostrania. The client uses {s["openai"]} as its key.
Set OPENAI_API_KEY={s["assigned"]} before starting. AWS access id {s["aws"]},
GitHub token {s["github"]}, Slack bot {s["slack"]}.

Requests carry `Authorization: Bearer {s["bearer"]}` and the database is
postgres://admin:{s["url_password"]}@db.velmora.example:5432/app for the Velmora service.

-----BEGIN RSA PRIVATE KEY-----
{s["key_body"]}
{s["key_body"][::-1]}
-----END RSA PRIVATE KEY-----

Ivo Lark paints harbour landscapes near Velmora.
"""


@pytest.mark.parametrize(
    "text, secret, kept",
    [
        (
            "key sk-proj-abcdefghijklmnopqrstuvwx1234 end",
            "sk-proj-abcdefghijklmnopqrstuvwx1234",
            "key [REDACTED] end",
        ),
        ("id AKIAABCDEFGHIJKLMNOP.", "AKIAABCDEFGHIJKLMNOP", "id [REDACTED]."),
        ("gh ghp_" + "a1" * 18, "ghp_" + "a1" * 18, "gh [REDACTED]"),
        ("slack xoxp-1234-5678-abcdef", "xoxp-1234-5678-abcdef", "slack [REDACTED]"),
        ('{"api_key": "hunter2hunter2"}', "hunter2hunter2", '{"api_key": "[REDACTED]"}'),
        ("db_password=s3cr3t!x and more", "s3cr3t!x", "db_password=[REDACTED] and more"),
        (
            "Authorization: Bearer abcDEF123456789.xyz",
            "abcDEF123456789.xyz",
            "Authorization: Bearer [REDACTED]",
        ),
        ("see https://bob:pa55word@example.org/x", "pa55word", "see https://bob:***@example.org/x"),
        (
            "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\nAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----\nz",
            "b3BlbnNzaA",
            "a\n[REDACTED PRIVATE KEY]\nz",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQ truncated", "MIIEvQ", "[REDACTED PRIVATE KEY]"),
    ],
)
def test_each_kind_is_redacted(text, secret, kept):
    assert has_secret(text)
    out = redact(text)
    assert secret not in out and out == kept
    assert redact(out) == out  # idempotent: redacted text is left alone


@pytest.mark.parametrize(
    "prose",
    [
        "Orlan Vesk is a composer. He was born in Ostrania.",
        "The password policy asks for long passwords; a token is given at the desk.",
        "See https://example.org/path?q=1 and mailto:someone@example.org for details.",
        "The basic idea of a bearer bond is simple.",
        "Risk-taking musicians like sk-8 skating.",
    ],
)
def test_prose_is_unchanged(prose):
    assert redact(prose) == prose and not has_secret(prose)


def test_config_off_and_extra_patterns():
    text = "token sk-proj-abcdefghijklmnopqrstuvwx1234 and EMP-123456"
    assert redact(text, RedactionConfig(enabled=False)) == text
    out = redact(text, RedactionConfig(extra_patterns=(r"EMP-\d{6}",)))
    assert "EMP-123456" not in out and "sk-proj" not in out
    with pytest.raises(ConfigError, match="bad redaction pattern"):
        RedactionConfig(extra_patterns=("(unclosed",))


def ingest(source: Path, home: Path, embedder) -> None:
    """The pipeline's stage functions, in order, without Dagster."""
    store = LanceStore.open(home)
    found = load_documents(SourceConfig(root=source))
    sync_documents(store, found.documents)
    index.build_index(
        store, home, chunk_documents(read_stored_documents(store)), OfflineExtractor(), embedder
    )


def test_no_secret_anywhere_under_an_ingested_home(tmp_path, embedder):
    s = fresh_secrets()
    source = tmp_path / "src"
    (source / "ops").mkdir(parents=True)
    (source / "ops" / "deploy.md").write_text(secret_document(s))
    unredacted = load_documents(SourceConfig(root=source, redaction=RedactionConfig(enabled=False)))
    assert all(
        v in unredacted.documents[0].sections[0].text.replace("\n", " ") or v == s["key_body"][::-1]
        for v in s.values()
    )  # the document really holds them when redaction is off
    home = tmp_path / "home"
    ingest(source, home, embedder)

    store = LanceStore.open(home)
    for table in ("documents", CHUNKS, PASSAGES):
        rows = store.read(table)
        assert rows.num_rows >= 1
        dump = str(
            rows.drop_columns([c for c in ("vector",) if c in rows.column_names]).to_pylist()
        )
        assert MARK in dump and "Velmora" in dump, table
        assert not [k for k, v in s.items() if v in dump], table
    result = Retriever.open(home, embedder=embedder).query("Velmora service database", top_k=3)
    assert result.passages and all(not has_secret(h.text) for h in result.passages)
    assert any("admin:***@db.velmora.example" in h.text for h in result.passages)

    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.suffix == ".arrow" for p in files) and any(".lance" in str(p) for p in files)
    control = [p for p in files if b"harbour landscapes near Velmora" in p.read_bytes()]
    assert {"documents.lance", "chunks.lance", "passages.arrow"} <= {
        part for p in control for part in p.parts
    }, "plain text is stored uncompressed, so a byte search can find a leak"
    leaks = [
        (str(p.relative_to(home)), k)
        for p in files
        for k, v in s.items()
        if v.encode() in p.read_bytes()
    ]
    assert leaks == []


@pytest.mark.parametrize("unit", ["a-", "a.", "x_", '"-----BEGIN RSA PRIVATE KEY-----', "password"])
def test_pathological_text_is_handled_whole(unit):
    """Inputs that make naive secret patterns backtrack quadratically finish in linear time."""
    text = unit * (400_000 // len(unit))
    out = redact(text)
    if "BEGIN" in unit:
        assert "PRIVATE KEY-----" not in out and out.count("[REDACTED PRIVATE KEY]") == text.count(
            "BEGIN"
        )
    else:
        assert out == text


def test_every_format_is_redacted_in_plain_text():
    s = secret_formats.fresh()
    for line in secret_formats.lines(s):
        out = redact(line)
        assert not [k for k, v in s.items() if v in out], (line, out)
        assert redact(out) == out
    assert "cache.velmora.example" in redact(secret_formats.lines(s)[2])  # the host is kept


def test_json_corpus_and_file_names_are_redacted_after_decoding(tmp_path):
    s = secret_formats.fresh()
    rows = [{"title": "Velmora ops", "text": t} for t in secret_formats.lines(s)]
    raw = (
        json.dumps(rows)[:-1]
        + ", "
        + ", ".join(
            '{"title": "escaped", "text": "%s"}' % t for t in secret_formats.json_escaped(s)
        )
        + "]"
    )
    assert "mysql:\\/\\/" in raw and "\\u0041KIA" in raw  # the JSON text really escapes them
    (tmp_path / "corpus.json").write_text(raw)
    (tmp_path / f"notes {s['github']}.md").write_text("# Notes\n\nVelmora runs at night.\n")
    found = load_documents(SourceConfig(root=tmp_path))
    dump = str([(d.doc_id, d.sections) for d in found.documents])
    assert len(found.documents) == 2 and "Velmora" in dump and MARK in dump
    assert not [k for k, v in s.items() if v in dump]
    assert "mysql://app:***@db.velmora.example/prod" in dump
    assert any(d.doc_id.startswith("notes [REDACTED].md~") for d in found.documents)
