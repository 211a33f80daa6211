"""``qortex mcp`` write tools over stdio: schemas, remember, query, history, forget, errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).parents[1]))
from mcp_stdio import server_params  # noqa: E402

FACT = "The Ventra Bridge was painted red by the Osk Brothers."


async def _session_run(home: Path) -> dict:
    params = server_params(home)
    out: dict = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
                out["remember"] = await session.call_tool(
                    "qortex_remember", {"text": FACT, "time": "2026-03-05", "domain": "notes"}
                )
                rid = out["remember"].structured_content["id"]
                out["query"] = await session.call_tool(
                    "qortex_query", {"query": "Who painted the Ventra Bridge?", "top_k": 3}
                )
                out["window"] = await session.call_tool(
                    "qortex_query", {"query": "Ventra Bridge", "until": "2026-01-01"}
                )
                out["update"] = await session.call_tool(
                    "qortex_update", {"id": rid, "text": FACT.replace("red", "blue")}
                )
                out["history"] = await session.call_tool("qortex_history", {"id": rid})
                out["forget"] = await session.call_tool("qortex_forget", {"id": rid})
                out["after"] = await session.call_tool(
                    "qortex_query", {"query": "Who painted the Ventra Bridge?", "top_k": 3}
                )
                out["again"] = await session.call_tool("qortex_forget", {"id": rid})
                out["empty"] = await session.call_tool("qortex_remember", {"text": "  "})
                out["bad_time"] = await session.call_tool(
                    "qortex_remember", {"text": FACT, "time": "soon"}
                )
                out["rid"] = rid
    return out


def test_mcp_write_tools_round_trip(tmp_path: Path):
    out = anyio.run(_session_run, tmp_path / "home")
    tools = out["tools"]
    assert {"qortex_remember", "qortex_update", "qortex_forget", "qortex_history"} <= set(tools)
    query_schema = tools["qortex_query"].input_schema["properties"]
    assert query_schema["top_k"]["minimum"] == 1 and query_schema["top_k"]["maximum"] == 100
    assert "auto" in query_schema["mode"]["enum"] and "dense" in query_schema["mode"]["enum"]
    assert {"since", "until", "min_relevance"} <= set(query_schema)
    assert all(p.get("description") for p in query_schema.values())
    assert "irreversible for search" in tools["qortex_forget"].description.lower()
    assert "history" in tools["qortex_forget"].description
    assert not out["remember"].is_error  # the first call waits for the model's background load
    hits = out["query"].structured_content["passages"]
    assert (hits[0]["id"], hits[0]["tier"]) == (out["rid"], "fresh")
    assert hits[0]["time"] == "2026-03-05T00:00:00Z"
    assert out["window"].structured_content["passages"] == []
    revisions = out["history"].structured_content["revisions"]
    assert [r["op"] for r in revisions] == ["remember", "update"] and "blue" in revisions[1]["text"]
    assert out["forget"].structured_content["forgotten"]
    assert out["rid"] not in [h["id"] for h in out["after"].structured_content["passages"]]
    for name in ("again", "empty", "bad_time"):
        assert out[name].is_error and "Traceback" not in out[name].content[0].text
    assert "forgotten" in out["again"].content[0].text
    assert "empty" in out["empty"].content[0].text
