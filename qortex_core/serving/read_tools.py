"""The tools that read (and teach): query, feedback, get, list, history, neighbors and path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from qortex_core.memory.records import MAX_LIST, MemoryRecord
from qortex_core.query import modes
from qortex_core.query.explore_types import GraphPath, Neighborhood
from qortex_core.query.results import QueryResult
from qortex_core.query.validation import MAX_TOP_K
from qortex_core.serving.results import FeedbackSummary, History, RecordList
from qortex_core.serving.tool_kit import READ_ONLY, Caller, make_tool, writes

if TYPE_CHECKING:  # the Literal below is built at run time, which mypy cannot evaluate
    ModeName = str
else:
    ModeName = Literal[modes.names()]  # the MCP enum: registered modes

ISO_TIME = "ISO 8601 date or date-time, e.g. 2026-03-01 or 2026-03-01T09:30:00Z"
RecordId = Annotated[str, Field(description="A memory id (m_...) or a passage id (p_...).")]
Since = Annotated[
    str | None, Field(description=f"Only results whose event time is on or after: {ISO_TIME}.")
]
Until = Annotated[
    str | None, Field(description=f"Only results whose event time is on or before: {ISO_TIME}.")
]
Name = Annotated[
    str,
    Field(description="A concept name; an unknown one resolves to the nearest concept."),
]


def query_tool(caller: Caller, max_text_chars: int) -> Tool:
    async def qortex_query(
        ctx: Context,
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
        since: Since = None,
        until: Until = None,
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
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="Only memories whose metadata match: {key: value} equality, "
                '{key: [a, b]} or {key: {"in": [...]}} one of, {key: {"gte": x, "lt": y}} a '
                "range of numbers or ISO times; every key must hold."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Retrieve passages, concepts and rules for a query (what is true now, or as_of a
        time); each passage has valid_from, valid_until and superseded_by; returns a query_id
        for feedback."""
        memory = await caller.memory(ctx)
        result = await caller.answer(
            memory.search(
                query, top_k=top_k, mode=mode, since=since, until=until, domain=domains or None,
                profile=profile, min_relevance=min_relevance, as_of=as_of,
                include_superseded=include_superseded, filters=filters,
            )
        )  # fmt: skip
        return shortened(result.to_dict(), max_text_chars)

    return make_tool(qortex_query, QueryResult, READ_ONLY)


def shortened(result: dict, max_text_chars: int) -> dict:
    """A QueryResult's dict with passage texts cut to ``max_text_chars``."""
    for hit in result["passages"]:
        hit["text"] = hit["text"][:max_text_chars]
    return result


def feedback_tool(caller: Caller) -> Tool:
    async def qortex_feedback(
        ctx: Context,
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
        suppressed in later queries. The same judgement again is recorded once."""
        memory = await caller.memory(ctx)
        events = await caller.answer(
            memory.feedback(
                query_id, accepted=accepted or [], rejected=rejected or [], partial=partial or []
            )
        )
        concepts = sorted({c for e in events for c in e.concept_ids})
        return FeedbackSummary(query_id, len(events), concepts, list(events)).to_dict()

    return make_tool(qortex_feedback, FeedbackSummary, writes(destructive=False, idempotent=True))


def record_tools(caller: Caller) -> list[Tool]:
    async def qortex_get(ctx: Context, id: RecordId) -> dict[str, Any]:
        """The current state of one memory or file passage: text, event time, revision (for
        expected_revision), metadata, tier, and whether it was forgotten or superseded."""
        memory = await caller.memory(ctx)
        return (await caller.answer(memory.get(id))).to_dict()

    async def qortex_list(
        ctx: Context,
        domain: Annotated[str | None, Field(description="Only memories of this domain.")] = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[
            int, Field(ge=1, le=MAX_LIST, description=f"At most this many (1-{MAX_LIST}).")
        ] = 50,
        include_superseded: Annotated[
            bool, Field(description="Also statements a later one superseded.")
        ] = False,
    ) -> dict[str, Any]:
        """List the live written memories (not file passages), newest event time first."""
        memory = await caller.memory(ctx)
        records = await caller.answer(
            memory.list(
                domain=domain, since=since, until=until, limit=limit,
                include_superseded=include_superseded,
            )
        )  # fmt: skip
        return RecordList(records, len(records)).to_dict()

    async def qortex_history(ctx: Context, id: RecordId) -> dict[str, Any]:
        """Every revision of a memory, oldest first: text, event time, when and who wrote it."""
        memory = await caller.memory(ctx)
        return History(id, await caller.answer(memory.history(id))).to_dict()

    return [
        make_tool(qortex_get, MemoryRecord, READ_ONLY),
        make_tool(qortex_list, RecordList, READ_ONLY),
        make_tool(qortex_history, History, READ_ONLY),
    ]


def graph_tools(caller: Caller) -> list[Tool]:
    async def qortex_neighbors(
        ctx: Context,
        name: Name,
        depth: Annotated[int, Field(ge=1, le=4, description="Hops from the concept (1-4).")] = 1,
        limit: Annotated[
            int, Field(ge=1, le=1000, description="At most this many neighbours (1-1000).")
        ] = 30,
    ) -> dict[str, Any]:
        """Concepts near a concept in the knowledge graph (latest snapshot), nearest and
        strongest first, with the relation that links each; says which concept the name
        resolved to."""
        memory = await caller.memory(ctx)
        found = await caller.answer(memory.neighbors(name, depth=depth, limit=limit))
        return found.to_dict()

    async def qortex_path(
        ctx: Context,
        source: Name,
        target: Name,
        max_len: Annotated[
            int, Field(ge=1, le=8, description="At most this many edges (1-8).")
        ] = 4,
    ) -> dict[str, Any]:
        """A shortest path between two concepts through concepts and passages (found is false
        when there is none that short); each step names its edge."""
        memory = await caller.memory(ctx)
        found = await caller.answer(memory.path(source, target, max_len=max_len))
        return found.to_dict()

    return [
        make_tool(qortex_neighbors, Neighborhood, READ_ONLY),
        make_tool(qortex_path, GraphPath, READ_ONLY),
    ]
