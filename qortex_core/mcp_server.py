"""``qortex mcp``: the memory as an MCP server, over stdio or streamable HTTP.

Tools: ``qortex_query``, ``qortex_feedback``, ``qortex_get``, ``qortex_list``,
``qortex_history``, ``qortex_neighbors`` and ``qortex_path`` (read, and teach),
``qortex_remember``, ``qortex_update``, ``qortex_forget`` and ``qortex_consolidate`` (write).
Each declares annotations (``readOnlyHint`` on the readers, ``destructiveHint`` on forget,
``idempotentHint`` where repeating changes nothing more) and a typed ``outputSchema``: the JSON
Schema of the record it returns (``to_dict()`` of :mod:`qortex_core.jsonable` records).

The server answers ``initialize`` at once: the embedder loads on a background thread, and the
first call that needs it waits. Over HTTP every request carries a bearer token that maps to one
tenant (:mod:`qortex_core.serving.auth`); over stdio the server serves one tenant.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings

from qortex_core.serving.backend import Backend, Tenants, WarmEmbedder
from qortex_core.serving.read_tools import feedback_tool, graph_tools, query_tool, record_tools
from qortex_core.serving.tool_kit import Caller
from qortex_core.serving.write_tools import consolidate_tool, write_tools

NAME = "qortex"
INSTRUCTIONS = (
    "Long-term memory. qortex_query retrieves passages and rules (each passage says its tier: "
    "'fresh' for memories written and not yet consolidated, 'graph' for the snapshot); then call "
    "qortex_feedback with the query_id and the ids of results that helped (accepted), did not "
    "(rejected) or partly did (partial). qortex_remember stores a fact at once (with optional "
    "metadata); qortex_update revises it and qortex_forget removes it from search (pass "
    "expected_revision from qortex_get to refuse a write over someone else's); qortex_get, "
    "qortex_list and qortex_history read records; qortex_consolidate moves written memories "
    "into the graph, where qortex_neighbors and qortex_path explore it."
)


@dataclass(frozen=True)
class MCPConfig:
    """Attributes:
    home: the data home (None: ``$QORTEX_HOME`` or ``~/.qortex``).
    tenant: the tenant a stdio server serves (over HTTP each token names its own).
    max_text_chars: passage text is cut to this length in query results.
    consolidate: runs ``qortex consolidate`` for (home, tenant) and returns its JSON summary;
        None: no ``qortex_consolidate`` tool (the library never runs the Dagster job itself).
    """

    home: str | None = None
    tenant: str | None = None
    max_text_chars: int = 600
    consolidate: Callable[[str | Path | None, str], dict] | None = None


def version() -> str:
    """The installed qortex distribution's version."""
    try:
        return importlib.metadata.version("qortex")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def build_server(
    config: MCPConfig = MCPConfig(),
    embedder=None,
    tokens: dict[str, str] | None = None,
    url: str = "http://127.0.0.1",
) -> MCPServer:
    """The server and its tools.

    Args:
        config: what to serve.
        embedder: shared by every tenant (None: the configured one, loaded on first use).
        tokens: token digest -> tenant (:func:`~qortex_core.serving.auth.read_tokens`); given,
            every HTTP request needs one of them and reads only its tenant.
        url: the server's own address (the token issuer it names).
    """
    backend = Backend(config.home, embedder or WarmEmbedder(_configured), config.consolidate)
    caller = Caller(Tenants(backend), config.tenant, require_token=tokens is not None)
    tools = [query_tool(caller, config.max_text_chars), feedback_tool(caller)]
    tools += record_tools(caller) + graph_tools(caller) + write_tools(caller)
    if config.consolidate is not None:
        tools.append(consolidate_tool(caller))
    settings, verifier = None, None
    if tokens is not None:
        from qortex_core.serving.auth import TenantTokens

        settings = AuthSettings(issuer_url=url, resource_server_url=None)  # type: ignore[arg-type]
        verifier = TenantTokens(tokens)
    return MCPServer(
        name=NAME, version=version(), instructions=INSTRUCTIONS, tools=tools,
        log_level="WARNING", auth=settings, token_verifier=verifier,
    )  # fmt: skip


def _configured():
    from qortex_core.embed import make_embedder

    return make_embedder()


def serve(config: MCPConfig = MCPConfig()) -> None:
    """Serve on stdin/stdout until the client disconnects (the embedder loads meanwhile)."""
    embedder = WarmEmbedder(_configured).start()
    build_server(config, embedder).run("stdio")


def serve_http(config: MCPConfig, host: str, port: int, tokens: dict[str, str]) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp``; each request needs a bearer token of
    ``tokens`` (digest -> tenant) and reads that tenant only."""
    embedder = WarmEmbedder(_configured).start()
    server = build_server(config, embedder, tokens, url=f"http://{host}:{port}")
    server.run("streamable-http", host=host, port=port)
