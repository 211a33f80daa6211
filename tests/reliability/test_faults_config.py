"""A malformed ``dagster.yaml`` under the home (a folder reused from another tool): every command
that opens the Dagster instance fails with one line naming the file; nothing is written."""

from __future__ import annotations

import pytest
from faults import error_line, published, run_cli

BODIES = {
    "not YAML": "run_coordinator: [unclosed\n",
    "a list": "- a\n- b\n",
    "a string": "just a string\n",
    "unknown key": "foo: bar\n",
    "wrong type": "storage:\n  sqlite: 7\n",
    "not UTF-8": b"\xff\xfe\x00telemetry",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BODIES))
def test_a_malformed_dagster_yaml_is_one_line_naming_it(
    case, toy_home, tmp_path, capsys, monkeypatch
):
    instance = toy_home / "dagster"
    instance.mkdir()
    target = instance / "dagster.yaml"
    body = BODIES[case]
    target.write_bytes(body if isinstance(body, bytes) else body.encode())
    monkeypatch.setenv("DAGSTER_HOME", str(instance))
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("Ivo Lark paints harbour landscapes.\n")
    before = published(toy_home)
    for argv in (("ingest", src, "--home", toy_home), ("factors", "update", "--home", toy_home)):
        error_line(run_cli(capsys, *argv), 2, str(target), "not a valid Dagster instance config")
    assert published(toy_home) == before
    assert target.read_bytes() == (body if isinstance(body, bytes) else body.encode())
    answered = run_cli(capsys, "query", "Who is Ivo Lark?", "--home", toy_home)
    assert answered.code == 0, answered.stderr  # queries never open the instance


PROFILES = {
    "nested too deeply": ("[" * 100_000 + "]" * 100_000).encode(),
    "not UTF-8": b'{"mine": {"relevance": 1.0}}\xff',
    "larger than 1 MB": b'{"mine": {"relevance": 1.0}, "pad": "' + b"x" * (1 << 20) + b'"}',
    "not JSON": b'{"mine": ',
}


@pytest.mark.parametrize("case", sorted(PROFILES))
def test_a_malformed_profiles_json_is_one_line_naming_it(case, toy_home, capsys):
    target = toy_home / "profiles.json"
    target.write_bytes(PROFILES[case])
    asked = run_cli(capsys, "query", "Who is Orlan Vesk?", "--home", toy_home, "--profile", "mine")
    error_line(asked, 2, str(target), "fix or remove it")
    target.unlink()
    assert run_cli(capsys, "query", "Who is Orlan Vesk?", "--home", toy_home).code == 0
