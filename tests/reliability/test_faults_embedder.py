"""Embedder mismatch: a home queried with an embedder other than the one its snapshot was built
with is refused with one line naming both models (another dimension, or the same dimension
under another name, or the same name with another dimension), through a second embedder served
by the loopback OpenAI-protocol embeddings server. Re-ingesting re-embeds on purpose.
"""

from __future__ import annotations

import json

import pytest
from conftest import BRIDGE_QUESTION
from faults import error_line, published, run_cli
from openai_loopback import EmbeddingsLoopback

from qortex_core.embed import BUNDLED_MODEL, OpenAIEmbedder, OpenAIEmbedderConfig
from qortex_core.errors import ConfigError
from qortex_core.query.retriever import Retriever


@pytest.fixture(scope="module")
def server():
    with EmbeddingsLoopback({"loop-8": 8, "loop-384": 384, BUNDLED_MODEL: 8}) as running:
        yield running


def remote(server: EmbeddingsLoopback, model: str) -> OpenAIEmbedder:
    return OpenAIEmbedder(OpenAIEmbedderConfig(model=model, base_url=server.base_url))


@pytest.mark.parametrize(
    "model, fragments",
    [
        ("loop-8", ("'loop-8'", f"'{BUNDLED_MODEL}' (384-d)")),  # another dimension
        ("loop-384", ("'loop-384'", f"'{BUNDLED_MODEL}' (384-d)")),  # same dimension
        (BUNDLED_MODEL, ("makes 8-d vectors", "(384-d)")),  # same name, another dimension
    ],
)
def test_another_embedder_is_refused_naming_both(server, toy_home, model, fragments):
    with pytest.raises(ConfigError) as refused:
        Retriever.open(toy_home, embedder=remote(server, model))
    message = str(refused.value)
    assert "\n" not in message and "re-ingest" in message
    for fragment in fragments:
        assert fragment in message, message
    assert Retriever.open(toy_home).query(BRIDGE_QUESTION).passages  # the home still answers


@pytest.mark.slow
def test_the_cli_refuses_a_mismatch_and_reingesting_re_embeds(
    server, tmp_path, capsys, monkeypatch
):
    src = tmp_path / "src"
    src.mkdir()
    (src / "vesk.md").write_text("# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n")
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("QORTEX_EMBED_BASE_URL", server.base_url)
    monkeypatch.setenv("QORTEX_EMBEDDER", "openai:loop-8")
    built = run_cli(capsys, "ingest", src, "--home", home, "--quiet", "--json")
    assert built.code == 0, built.stderr
    ask = ("query", "Where was Orlan Vesk born?", "--home", home, "--json", "--min-relevance", "0")
    assert json.loads(run_cli(capsys, *ask).stdout)["passages"]  # its own embedder answers

    monkeypatch.setenv("QORTEX_EMBEDDER", "bundled")
    before = published(home)
    error_line(run_cli(capsys, *ask), 2, "'loop-8' (8-d)", f"'{BUNDLED_MODEL}'", before[0])
    assert published(home) == before  # refused, nothing changed

    again = run_cli(capsys, "ingest", src, "--home", home, "--quiet", "--json")
    assert again.code == 0, again.stderr  # re-embedding on purpose publishes a new snapshot
    answered = json.loads(run_cli(capsys, *ask).stdout)
    assert answered["passages"][0]["title"] == "Orlan Vesk"
    assert published(home)[0] != before[0]
