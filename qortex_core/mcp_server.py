"""``qortex mcp``: the memory as an MCP server over stdio (tools ``qortex_query`` and ``qortex_feedback``).

The retriever is opened on the first call (loading the embedder takes seconds),
so the server answers ``initialize`` and ``tools/list`` at once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from qortex_core.errors import QortexError
from qortex_core.query import modes

ModeName = Literal[modes.names()]  # type: ignore[valid-type]  # the MCP enum: registered modes


@dataclass(frozen=True)
class MCPConfig:
    """Attributes:
    home: the data home (None: ``$QORTEX_HOME`` or ``~/.qortex``).
    tenant: the tenant whose memory the server serves.
    max_text_chars: passage text is cut to this length in tool results.
    """

    home: str | None = None
    tenant: str | None = None
    max_text_chars: int = 600


class _Session:
    """The lazily opened retriever behind the tools."""

    def __init__(self, config: MCPConfig) -> None:
        self.config = config
        self._retriever = None

    @property
    def retriever(self):
        if self._retriever is None:
            from qortex_core.query.retriever import Retriever

            self._retriever = Retriever.open(self.config.home, tenant=self.config.tenant)
        return self._retriever


def result_payload(result: Any, max_text_chars: int) -> dict:
    """A QueryResult as a JSON-able dict with passage texts shortened."""
    data = asdict(result)
    for hit in data.get("passages", []):
        hit["text"] = hit["text"][:max_text_chars]
    return data


def build_server(config: MCPConfig = MCPConfig()) -> MCPServer:
    """An MCPServer whose tools query and teach one tenant's memory."""
    server = MCPServer(
        name="qortex",
        instructions=(
            "Long-term memory. Call qortex_query to retrieve passages and rules; then call qortex_feedback with the "
            "query_id and the ids of results that helped (accepted), did not (rejected) or partly did (partial)."
        ),
    )
    session = _Session(config)

    @server.tool(structured_output=True)
    def qortex_query(
        query: str,
        top_k: int = 5,
        mode: ModeName = modes.DEFAULT,
        domains: list[str] | None = None,
        profile: str | None = None,
    ) -> dict[str, Any]:
        """Retrieve passages, concepts and rules for a query. Returns a query_id for qortex_feedback.

        Args:
            query: what to remember.
            top_k: how many passages (1-100).
            mode: the retrieval mode (auto, the default, routes each query itself).
            domains: only return results from these domains.
            profile: scoring profile name (default: relevance only).
        """
        try:
            result = session.retriever.query(
                query, top_k=top_k, mode=mode, domains=domains or None, profile=profile
            )
        except QortexError as exc:
            raise ToolError(str(exc)) from exc
        return result_payload(result, config.max_text_chars)

    @server.tool(structured_output=True)
    def qortex_feedback(
        query_id: str,
        accepted: list[str] | None = None,
        rejected: list[str] | None = None,
        partial: list[str] | None = None,
    ) -> dict[str, Any]:
        """Judge results of an earlier qortex_query by id; the concepts behind them are boosted or suppressed.

        Args:
            query_id: the query_id returned by qortex_query.
            accepted: ids of results that helped.
            rejected: ids of results that did not.
            partial: ids of results that partly helped.
        """
        try:
            events = session.retriever.feedback(
                query_id, accepted=accepted or [], rejected=rejected or [], partial=partial or []
            )
        except QortexError as exc:
            raise ToolError(str(exc)) from exc
        return {
            "query_id": query_id,
            "recorded": len(events),
            "concepts": sorted({c for e in events for c in e.concept_ids}),
        }

    return server


def serve(home: str | Path | None = None, tenant: str | None = None) -> None:
    """Run the server on stdin/stdout until the client disconnects."""
    build_server(MCPConfig(home=str(home) if home else None, tenant=tenant)).run("stdio")
