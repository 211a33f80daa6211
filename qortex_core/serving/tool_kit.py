"""How a qortex MCP tool is made: typed output schema, annotations, tenant and one-line errors.

A tool returns its record's ``to_dict()``; its ``outputSchema`` is that record type's
``json_schema()`` (so the client validates what it gets against the shape the library writes).
Which tenant a call reads is never an argument: over stdio it is the server's; over HTTP it is the
one the caller's bearer token maps to (:mod:`qortex_core.serving.auth`), and a call without one is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations

from qortex_core.errors import QortexError, RevisionConflict
from qortex_core.jsonable import JsonRecord
from qortex_core.serving.backend import Tenants

if TYPE_CHECKING:  # the memory API loads on the first call, not at server start
    from qortex_core.agent.aio import AsyncMemory

T = TypeVar("T")

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def writes(destructive: bool, idempotent: bool) -> ToolAnnotations:
    """The annotations of a tool that writes to the memory (never outside it)."""
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def make_tool(
    fn: Callable[..., Any], output: type[JsonRecord], annotations: ToolAnnotations
) -> Tool:
    """``fn`` as a tool: its docstring on one line as the description, ``output``'s schema."""
    description = " ".join((fn.__doc__ or "").split())
    tool = Tool.from_function(
        fn, description=description, annotations=annotations, structured_output=True
    )
    tool.fn_metadata.output_schema = output.json_schema()  # read live by list_tools
    return tool


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def token_tenant(ctx: Context) -> str | None:
    """The tenant of the bearer token the request came with (None: no token, e.g. stdio)."""
    try:
        request = ctx.request_context.request
    except ValueError:  # called in process, outside any request
        return None
    scope = getattr(request, "scope", None) or {}
    token = getattr(scope.get("user"), "access_token", None)
    claims = getattr(token, "claims", None) or {}
    tenant = claims.get("tenant")
    return tenant if isinstance(tenant, str) else None


@dataclass(frozen=True)
class Caller:
    """Finds the memory a call may use and runs library calls with one-line errors.

    Attributes:
        tenants: the memories.
        tenant: the tenant of a stdio server (None: the default tenant).
        require_token: an HTTP server: only a token's tenant, never the fallback.
    """

    tenants: Tenants
    tenant: str | None = None
    require_token: bool = False

    async def memory(self, ctx: Context) -> AsyncMemory:
        """The memory of the caller's tenant.

        Raises:
            ToolError: an HTTP call carries no tenant (its token maps to none).
        """
        tenant = token_tenant(ctx)
        if tenant is None:
            if self.require_token:
                raise ToolError("this server needs a bearer token that maps to a tenant")
            tenant = self.tenant or "default"
        return await self.answer(self.tenants.memory(tenant))

    async def answer(self, call: Awaitable[T]) -> T:
        """``await call``; a QortexError becomes the tool's error result, on one line."""
        try:
            return await call
        except RevisionConflict as exc:
            raise ToolError(f"expected_revision is stale: {one_line(exc)}") from exc
        except QortexError as exc:
            raise ToolError(one_line(exc)) from exc
