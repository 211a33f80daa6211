"""``qortex mcp --http`` with the official MCP client: bearer tokens, tenant isolation, load.

One real server process on loopback for the module, two tenants with a token each. A request
without a valid token is refused (401) before any tool runs; a token reads and writes only its
own tenant; 20 concurrent clients (the short form of ``qortex bench mcp``) see no other
tenant's memory.
"""

from __future__ import annotations

import secrets

import anyio
import httpx2
import pytest

from qortex_bench.mcp_load import Client, LoadConfig, drive, free_port, start_server, wait_listening

TENANTS = ("alpha", "bravo")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp_http")
    tokens = {secrets.token_urlsafe(24): tenant for tenant in TENANTS}
    (root / "tokens").write_text(
        "# token tenant\n" + "".join(f"{t} {n}\n" for t, n in tokens.items())
    )
    port = free_port()
    process = start_server(root / "home", root / "tokens", port, root / "server.log")
    try:
        wait_listening(process, port, 120)
        yield f"http://127.0.0.1:{port}/mcp", {n: t for t, n in tokens.items()}, root
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_request_without_a_valid_token_is_refused(server):
    url, tokens, _ = server
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for headers in ({}, {"Authorization": "Bearer not-a-token-0123456789"},
                    {"Authorization": tokens["alpha"]}):  # fmt: skip
        refused = httpx2.post(url, json=hello, headers=headers, timeout=30)
        assert refused.status_code == 401, headers

    async def with_bad_token() -> None:
        async with Client(url, "wrong-token-0123456789abcdef"):
            pass

    with pytest.raises(BaseException):  # the official client cannot even initialize
        anyio.run(with_bad_token)


async def _two_tenants(url: str, tokens: dict[str, str]) -> dict:
    out: dict = {}
    async with Client(url, tokens["alpha"]) as alpha:
        made = await alpha.call_tool("qortex_remember", {"text": "Alpha's vault code is 7431."})
        out["id"] = made.structured_content["id"]
        out["alpha_query"] = await alpha.call_tool("qortex_query", {"query": "vault code"})
        out["alpha_list"] = await alpha.call_tool("qortex_list", {})
    async with Client(url, tokens["bravo"]) as bravo:
        await bravo.call_tool("qortex_remember", {"text": "Bravo's vault code is 1188."})
        out["bravo_query"] = await bravo.call_tool("qortex_query", {"query": "vault code 7431"})
        out["bravo_list"] = await bravo.call_tool("qortex_list", {})
        for tool in ("qortex_get", "qortex_history", "qortex_forget"):
            out[f"bravo_{tool}"] = await bravo.call_tool(tool, {"id": out["id"]})
        out["bravo_update"] = await bravo.call_tool(
            "qortex_update", {"id": out["id"], "text": "Alpha's vault code is 0000."}
        )
    async with Client(url, tokens["alpha"]) as alpha:
        out["alpha_after"] = await alpha.call_tool("qortex_get", {"id": out["id"]})
    return out


def _texts(result) -> list[str]:
    data = result.structured_content
    return [p["text"] for p in data.get("passages", data.get("records", []))]


def test_a_token_never_reaches_another_tenants_data(server):
    url, tokens, root = server
    out = anyio.run(_two_tenants, url, tokens)
    assert any("7431" in t for t in _texts(out["alpha_query"]))
    assert [r["id"] for r in out["alpha_list"].structured_content["records"]] == [out["id"]]
    for name in ("bravo_query", "bravo_list"):
        texts = _texts(out[name])
        assert texts and not any("7431" in t for t in texts), texts  # its own, never alpha's
    for tool in ("qortex_get", "qortex_history", "qortex_forget", "update"):
        result = out[f"bravo_{tool}"]
        assert result.is_error and "unknown memory id" in result.content[0].text, tool
    after = out["alpha_after"].structured_content
    assert after["revision"] == 1 and not after["forgotten"] and "7431" in after["text"]
    assert sorted(p.name for p in (root / "home" / "tenants").iterdir()) == list(TENANTS)


def test_concurrent_clients_see_only_their_tenant(server):
    url, tokens, root = server
    config = LoadConfig(root / "home", clients=20, tenants=len(TENANTS), calls=2)
    tally, seconds = anyio.run(drive, url, {t: n for n, t in tokens.items()}, config)
    assert tally.errors == []
    assert len(tally.latencies) == 20 * (2 + 2) and seconds > 0
    assert tally.own_reads > 0 and tally.cross_tenant_reads == 0
