"""The tools that write: remember, update, forget and consolidate."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from qortex_core.memory.records import MemoryRecord
from qortex_core.serving.read_tools import ISO_TIME, RecordId
from qortex_core.serving.results import Consolidation
from qortex_core.serving.tool_kit import Caller, make_tool, writes

MemoryId = Annotated[
    str,
    Field(
        description="A memory id (m_...). A file's passage (p_...) cannot be updated: it changes "
        "with its file; qortex_forget and qortex_history take p_ ids."
    ),
]
ExpectedRevision = Annotated[
    int | None,
    Field(
        ge=1,
        description="Write only if this is still the record's newest revision (from qortex_get "
        "or an earlier write); a stale one is refused and nothing is written.",
    ),
]


def write_tools(caller: Caller) -> list[Tool]:
    async def qortex_remember(
        ctx: Context,
        text: Annotated[str, Field(description="The fact to remember (at most 1 MB).")],
        time: Annotated[
            str | None, Field(description=f"When it happened (event time): {ISO_TIME}.")
        ] = None,
        domain: Annotated[str | None, Field(description="A domain to file it under.")] = None,
        source: Annotated[str | None, Field(description="Where it came from.")] = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="A JSON object stored with it (a user, session or message id)."),
        ] = None,
    ) -> dict[str, Any]:
        """Store a memory durably; it is searchable at once (tier 'fresh') and joins the graph
        at the next consolidation. Secrets in the text are redacted before storage."""
        memory = await caller.memory(ctx)
        record = await caller.answer(
            memory.remember(text, time=time, domain=domain, source=source, metadata=metadata)
        )
        return record.to_dict()

    async def qortex_update(
        ctx: Context,
        id: MemoryId,
        text: Annotated[str, Field(description="The new text of the memory.")],
        expected_revision: ExpectedRevision = None,
    ) -> dict[str, Any]:
        """Revise a written memory (m_... ids only; a file's passage changes with its file): a
        new revision replaces it in search; history keeps the old one."""
        memory = await caller.memory(ctx)
        record = await caller.answer(memory.update(id, text, expected_revision=expected_revision))
        return record.to_dict()

    async def qortex_forget(
        ctx: Context, id: RecordId, expected_revision: ExpectedRevision = None
    ) -> dict[str, Any]:
        """Forget a memory or a file's passage. Irreversible for search: it leaves every result
        at once and the next snapshot. qortex_history still keeps the record and its text."""
        memory = await caller.memory(ctx)
        record = await caller.answer(memory.forget(id, expected_revision=expected_revision))
        return record.to_dict()

    return [
        make_tool(qortex_remember, MemoryRecord, writes(destructive=False, idempotent=False)),
        make_tool(qortex_update, MemoryRecord, writes(destructive=False, idempotent=False)),
        make_tool(qortex_forget, MemoryRecord, writes(destructive=True, idempotent=True)),
    ]


def consolidate_tool(caller: Caller) -> Tool:
    async def qortex_consolidate(ctx: Context) -> dict[str, Any]:
        """Move the written memories into the knowledge graph now (runs the Dagster job; can
        take minutes): afterwards they are tier 'graph' and reachable by qortex_neighbors and
        qortex_path. Unchanged input changes nothing."""
        memory = await caller.memory(ctx)  # the caller's tenant, as every tool has it
        backend = caller.tenants.backend
        assert backend.consolidate is not None  # registered only with one
        summary = await caller.answer(
            asyncio.to_thread(backend.consolidate, backend.home, memory.tenant)
        )
        return Consolidation.from_dict(summary).to_dict()

    return make_tool(qortex_consolidate, Consolidation, writes(destructive=False, idempotent=True))
