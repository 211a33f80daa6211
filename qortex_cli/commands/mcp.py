"""``qortex mcp``: serve the memory as MCP over stdio or streamable HTTP (bearer tokens)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from qortex_cli.parsing import add_home


def cmd_mcp(args: argparse.Namespace) -> int:
    from qortex_core.mcp_server import MCPConfig, serve, serve_http
    from qortex_core.storage.tenants import validate_tenant

    validate_tenant(args.tenant)
    where = _http_address(args)  # usage errors before anything loads
    config = MCPConfig(home=args.home, tenant=args.tenant, consolidate=consolidate_in_subprocess)
    if where is None:
        print("qortex mcp: serving on stdio (the embedder loads meanwhile)", file=sys.stderr)
        serve(config)
        return 0
    from qortex_core.serving.auth import read_tokens

    tokens = read_tokens(args.tokens)
    tenants = len(set(tokens.values()))
    print(
        f"qortex mcp: serving http://{where[0]}:{where[1]}/mcp for {len(tokens)} token(s) of "
        f"{tenants} tenant(s)",
        file=sys.stderr,
    )
    serve_http(config, where[0], where[1], tokens)
    return 0


def _http_address(args: argparse.Namespace) -> tuple[str, int] | None:
    """``--http HOST:PORT`` as (host, port), None for stdio; ``--tokens`` goes with it."""
    from qortex_core.errors import ConfigError

    if args.http is None:
        if args.tokens:
            raise ConfigError("--tokens is for --http HOST:PORT (stdio serves --tenant)")
        return None
    if not args.tokens:
        raise ConfigError("--http needs --tokens FILE (lines 'TOKEN TENANT'): no open server")
    host, _, port = args.http.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http wants HOST:PORT, e.g. 127.0.0.1:8765, got {args.http!r}")
    return host.strip("[]"), int(port)


def consolidate_in_subprocess(home, tenant: str) -> dict:
    """Run ``qortex consolidate --json`` for ``tenant`` in a child process; its summary.

    A child process, because the Dagster run sets process-wide state (``DAGSTER_HOME``, its
    logging) that the server's other tenants must not see, and its output must stay off the
    stdio channel.

    Raises:
        QortexError: the command failed (its one-line error).
    """
    from qortex_core.errors import QortexError

    argv = [sys.executable, "-m", "qortex_cli", "consolidate", "--json", "--quiet"]
    argv += ["--tenant", tenant] + (["--home", str(home)] if home else [])
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        error = next((x for x in reversed(lines) if x.startswith("qortex: error: ")), None)
        raise QortexError(
            error.removeprefix("qortex: error: ")
            if error
            else f"consolidate failed "
            f"(exit {done.returncode}): {lines[-1] if lines else 'no output'}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def register(sub: argparse._SubParsersAction) -> None:
    mc = sub.add_parser(
        "mcp",
        help="serve the memory (query, remember, list, graph, consolidate...) as MCP over stdio "
        "or streamable HTTP",
    )
    add_home(mc)
    mc.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (needs --tokens)",
    )
    mc.add_argument(
        "--tokens",
        metavar="FILE",
        help="bearer tokens for --http: lines 'TOKEN TENANT' (16+ character tokens); a request "
        "reads only its token's tenant",
    )
    mc.set_defaults(func=cmd_mcp)
