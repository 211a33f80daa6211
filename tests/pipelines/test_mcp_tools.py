"""``qortex mcp`` over stdio with the official client: a fast initialize, the server's name and
version, annotations and typed output schemas, the record tools, expected_revision, the graph
tools, and consolidate (the Dagster job, run by ``qortex consolidate`` in a child process).

The client validates every structured result against the tool's ``outputSchema``, so each call
below also checks that the schema describes what the tool returns.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).parents[1]))
from mcp_stdio import server_params  # noqa: E402

READERS = {"qortex_query", "qortex_history", "qortex_list", "qortex_get", "qortex_neighbors",
           "qortex_path"}  # fmt: skip


async def _session(home: Path, script) -> dict:
    out: dict = {}
    with open(os.devnull, "w") as errlog:
        started = time.monotonic()
        async with stdio_client(server_params(home), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                out["init"] = await session.initialize()
                out["init_s"] = time.monotonic() - started
                out["started"] = started
                await script(session, out)
                out["done_s"] = time.monotonic() - started
    return out


async def _first_query(session: ClientSession, out: dict) -> None:
    query = {"query": "Where was Orlan Vesk born?", "top_k": 2}
    out["query"] = await session.call_tool("qortex_query", query)
    out["ready_s"] = time.monotonic() - out["started"]
    out["tools"] = {t.name: t for t in (await session.list_tools()).tools}


async def _explore(session: ClientSession, out: dict) -> None:
    call = session.call_tool
    made = await call("qortex_remember", {"text": "Orlan Vesk keeps a violin in Velmora.",
                                          "metadata": {"session": "s-7", "turn": 2}})  # fmt: skip
    rid = made.structured_content["id"]
    await call("qortex_remember", {"text": "Orlan Vesk keeps a flute in Velmora.",
                                   "metadata": {"session": "s-8", "turn": 5}})  # fmt: skip
    ask = {"query": "What does Orlan Vesk keep in Velmora?", "top_k": 1, "mode": "dense"}
    out["filtered"] = await call("qortex_query", dict(ask, filters={"session": "s-7"}))
    out["ranged"] = await call("qortex_query", dict(ask, filters={"turn": {"gte": 3}}))
    out["bad_filter"] = await call("qortex_query", dict(ask, filters={"turn": {"near": 3}}))
    out["get"] = await call("qortex_get", {"id": rid})
    out["update"] = await call("qortex_update", {"id": rid, "text": "Orlan Vesk keeps a cello "
                               "in Velmora.", "expected_revision": 1})  # fmt: skip
    out["stale_update"] = await call("qortex_update", {"id": rid, "text": "x",
                                                       "expected_revision": 1})  # fmt: skip
    out["stale_forget"] = await call("qortex_forget", {"id": rid, "expected_revision": 1})
    out["list"] = await call("qortex_list", {})
    out["history"] = await call("qortex_history", {"id": rid})
    out["forget"] = await call("qortex_forget", {"id": rid, "expected_revision": 2})
    out["neighbors"] = await call("qortex_neighbors", {"name": "Ostrania"})
    out["path"] = await call("qortex_path", {"source": "Orlan Vesk", "target": "Velmora"})
    out["bad_depth"] = await call("qortex_neighbors", {"name": "Ostrania", "depth": 9})


def test_initialize_does_not_wait_for_the_model_and_tools_state_what_they_do(toy_home):
    out = anyio.run(_session, toy_home, _first_query)
    # baseline: the first query's answer, which waits for the model's background load (seconds);
    # initialize came long before it. Before this change initialize came after the load, and
    # the first query at once after it.
    assert not out["query"].is_error and out["query"].structured_content["passages"]
    assert out["init_s"] < 0.5 * out["ready_s"], (out["init_s"], out["ready_s"])
    info = out["init"].server_info
    assert (info.name, info.version) == ("qortex", importlib.metadata.version("qortex"))
    tools = out["tools"]
    assert {n for n, t in tools.items() if t.annotations.read_only_hint} == READERS
    assert [n for n, t in tools.items() if t.annotations.destructive_hint] == ["qortex_forget"]
    idempotent = {n for n, t in tools.items() if t.annotations.idempotent_hint}
    assert idempotent == READERS | {"qortex_forget", "qortex_feedback", "qortex_consolidate"}
    for name, tool in tools.items():  # typed, not a generic object
        props = tool.output_schema["properties"]
        assert tool.output_schema["type"] == "object" and props, name
        assert all("type" in p or "$ref" in p or "anyOf" in p for p in props.values()), name
    assert "metadata" in tools["qortex_remember"].input_schema["properties"]
    for name in ("qortex_update", "qortex_forget"):
        assert "expected_revision" in tools[name].input_schema["properties"]


def test_record_and_graph_tools_over_stdio(toy_home):
    out = anyio.run(_session, toy_home, _explore)
    got = out["get"].structured_content
    assert got["metadata"] == {"session": "s-7", "turn": 2} and got["revision"] == 1
    assert [h["text"] for h in out["filtered"].structured_content["passages"]] == [
        "Orlan Vesk keeps a violin in Velmora."]  # fmt: skip
    assert [h["text"] for h in out["ranged"].structured_content["passages"]] == [
        "Orlan Vesk keeps a flute in Velmora."]  # fmt: skip
    assert out["bad_filter"].is_error and "near" in out["bad_filter"].content[0].text
    assert out["update"].structured_content["revision"] == 2
    for name in ("stale_update", "stale_forget"):
        text = out[name].content[0].text
        assert out[name].is_error and "expected_revision" in text and "revision 2" in text
        assert "\n" not in text and "Traceback" not in text
    listed = out["list"].structured_content
    assert listed["count"] == 2 and any("cello" in r["text"] for r in listed["records"])
    assert [r["op"] for r in out["history"].structured_content["revisions"]] == [
        "remember", "update"]  # fmt: skip
    assert out["forget"].structured_content["forgotten"] is True
    near = out["neighbors"].structured_content
    assert near["resolved"]["name"] == "Ostrania" and near["neighbors"]
    assert "Velmora" in {n["name"] for n in near["neighbors"]}
    path = out["path"].structured_content
    assert path["found"] and path["length"] >= 1
    assert (path["steps"][0]["name"], path["steps"][-1]["name"]) == ("Orlan Vesk", "Velmora")
    assert out["bad_depth"].is_error and "depth" in out["bad_depth"].content[0].text


async def _consolidate(session: ClientSession, out: dict) -> None:
    call = session.call_tool
    out["before"] = await call("qortex_consolidate", {})
    await call("qortex_remember", {"text": "The Orion Pump is serviced by the Delta Crew."})
    await call("qortex_remember", {"text": "The Delta Crew is based at Cedar Ridge Station."})
    out["consolidate"] = await call("qortex_consolidate", {})
    out["query"] = await call("qortex_query", {"query": "Who services the Orion Pump?"})
    out["neighbors"] = await call("qortex_neighbors", {"name": "Delta Crew"})


def test_consolidate_moves_written_memories_into_the_graph(tmp_path):
    out = anyio.run(_session, tmp_path / "home", _consolidate)
    before = out["before"]
    assert before.is_error and "nothing to consolidate" in before.content[0].text
    done = out["consolidate"]
    assert not done.is_error, done.content
    summary = done.structured_content
    assert summary["memories"] == 2 and summary["snapshot"] and summary["run_id"]
    hits = out["query"].structured_content["passages"]
    assert hits and hits[0]["tier"] == "graph" and "Delta Crew" in hits[0]["text"]
    assert not out["neighbors"].is_error and out["neighbors"].structured_content["neighbors"]
