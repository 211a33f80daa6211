"""How the MCP tests start ``qortex mcp`` over stdio: this checkout's code, offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters


def server_params(home: Path) -> StdioServerParameters:
    """``python -m qortex_cli mcp --home HOME`` in the repository root, with no network."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "qortex_cli", "mcp", "--home", str(home)],
        env={
            "PYTHONPATH": os.pathsep.join(sys.path),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        },
        cwd=str(Path(__file__).resolve().parents[1]),
    )
