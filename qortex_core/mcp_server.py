"""``qortex mcp``: the memory as an MCP server over stdio.

Tools: ``qortex_query`` and ``qortex_feedback`` (read and teach), ``qortex_remember``,
``qortex_update``, ``qortex_forget`` and ``qortex_history`` (write). Input schemas carry
descriptions, an enum for ``mode`` and bounds for ``top_k``. :func:`serve` loads the embedder
before it answers anything, so the first query costs a query, not a model load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from qortex_core.errors import QortexError
from qortex_core.query import modes
from qortex_core.query.validation import MAX_TOP_K

if TYPE_CHECKING:  # the Literal below is built at run time, which mypy cannot evaluate
    ModeName = str
else:
    ModeName = Literal[modes.names()]  # the MCP enum: registered modes
RecordId = Annotated[str, Field(description="A memory id (m_...) or a passage id (p_...).")]
ISO_TIME = "ISO 8601 date or date-time, e.g. 2026-03-01 or 2026-03-01T09:30:00Z"
INSTRUCTIONS = (
    "Long-term memory. qortex_query retrieves passages and rules (each passage says its tier: "
    "'fresh' for memories written and not yet consolidated, 'graph' for the snapshot); then call "
    "qortex_feedback with the query_id and the ids of results that helped (accepted), did not "
    "(rejected) or partly did (partial). qortex_remember stores a fact at once; qortex_update "
    "revises it; qortex_forget removes it from search; qortex_history shows every revision."
)


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
    """The memory behind the tools (its retriever follows new snapshots by itself)."""

    def __init__(self, config: MCPConfig) -> None:
        self.config = config
        self._memory = None

    @property
    def memory(self):
        if self._memory is None:
            from qortex_core.memory.api import Memory, MemoryOptions

            self._memory = Memory(
                self.config.home, self.config.tenant, options=MemoryOptions(channel="mcp")
            )
        return self._memory

    def warm(self) -> None:
        """Load the embedder and the snapshot now (a missing snapshot is fine: fresh tier only)."""
        self.memory.embedder.embed(["warm up"])
        try:
            self.memory.retriever()
        except QortexError:
            pass  # the first query reports it as an error result


def result_payload(result: Any, max_text_chars: int) -> dict:
    """A QueryResult as a JSON-able dict with passage texts shortened."""
    data = asdict(result)
    for hit in data.get("passages", []):
        hit["text"] = hit["text"][:max_text_chars]
    return data


def _tool(server: MCPServer):
    """Register a function as a tool whose description is its docstring on one line."""

    def register(fn):
        text = " ".join((fn.__doc__ or "").split())
        return server.tool(description=text, structured_output=True)(fn)

    return register


def _call(fn, *args, **kwargs):
    """Run a library call; a QortexError becomes the tool's error result (one line)."""
    try:
        return fn(*args, **kwargs)
    except QortexError as exc:
        raise ToolError(" ".join(str(exc).split())) from exc


def _query_tool(server: MCPServer, session: _Session, config: MCPConfig) -> None:
    @_tool(server)
    def qortex_query(
        query: Annotated[str, Field(description="What to recall, in natural language.")],
        top_k: Annotated[
            int, Field(ge=1, le=MAX_TOP_K, description=f"How many passages (1-{MAX_TOP_K}).")
        ] = 5,
        mode: Annotated[
            ModeName, Field(description="Retrieval mode; auto routes each query itself.")
        ] = modes.DEFAULT,
        domains: Annotated[
            list[str] | None, Field(description="Only results from these domains.")
        ] = None,
        profile: Annotated[
            str | None, Field(description="Scoring profile name (default: relevance only).")
        ] = None,
        since: Annotated[
            str | None,
            Field(description=f"Only results whose event time is on or after: {ISO_TIME}."),
        ] = None,
        until: Annotated[
            str | None,
            Field(description=f"Only results whose event time is on or before: {ISO_TIME}."),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(ge=0.0, le=1.0, description="Drop hits below this relevance (0-1)."),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(description=f"Answer what was true at this time (default: now): {ISO_TIME}."),
        ] = None,
        include_superseded: Annotated[
            bool, Field(description="Also return statements a later one superseded.")
        ] = False,
    ) -> dict[str, Any]:
        """Retrieve passages, concepts and rules for a query (what is true now, or as_of a
        time); each passage has valid_from, valid_until and superseded_by; returns a query_id
        for feedback."""
        result = _call(
            session.memory.search,
            query,
            top_k=top_k,
            mode=mode,
            since=since,
            until=until,
            domain=domains or None,
            profile=profile,
            min_relevance=min_relevance,
            as_of=as_of,
            include_superseded=include_superseded,
        )
        return result_payload(result, config.max_text_chars)


def _feedback_tool(server: MCPServer, session: _Session) -> None:
    @_tool(server)
    def qortex_feedback(
        query_id: Annotated[str, Field(description="The query_id returned by qortex_query.")],
        accepted: Annotated[
            list[str] | None, Field(description="Ids of results that helped.")
        ] = None,
        rejected: Annotated[
            list[str] | None, Field(description="Ids of results that did not.")
        ] = None,
        partial: Annotated[list[str] | None, Field(description="Ids that partly helped.")] = None,
    ) -> dict[str, Any]:
        """Judge results of an earlier qortex_query; the concepts behind them are boosted or
        suppressed in later queries."""
        events = _call(
            session.memory.feedback, query_id, accepted or [], rejected or [], partial or []
        )
        return {
            "query_id": query_id,
            "recorded": len(events),
            "concepts": sorted({c for e in events for c in e.concept_ids}),
        }


def _write_tools(server: MCPServer, session: _Session) -> None:
    @_tool(server)
    def qortex_remember(
        text: Annotated[str, Field(description="The fact to remember (at most 1 MB).")],
        time: Annotated[
            str | None, Field(description=f"When it happened (event time): {ISO_TIME}.")
        ] = None,
        domain: Annotated[str | None, Field(description="A domain to file it under.")] = None,
        source: Annotated[str | None, Field(description="Where it came from.")] = None,
    ) -> dict[str, Any]:
        """Store a memory durably; it is searchable at once (tier 'fresh') and joins the graph
        at the next consolidation. Secrets in the text are redacted before storage."""
        record = _call(session.memory.remember, text, time=time, domain=domain, source=source)
        return asdict(record)

    @_tool(server)
    def qortex_update(
        id: RecordId,
        text: Annotated[str, Field(description="The new text of the memory.")],
    ) -> dict[str, Any]:
        """Revise a memory: a new revision replaces it in search; history keeps the old one."""
        return asdict(_call(session.memory.update, id, text))

    @_tool(server)
    def qortex_forget(id: RecordId) -> dict[str, Any]:
        """Forget a memory or a file's passage. Irreversible for search: it leaves every result
        at once and the next snapshot. qortex_history still keeps the record and its text."""
        return asdict(_call(session.memory.forget, id))

    @_tool(server)
    def qortex_history(id: RecordId) -> dict[str, Any]:
        """Every revision of a memory, oldest first: text, event time, when and who wrote it."""
        revisions = _call(session.memory.history, id)
        return {"id": id, "revisions": [asdict(r) for r in revisions]}


def build_server(config: MCPConfig = MCPConfig(), session: _Session | None = None) -> MCPServer:
    """An MCPServer whose tools read, teach and write one tenant's memory."""
    server = MCPServer(name="qortex", instructions=INSTRUCTIONS)
    session = session or _Session(config)
    _query_tool(server, session, config)
    _feedback_tool(server, session)
    _write_tools(server, session)
    return server


def serve(home: str | Path | None = None, tenant: str | None = None) -> None:
    """Load the embedder, then run the server on stdin/stdout until the client disconnects."""
    config = MCPConfig(home=str(home) if home else None, tenant=tenant)
    session = _Session(config)
    session.warm()
    build_server(config, session).run("stdio")
