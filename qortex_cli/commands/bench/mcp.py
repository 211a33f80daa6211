"""``qortex bench mcp``: 50 concurrent MCP clients over HTTP: p50, p99, cross-tenant reads."""

from __future__ import annotations

import argparse
from pathlib import Path

from qortex_cli.commands.bench.home import clear_home
from qortex_cli.output import emit_report


def cmd_bench_mcp(args: argparse.Namespace) -> int:
    from qortex_bench.mcp_load import LoadConfig, run_mcp_load
    from qortex_core.errors import ConfigError

    home = Path(args.home)
    clear_home(home, args.fresh_home)
    if args.clients < 1 or args.tenants < 1 or args.calls < 1:
        raise ConfigError("--clients, --tenants and --calls must be at least 1")
    config = LoadConfig(home, clients=args.clients, tenants=args.tenants, calls=args.calls)
    emit_report(run_mcp_load(config), args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "mcp", help="concurrent MCP clients over HTTP: p50/p99 latency and cross-tenant reads"
    )
    p.add_argument("--home", required=True, help="a fresh data home for the server")
    p.add_argument("--fresh-home", action="store_true", help="delete --home first if not empty")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    p.add_argument("--tenants", type=int, default=5, help="tenants, one token each (default 5)")
    p.add_argument("--calls", type=int, default=10, help="queries per client (default 10)")
    p.add_argument("--json", help="also write the report here")
    p.set_defaults(func=cmd_bench_mcp)
