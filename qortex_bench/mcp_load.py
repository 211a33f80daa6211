"""``qortex bench mcp``: concurrent MCP clients over streamable HTTP against ``qortex mcp --http``.

The bench starts the real server (``python -m qortex_cli mcp --http 127.0.0.1:PORT --tokens
FILE``) on a fresh home with one token per tenant. Each tenant first remembers a fact holding its
own secret code (which also waits out the embedder's load); then every client, with its tenant's
token and the official MCP client, remembers a note with that code, queries "What is the vault
code?" ``calls`` times and lists its memories, all clients at once. Every passage and record a
client reads is checked for another tenant's code: a cross-tenant read. The report gives p50,
p99 and max latency of the timed calls (queries, lists and remembers), calls per second, errors
and cross-tenant reads.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import numpy as np
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

QUESTION = "What is the vault code?"


@dataclass(frozen=True)
class LoadConfig:
    """Attributes:
    home: a fresh data home for the server.
    clients: concurrent MCP clients (spread round-robin over the tenants).
    tenants: tenants, one token each.
    calls: queries per client.
    ready_s: how long to wait for the server to accept connections.
    """

    home: Path
    clients: int = 50
    tenants: int = 5
    calls: int = 10
    ready_s: float = 120.0


@dataclass
class Tally:
    """What the clients saw."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cross_tenant_reads: int = 0
    own_reads: int = 0  # texts holding the client's own tenant's code (the check can see)
    reads_checked: int = 0


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(home: Path, tokens_file: Path, port: int, log: Path) -> subprocess.Popen:
    """``qortex mcp --http`` in a child process (offline), its stderr to ``log``."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [sys.executable, "-m", "qortex_cli", "mcp", "--home", str(home)]
    argv += ["--http", f"127.0.0.1:{port}", "--tokens", str(tokens_file)]
    with open(log, "wb") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)


def wait_listening(process: subprocess.Popen, port: int, limit_s: float) -> float:
    """Seconds until ``port`` accepts a connection.

    Raises:
        RuntimeError: the process exited, or nothing listened within ``limit_s``.
    """
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return time.monotonic() - start
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the MCP server did not listen on port {port} within {limit_s} s")


class Client:
    """One MCP session over HTTP with a bearer token."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token = url, token

    async def __aenter__(self) -> ClientSession:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0))
        self._transport = streamable_http_client(self.url, http_client=self._http)
        read, write = await self._transport.__aenter__()
        self._session = ClientSession(read, write)
        session = await self._session.__aenter__()
        await session.initialize()
        return session

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)
        await self._transport.__aexit__(*exc)
        await self._http.aclose()


def foreign(texts: list[str], codes: dict[str, str], tenant: str) -> int:
    """How many of ``texts`` hold another tenant's code."""
    return sum(any(c in t for other, c in codes.items() if other != tenant) for t in texts)


async def seed(url: str, token: str, tenant: str, code: str) -> None:
    """The tenant's first memory (its first call also waits for the embedder)."""
    async with Client(url, token) as session:
        done = await session.call_tool(
            "qortex_remember", {"text": f"The vault code of {tenant} is {code}."}
        )
        if done.is_error:
            raise RuntimeError(f"seeding {tenant} failed: {done.content}")


async def _timed(session: ClientSession, tally: Tally, tool: str, args: dict) -> dict | None:
    start = time.perf_counter()
    done = await session.call_tool(tool, args)
    tally.latencies.append(time.perf_counter() - start)
    if done.is_error:
        said = getattr(done.content[0], "text", "?") if done.content else "?"
        tally.errors.append(f"{tool}: {said}")
        return None
    return done.structured_content


async def one_client(
    url: str, token: str, tenant: str, codes: dict[str, str], calls: int, tally: Tally
) -> None:
    """Remember, query ``calls`` times and list, counting what belongs to another tenant."""
    try:
        async with Client(url, token) as session:
            note = {"text": f"Note for {tenant}: the vault code {codes[tenant]} still holds."}
            await _timed(session, tally, "qortex_remember", note)
            texts: list[str] = []
            for _ in range(calls):
                found = await _timed(session, tally, "qortex_query", {"query": QUESTION})
                texts += [p["text"] for p in (found or {}).get("passages", [])]
            listed = await _timed(session, tally, "qortex_list", {"limit": 100})
            texts += [r["text"] for r in (listed or {}).get("records", [])]
    except Exception as exc:  # a failed session is counted, not fatal to the run
        tally.errors.append(f"session: {type(exc).__name__}: {exc}"[:300])
        return
    tally.reads_checked += len(texts)
    tally.own_reads += sum(codes[tenant] in t for t in texts)
    tally.cross_tenant_reads += foreign(texts, codes, tenant)


async def drive(url: str, tokens: dict[str, str], config: LoadConfig) -> tuple[Tally, float]:
    """Seed every tenant, then run all clients at once; the tally and the timed seconds."""
    codes = {tenant: f"code-{secrets.token_hex(4)}" for tenant in tokens.values()}
    by_tenant = {tenant: token for token, tenant in tokens.items()}
    async with anyio.create_task_group() as group:
        for tenant, token in by_tenant.items():
            group.start_soon(seed, url, token, tenant, codes[tenant])
    tally, tenants = Tally(), sorted(by_tenant)
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for n in range(config.clients):
            tenant = tenants[n % len(tenants)]
            group.start_soon(one_client, url, by_tenant[tenant], tenant, codes, config.calls, tally)
    return tally, time.perf_counter() - start


def report(tally: Tally, seconds: float, config: LoadConfig, listen_s: float) -> dict:
    """The bench's JSON report."""
    ms = np.asarray(tally.latencies, np.float64) * 1000.0
    pct = (lambda q: round(float(np.percentile(ms, q)), 1)) if len(ms) else (lambda q: None)
    return {
        "clients": config.clients,
        "tenants": config.tenants,
        "queries_per_client": config.calls,
        "calls": len(tally.latencies),
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "max_ms": round(float(ms.max()), 1) if len(ms) else None,
        "calls_per_s": round(len(ms) / seconds, 1) if seconds > 0 else None,
        "seconds": round(seconds, 2),
        "errors": len(tally.errors),
        "first_errors": tally.errors[:3],
        "reads_checked": tally.reads_checked,
        "own_tenant_reads": tally.own_reads,
        "cross_tenant_reads": tally.cross_tenant_reads,
        "server_listening_s": round(listen_s, 2),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run_mcp_load(config: LoadConfig) -> dict:
    """Start the server on ``config.home``, drive it, stop it; the report."""
    config.home.mkdir(parents=True, exist_ok=True)
    tokens = {secrets.token_urlsafe(24): f"tenant-{n}" for n in range(config.tenants)}
    tokens_file = config.home.parent / f"{config.home.name}.tokens"
    tokens_file.write_text("".join(f"{t} {tenant}\n" for t, tenant in tokens.items()))
    tokens_file.chmod(0o600)
    port = free_port()
    server = start_server(config.home, tokens_file, port, config.home.parent / "mcp-server.log")
    try:
        listen_s = wait_listening(server, port, config.ready_s)
        tally, seconds = anyio.run(drive, f"http://127.0.0.1:{port}/mcp", tokens, config)
    finally:
        server.terminate()
        server.wait(timeout=30)
        tokens_file.unlink(missing_ok=True)
    return report(tally, seconds, config, listen_s)
