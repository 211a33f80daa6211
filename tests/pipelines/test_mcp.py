"""``qortex mcp``: a round trip over stdio with the mcp client (list tools, query, feedback)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from qortex_core.feedback.events import read_events
from qortex_core.storage.store import LanceStore

sys.path.insert(0, str(Path(__file__).parent))
from mcp_stdio import server_params  # noqa: E402
from memory_corpus import corpus, ingest  # noqa: E402


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("mcp_home")
    ingest(path, corpus(), embedder)
    return path


async def _round_trip(home: Path) -> dict:
    params = server_params(home)
    out: dict = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
                query = await session.call_tool(
                    "qortex_query",
                    {"query": "Who services the Orion Pump?", "top_k": 3, "mode": "hipporag"},
                )
                out["query"] = query
                data = query.structured_content
                first = data["passages"][0]["id"]
                out["feedback"] = await session.call_tool(
                    "qortex_feedback", {"query_id": data["query_id"], "accepted": [first]}
                )
                out["bad"] = await session.call_tool(
                    "qortex_feedback", {"query_id": "q_unknown", "rejected": [first]}
                )
                out["first"] = first
                out["empty_query"] = await session.call_tool(
                    "qortex_query", {"query": "   ", "top_k": 3}
                )
                out["bad_top_k"] = await session.call_tool(
                    "qortex_query", {"query": "Orion Pump", "top_k": 0}
                )
                out["after_errors"] = await session.call_tool(
                    "qortex_query", {"query": "Orion Pump", "top_k": 1}
                )
    return out


def test_mcp_round_trip_over_stdio(home):
    out = anyio.run(_round_trip, home)
    assert out["tools"] == [
        "qortex_consolidate",
        "qortex_feedback",
        "qortex_forget",
        "qortex_get",
        "qortex_history",
        "qortex_list",
        "qortex_neighbors",
        "qortex_path",
        "qortex_query",
        "qortex_remember",
        "qortex_update",
    ]
    data = out["query"].structured_content
    assert (
        not out["query"].is_error
        and data["query_id"].startswith("q_")
        and len(data["passages"]) == 3
    )
    assert any("Orion Pump" in p["text"] for p in data["passages"])
    fb = out["feedback"].structured_content
    assert not out["feedback"].is_error and fb["recorded"] == 1 and fb["concepts"]
    assert out["bad"].is_error and "unknown query id" in out["bad"].content[0].text
    # bad input is an error result with the library's one-line message; the server keeps serving
    assert out["empty_query"].is_error and "query is empty" in out["empty_query"].content[0].text
    assert out["bad_top_k"].is_error and "top_k" in out["bad_top_k"].content[0].text
    assert "Traceback" not in out["empty_query"].content[0].text + out["bad_top_k"].content[0].text
    assert (
        not out["after_errors"].is_error
        and len(out["after_errors"].structured_content["passages"]) == 1
    )
    events, _ = read_events(LanceStore.open(home))
    assert [(e.query_id, e.result_id, e.kind) for e in events] == [
        (data["query_id"], out["first"], "accepted")
    ]
