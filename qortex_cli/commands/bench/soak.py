"""``qortex bench soak``: writers, readers, consolidation and purge at once, then an audit."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from qortex_cli.commands.bench.home import clear_home


def cmd_bench_soak(args: argparse.Namespace) -> int:
    from qortex_bench.soak import SoakConfig, run_soak
    from qortex_cli.commands.purge import purge_home
    from qortex_cli.runs.local import run_ingest

    home = Path(args.home).expanduser()
    clear_home(home, args.fresh_home)
    os.environ["QORTEX_EMBEDDER"] = args.embedder  # the consolidation embeds as the workers do
    os.environ.setdefault("QORTEX_EXTRACTOR", "offline")
    config = SoakConfig(home, args.processes, args.seconds, embedder=args.embedder)
    report = run_soak(
        config,
        consolidate=lambda h: run_ingest(None, h, progress=False),
        purge=lambda h: purge_home(h, 1),
    )
    text = json.dumps(report, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    failed = (
        report["lost_writes"]
        or report["inconsistent_histories"]
        or report["crashed_processes"]
        or report["unexpected_error_count"]
        or report["background_errors"]
    )
    return 1 if failed else 0


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "soak",
        help="N processes remember/update/forget/search while consolidate and purge run; audit",
    )
    p.add_argument("--home", required=True, help="a fresh data home for the run")
    p.add_argument("--fresh-home", action="store_true", help="delete --home first if not empty")
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--embedder", default="hash:64", help="embedder spec of every process")
    p.add_argument("--json", help="also write the report here")
    p.set_defaults(func=cmd_bench_soak)
