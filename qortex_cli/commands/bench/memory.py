"""``qortex bench memory``: remember, remember-to-searchable and fresh-tier search latency."""

from __future__ import annotations

import argparse
from pathlib import Path

from qortex_cli.commands.bench.home import clear_home
from qortex_cli.output import emit_report

REUSE_HINT = "use --fresh-home (delete it) or --reuse (keep its memories)"


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from qortex_bench.memory_bench import MemoryBenchConfig, run_memory_bench

    home = Path(args.home)
    reuse = home.exists() and any(home.iterdir()) and args.reuse
    if not reuse:
        clear_home(home, args.fresh_home, REUSE_HINT)
    config = MemoryBenchConfig(
        home, writes=args.writes, probes=args.probes, fresh=args.fresh, queries=args.queries
    )
    source = Path(args.snapshot_from) if args.snapshot_from and not reuse else None
    report = run_memory_bench(config, source)
    emit_report(report, args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "memory", help="remember p50, remember-to-searchable p50, search p50 with N fresh memories"
    )
    p.add_argument("--home", required=True, help="a fresh data home for the run")
    p.add_argument("--fresh-home", action="store_true", help="delete --home first if not empty")
    p.add_argument(
        "--reuse", action="store_true", help="keep an earlier run's home (its fresh memories)"
    )
    p.add_argument("--snapshot-from", help="ingest this folder first, so searches walk a snapshot")
    p.add_argument("--writes", type=int, default=200)
    p.add_argument("--probes", type=int, default=20)
    p.add_argument("--fresh", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--json", help="also write the report here")
    p.set_defaults(func=cmd_bench_memory)
