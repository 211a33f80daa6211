"""The tokens file of ``qortex mcp --http`` and the command's usage errors (before any load)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from qortex_core.errors import ConfigError
from qortex_core.serving.auth import TenantTokens, parse_tokens

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
from faults import error_line, run_cli  # noqa: E402

GOOD = "# token tenant\n\nalpha-token-0123456789 alpha\nbravo-token-0123456789 bravo\n"


def test_tokens_map_to_tenants_and_unknown_ones_to_nothing():
    verifier = TenantTokens(parse_tokens(GOOD))
    token = anyio.run(verifier.verify_token, "bravo-token-0123456789")
    assert token.claims == {"tenant": "bravo"} and token.subject == "bravo"
    assert anyio.run(verifier.verify_token, "carol-token-0123456789") is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "lists no token"),
        ("short alpha\n", r"16\+ characters"),
        ("alpha-token-0123456789\n", "expected 'TOKEN TENANT'"),
        ("alpha-token-0123456789 Alpha!\n", "bad tenant name"),
        (GOOD + "alpha-token-0123456789 carol\n", "listed twice"),
    ],
)
def test_a_bad_tokens_file_is_one_line(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_tokens(text)


def test_http_usage_errors_come_before_anything_loads(tmp_path, capsys):
    home = tmp_path / "home"
    error_line(run_cli(capsys, "mcp", "--http", "127.0.0.1:8765", "--home", home), 2, "--tokens")
    (tmp_path / "t").write_text(GOOD)
    bad = run_cli(capsys, "mcp", "--http", "localhost", "--tokens", tmp_path / "t", "--home", home)
    error_line(bad, 2, "HOST:PORT")
    error_line(run_cli(capsys, "mcp", "--tokens", tmp_path / "t", "--home", home), 2, "--http")
    assert not home.exists()
