"""The typed settings object: every variable parsed once, a bad value refused with one line."""

from __future__ import annotations

import pytest

from qortex_core.errors import ConfigError
from qortex_core.llm import LLMConfig
from qortex_core.settings import get_settings


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"QORTEX_EXTRACTOR": "ofline"},
            "QORTEX_EXTRACTOR='ofline' is not one of: auto, llm, offline, recorded",
        ),
        ({"QORTEX_MAX_CONCURRENT": "0"}, "QORTEX_MAX_CONCURRENT='0' must be a positive integer"),
        ({"QORTEX_SHARDS": "257"}, "QORTEX_SHARDS='257' must be a positive integer up to 256"),
        ({"QORTEX_SHARDS": "-1"}, "QORTEX_SHARDS='-1' must be a positive integer"),
        ({"QORTEX_SNAPSHOT_KEEP": "²"}, "QORTEX_SNAPSHOT_KEEP='²' must be a positive integer"),
        ({"QORTEX_LLM_TIMEOUT_S": "soon"}, "QORTEX_LLM_TIMEOUT_S='soon' is not a number"),
        ({"QORTEX_SENSOR": "yes"}, "QORTEX_SENSOR='yes' is not one of: on, off"),
        ({"QORTEX_LLM_MODE": "xml"}, "QORTEX_LLM_MODE='xml' is not one of: tools, json"),
    ],
)
def test_bad_value_is_one_line_naming_the_variable(env: dict, line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        get_settings(env)
    assert str(caught.value) == line


def test_empty_is_unset_and_documented_defaults_hold() -> None:
    settings = get_settings({"QORTEX_EXTRACTOR": "", "QORTEX_MAX_CONCURRENT": ""})
    assert (settings.extractor, settings.max_concurrent, settings.snapshot_keep) == ("auto", 2, 5)
    assert (settings.ingest_cron, settings.ingest_timezone) == ("0 3 * * *", "UTC")
    assert not settings.provided("QORTEX_EXTRACTOR")


def test_fallbacks_and_secrets_stay_out_of_repr() -> None:
    settings = get_settings({"OPENAI_API_KEY": "k-openai-123", "QORTEX_LLM_CONCURRENCY": "7"})
    assert settings.llm_key == "k-openai-123" and settings.recognition_key == "k-openai-123"
    assert "k-openai-123" not in repr(settings)
    config = LLMConfig.from_env({"OPENAI_API_KEY": "k-openai-123", "QORTEX_LLM_CONCURRENCY": "7"})
    assert (config.model, config.concurrency, config.api_key) == ("gpt-4o-mini", 7, "k-openai-123")


def test_parsed_once_per_distinct_environment() -> None:
    env = {"QORTEX_HOME": "/tmp/a", "UNRELATED": "x"}
    assert get_settings(env) is get_settings({**env, "UNRELATED": "y"})
    assert get_settings(env) is not get_settings({"QORTEX_HOME": "/tmp/b"})


def test_definitions_refuse_a_typo_before_building_anything() -> None:
    from pipelines.definitions import build_definitions

    with pytest.raises(ConfigError, match=r"^QORTEX_EXECUTOR='threads' is not one of"):
        build_definitions({"QORTEX_EXECUTOR": "threads"})


def test_configuration_is_read_only_through_settings() -> None:
    """No ``os.environ.get``, ``os.getenv`` or ``os.environ[...]`` read outside settings.py."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    reads = []
    for package in ("qortex_core", "pipelines", "assets", "qortex_bench"):
        for path in (repo / package).rglob("*.py"):
            if path.name == "settings.py" and path.parent.name == "qortex_core":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                text = ast.unparse(node) if isinstance(node, (ast.Call, ast.Subscript)) else ""
                if (
                    isinstance(node, ast.Call)
                    and (text.startswith("os.environ.get(") or text.startswith("os.getenv("))
                ) or (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Load)
                    and text.startswith("os.environ[")
                ):
                    reads.append(f"{path.relative_to(repo)}:{node.lineno}: {text[:60]}")
    assert reads == []


def test_a_given_mapping_is_read_alone_whatever_the_process_environment(monkeypatch):
    monkeypatch.setenv("QORTEX_RECOGNITION_MODEL", "from-the-process")
    assert get_settings({}).recognition_model == ""  # not merged with os.environ
    assert get_settings({"QORTEX_RECOGNITION_MODEL": "given"}).recognition_model == "given"
    assert get_settings().recognition_model == "from-the-process"
    monkeypatch.delenv("QORTEX_RECOGNITION_MODEL")
    assert get_settings().recognition_model == ""  # the cache is keyed by the values read
